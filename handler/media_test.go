package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/providers/anthropic"
)

// A request naming media by gs:// is kept from a provider's engine (it
// would read the operator's bucket) and moves on: the engine's fallback,
// which holds no credentials, answers it; without one the client gets a
// 400 in its API's shape naming the member and how the operator allows it.
// A request with an https: image reaches the provider.
func TestMediaByReferenceIsKeptFromAProvider(t *testing.T) {
	var provider, local atomic.Int32
	answer := func(n *atomic.Int32) *httptest.Server {
		s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			n.Add(1)
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, `{"id":"msg_1","type":"message","role":"assistant","model":"c","content":[{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{"input_tokens":3,"output_tokens":1}}`)
		}))
		t.Cleanup(s.Close)
		return s
	}
	up, loc := answer(&provider), answer(&local)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "anth", Provider: new(anthropic.Anthropic), To: up.URL, APIKey: "anthropic-engine-key-0001", Models: []string{"claude"}, Fallback: "local"},
		{Name: "local", To: loc.URL, Models: []string{"local"}, APIs: []string{"anthropic"}},
		{Name: "anth-alone", Provider: new(anthropic.Anthropic), To: up.URL, APIKey: "anthropic-engine-key-0001", Models: []string{"claude-alone"}},
	}}.WithDefaults(), nil)
	post := func(model, image string) (*http.Response, string) {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"`+model+`","max_tokens":9,"messages":[{"role":"user","content":[{"type":"text","text":"see"},`+
			`{"type":"image","source":{"type":"url","url":"`+image+`"}}]}]}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return resp, string(b)
	}

	resp, body := post("claude", "gs://operator-private-bucket/a.png")
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "local" || provider.Load() != 0 || local.Load() != 1 {
		t.Fatalf("%d from %s (provider %d, local %d): %s", resp.StatusCode, resp.Header.Get("X-LLM-Engine"), provider.Load(), local.Load(), body)
	}
	resp, body = post("claude-alone", "gs://operator-private-bucket/a.png")
	if resp.StatusCode != 400 || !strings.Contains(body, `"type":"error"`) ||
		!strings.Contains(body, "messages[0].content[1].source.url") || !strings.Contains(body, "allow_media gs") || provider.Load() != 0 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
	if resp, body = post("claude-alone", "https://example.com/a.png"); resp.StatusCode != 200 || provider.Load() != 1 {
		t.Fatalf("%d: %s", resp.StatusCode, body)
	}
}
