package translate_test

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// TestCheckMediaLetsOnlyPublicOrInlineMediaLeave: per API, every member
// that names media by reference, with a reference that passes (https:,
// data:, inline) and ones that are refused (gs:, http:, s3:, a file id, no
// scheme), the refusal naming the client's member; an allowed kind passes.
func TestCheckMediaLetsOnlyPublicOrInlineMediaLeave(t *testing.T) {
	chat := func(part string) string {
		return `{"model":"m","messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"see"},` + part + `]}]}`
	}
	resp := func(part string) string {
		return `{"model":"m","input":[{"role":"user","content":[{"type":"input_text","text":"see"},` + part + `]}]}`
	}
	msg := func(block string) string {
		return `{"model":"m","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"see"},` + block + `]}]}`
	}
	for _, c := range []struct {
		name   string
		api    api.API
		body   string
		allow  []string
		member string // "" passes
		kind   string
	}{
		{"chat https", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}`), nil, "", ""},
		{"chat data", api.Chat, chat(`{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}`), nil, "", ""},
		{"chat HTTPS upper case", api.Chat, chat(`{"type":"image_url","image_url":{"url":"HTTPS://example.com/a.png"}}`), nil, "", ""},
		{"chat gs", api.Chat, chat(`{"type":"image_url","image_url":{"url":"gs://operator-private-bucket/a.png"}}`), nil, "messages[1].content[1].image_url.url", "gs"},
		{"chat gs allowed", api.Chat, chat(`{"type":"image_url","image_url":{"url":"gs://operator-private-bucket/a.png"}}`), []string{"gs"}, "", ""},
		{"chat gs escaped", api.Chat, chat(`{"type":"image_url","image_url":{"url":"gs:\/\/b\/a.png"}}`), nil, "messages[1].content[1].image_url.url", "gs"},
		{"chat a key escaped", api.Chat, chat(`{"type":"image_url","image_url":{"ur\u006c":"gs://b/a.png"}}`), nil, "messages[1].content[1].image_url.url", "gs"},
		{"chat a key in upper case", api.Chat, chat(`{"type":"image_url","IMAGE_URL":{"Url":"gs://b/a.png"}}`), nil, "messages[1].content[1].image_url.url", "gs"},
		{"chat a key twice", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://ok/a.png","url":"gs://b/a.png"}}`), nil, "messages[1].content[1].image_url.url", "gs"},
		{"chat a bare string", api.Chat, chat(`{"type":"image_url","image_url":"http://example.com/a.png"}`), nil, "messages[1].content[1].image_url", "http"},
		{"chat no scheme", api.Chat, chat(`{"type":"image_url","image_url":{"url":"/etc/passwd"}}`), nil, "messages[1].content[1].image_url.url", ""},
		{"chat a file id", api.Chat, chat(`{"type":"file","file":{"file_id":"file-abc"}}`), nil, "messages[1].content[1].file.file_id", translate.MediaFileID},
		{"chat file data", api.Chat, chat(`{"type":"file","file":{"file_data":"data:application/pdf;base64,AAAA","filename":"a.pdf"}}`), nil, "", ""},
		{"chat a file id allowed", api.Chat, chat(`{"type":"file","file":{"file_id":"file-abc"}}`), []string{translate.MediaFileID}, "", ""},
		{"chat video", api.Chat, chat(`{"type":"video_url","video_url":{"url":"s3://b/v.mp4"}}`), nil, "messages[1].content[1].video_url.url", "s3"},
		{"chat audio inline", api.Chat, chat(`{"type":"input_audio","input_audio":{"data":"AAAA","format":"wav"}}`), nil, "", ""},
		{"chat text that looks like a member", api.Chat, chat(`{"type":"text","text":"{\"image_url\":{\"url\":\"gs://b\"}}"}`), nil, "", ""},
		{"chat a tool call's arguments", api.Chat, `{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"file_id\":\"x\",\"url\":\"gs://b\"}"}}]}]}`, nil, "", ""},

		{"responses https", api.Responses, resp(`{"type":"input_image","image_url":"https://example.com/a.png"}`), nil, "", ""},
		{"responses a string input", api.Responses, `{"model":"m","input":"gs://b/a.png"}`, nil, "", ""},
		{"responses gs", api.Responses, resp(`{"type":"input_image","image_url":"gs://b/a.png"}`), nil, "input[0].content[1].image_url", "gs"},
		{"responses an image by file id", api.Responses, resp(`{"type":"input_image","file_id":"file-abc"}`), nil, "input[0].content[1].file_id", translate.MediaFileID},
		{"responses a file by url", api.Responses, resp(`{"type":"input_file","file_url":"http://intranet/a.pdf"}`), nil, "input[0].content[1].file_url", "http"},
		{"responses file data", api.Responses, resp(`{"type":"input_file","file_data":"AAAA","filename":"a.pdf"}`), nil, "", ""},
		{"responses a tool's output", api.Responses, `{"model":"m","input":[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"gs://b/a.png"}]}]}`, nil, "input[0].output[0].image_url", "gs"},

		{"messages url", api.Messages, msg(`{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}`), nil, "", ""},
		{"messages base64", api.Messages, msg(`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAAA"}}`), nil, "", ""},
		{"messages gs", api.Messages, msg(`{"type":"image","source":{"type":"url","url":"gs://b/a.png"}}`), nil, "messages[0].content[1].source.url", "gs"},
		{"messages a long s", api.Messages, msg(`{"type":"image","\u017fource":{"type":"url","url":"gs://b/a.png"}}`), nil, "messages[0].content[1].source.url", "gs"},
		{"messages a file", api.Messages, msg(`{"type":"document","source":{"type":"file","file_id":"file_011"}}`), nil, "messages[0].content[1].source.file_id", translate.MediaFileID},
		{"messages a container upload", api.Messages, msg(`{"type":"container_upload","file_id":"file_011"}`), nil, "messages[0].content[1].file_id", translate.MediaFileID},
		{"messages a tool result's image", api.Messages, msg(`{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"ftp://h/a.png"}}]}`), nil, "messages[0].content[1].content[0].source.url", "ftp"},
		{"messages a document's own blocks", api.Messages, msg(`{"type":"document","source":{"type":"content","content":[{"type":"image","source":{"type":"url","url":"gs://b/a.png"}}]}}`), nil, "messages[0].content[1].source.content[0].source.url", "gs"},
		{"messages a search result's source is a citation", api.Messages, msg(`{"type":"search_result","source":"http://example.com","title":"t","content":[{"type":"text","text":"x"}]}`), nil, "", ""},
		{"messages a tool call's input", api.Messages, `{"model":"m","max_tokens":9,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"file_id":"x","source":{"url":"gs://b"}}}]}]}`, nil, "", ""},

		{"chat a Files API URI", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}`), nil, "messages[1].content[1].image_url.url", translate.MediaFileID},
		{"chat a Cloud Storage URL, a port and user", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://x@Storage.GoogleAPIs.com.:443/b/a.png"}}`), nil, "messages[1].content[1].image_url.url", translate.MediaFileID},
		{"chat googleapis.com in the path", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://example.com/storage.googleapis.com/a.png"}}`), nil, "", ""},
		{"chat a Files API URI allowed", api.Chat, chat(`{"type":"image_url","image_url":{"url":"https://generativelanguage.googleapis.com/v1beta/files/abc"}}`), []string{translate.MediaFileID}, "", ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := translatetest.CheckMedia(t, c.api, c.body, c.allow, c.member, c.kind)
			if c.member == "" {
				return
			}
			if !strings.Contains(err.Error(), c.member) || strings.Contains(err.Error(), "operator-private-bucket") {
				t.Fatalf("message %q", err)
			}
		})
	}
}

