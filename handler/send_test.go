package handler

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestCallersKeyNeverReachesTheEngine(t *testing.T) {
	got := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		answerOK(w, "m")
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{
		Keys:    []config.Key{{Value: "caller-secret-key-123"}},
		Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}, APIKey: "engine-own-key-456"}},
	}, nil)
	resp, body := postJSON(t, url, `{"model":"m"}`,
		"Authorization", "Bearer caller-secret-key-123", "X-Api-Key", "caller-secret-key-123",
		"Api-Key", "caller-secret-key-123", "Proxy-Authorization", "Basic xyz")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	h := <-got
	for k, vv := range h {
		for _, v := range vv {
			if strings.Contains(v, "caller-secret") || k == "Proxy-Authorization" {
				t.Fatalf("the caller's credential reached the engine in %s", k)
			}
		}
	}
	if h.Get("Authorization") != "Bearer engine-own-key-456" {
		t.Fatalf("the engine's own key: %q", h.Get("Authorization"))
	}
}

func TestFiltersApplyPerEngineAfterTheModelRewrite(t *testing.T) {
	upURL, sent := loggingUpstream(t, func(_ *http.Request, b []byte) string { return string(b) },
		func(w http.ResponseWriter, _ *http.Request) { answerOK(w, "x") })
	cfg := config.Config{Engines: []engines.Config{{Name: "r1", To: upURL, Models: []string{"r1"}, ModelName: "deepseek-r1",
		Strip: []string{"temperature", "top_p"}, Set: []engines.BodySetting{{Path: "max_tokens", Value: json.RawMessage(`2048`)}}}}}
	_, url := testGateway(t, cfg, nil)
	resp, body := postJSON(t, url, `{"model":"r1","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"top_p":0.9}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	want := `{"model":"deepseek-r1","messages":[{"role":"user","content":"hi"}],"max_tokens":2048}`
	if got := sent(); len(got) != 1 || got[0] != want {
		t.Fatalf("engine got %q\nwant %q", got, want)
	}
}
