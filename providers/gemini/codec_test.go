package gemini

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// TestCheckMediaGemini: a Gemini body sent as written lets only public or
// inline media leave: a gs: URI or a Files API URI is the operator's.
func TestCheckMediaGemini(t *testing.T) {
	for _, c := range []struct {
		name, body   string
		allow        []string
		member, kind string
	}{
		{"gemini inline", `{"contents":[{"role":"user","parts":[{"text":"see"},{"inlineData":{"mimeType":"image/png","data":"AAAA"}}]}]}`, nil, "", ""},
		{"gemini gs", `{"contents":[{"role":"user","parts":[{"text":"see"},{"fileData":{"mimeType":"image/png","fileUri":"gs://b/a.png"}}]}]}`, nil, "contents[0].parts[1].fileData.fileUri", "gs"},
		{"gemini the proto's names", `{"contents":[{"parts":[{"file_data":{"file_uri":"https://example.com/a.png"}}]}]}`, nil, "", ""},
		{"gemini a Files API URI", `{"contents":[{"parts":[{"fileData":{"fileUri":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}]}]}`, nil, "contents[0].parts[0].fileData.fileUri", translate.MediaFileID},
		{"gemini gs allowed", `{"contents":[{"parts":[{"fileData":{"fileUri":"gs://b/a.png"}}]}]}`, []string{"gs"}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			translatetest.CheckMedia(t, api.Gemini, c.body, c.allow, c.member, c.kind)
		})
	}
}