// FuzzCheckMedia: CheckMedia never panics, and it passes a request only
// when a decoding walk of the same members (mdOracle) finds no reference
// that is not https: or data: (it may refuse one the walk cannot read:
// a body Go's decoder refuses).
func FuzzCheckMedia(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"content":[{"image_url":{"url":"gs://b"}}]}]}`,
		`{"messages":[{"content":[{"type":"image","source":{"type":"url","url":"https://a"}}]}]}`,
		`{"input":[{"content":[{"image_url":"data:x","file_id":""}],"output":[{"file_url":"x:y"}]}]}`,
		`{"messages":[{"content":[{"type":"tool_result","content":[{"source":{"file_id":"f"}}]}]}]}`,
	} {
		for a := range 3 {
			f.Add([]byte(s), uint8(a))
		}
	}
	f.Fuzz(func(t *testing.T, body []byte, which uint8) {
		a := [...]api.API{api.Chat, api.Responses, api.Messages}[which%3]
		err := translate.CheckMedia(a, body, nil)
		if err != nil {
			return
		}
		var v any
		if json.Unmarshal(body, &v) != nil {
			return
		}
		if ref := mdOracle(a, v); ref != "" {
			t.Fatalf("%v passed %q, which names %s", a, body, ref)
		}
	})
}

// mdOracle is the first reference a decoded request names that is not
// https: or data:, "" for none: the members media.go reads, read by
// encoding/json (which keeps a name's last value: CheckMedia reads every
// one, so it refuses at least what this finds).
func mdOracle(a api.API, v any) string {
	obj := func(v any) map[string]any { m, _ := v.(map[string]any); return m }
	arr := func(v any) []any { s, _ := v.([]any); return s }
	bad := func(v any) bool {
		s, ok := v.(string)
		if !ok {
			return false
		}
		sch := translate.MDScheme([]byte(s))
		return sch != "https" && sch != "data"
	}
	id := func(v any) bool { s, ok := v.(string); return ok && s != "" }
	var block func(b map[string]any) string
	block = func(b map[string]any) string {
		if src := obj(b["source"]); src != nil {
			if bad(src["url"]) || id(src["file_id"]) {
				return "source"
			}
			for _, x := range arr(src["content"]) {
				if r := block(obj(x)); r != "" {
					return r
				}
			}
		}
		if id(b["file_id"]) {
			return "file_id"
		}
		for _, x := range arr(b["content"]) {
			if r := block(obj(x)); r != "" {
				return r
			}
		}
		return ""
	}
	top := obj(v)
	switch a {
	case api.Chat:
		for _, m := range arr(top["messages"]) {
			for i, p := range arr(obj(m)["content"]) {
				p := obj(p)
				for _, n := range []string{"image_url", "video_url", "audio_url"} {
					if bad(p[n]) || bad(obj(p[n])["url"]) {
						return n + strconv.Itoa(i)
					}
				}
				if id(obj(p["file"])["file_id"]) {
					return "file"
				}
			}
		}
	case api.Responses:
		for _, item := range arr(top["input"]) {
			for _, list := range []string{"content", "output"} {
				for _, p := range arr(obj(item)[list]) {
					p := obj(p)
					if bad(p["image_url"]) || bad(p["file_url"]) || id(p["file_id"]) {
						return list
					}
				}
			}
		}
	case api.Messages:
		for _, m := range arr(top["messages"]) {
			for _, b := range arr(obj(m)["content"]) {
				if r := block(obj(b)); r != "" {
					return r
				}
			}
		}
	}
	return ""
}
