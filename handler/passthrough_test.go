package handler

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestPassthroughReachesTheEnginesOwnPages(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.Method + " " + r.URL.RequestURI() + " " + r.Header.Get("Authorization") + " " + r.Header.Get("X-Api-Key") + " " + string(b)
	}, answerJSON(`{"total_slots":4}`))
	cfg := config.Config{Keys: []config.Key{{Value: "gateway-key-0123456789"}}, Engines: []engines.Config{
		{Name: "llama", To: upURL, Models: []string{"Qwen/Qwen3-8B", "qwen"}, APIKey: "engine-key-abcdefgh"}}}
	_, url := testGateway(t, cfg, nil)
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
		req.Header.Set("X-Api-Key", "gateway-key-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if st, out := call("GET", "/upstream/qwen/props?x=1", ""); st != 200 || out != `{"total_slots":4}` {
		t.Fatalf("%d %s", st, out)
	}
	if st, out := call("POST", "/upstream/Qwen/Qwen3-8B/slots/0", `{"action":"save"}`); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if st, _ := call("GET", "/upstream/qwen/", ""); st != 200 {
		t.Fatalf("the engine's UI: %d", st)
	}
	want := []string{
		"GET /props?x=1 Bearer engine-key-abcdefgh  ",
		`POST /slots/0 Bearer engine-key-abcdefgh  {"action":"save"}`,
		"GET / Bearer engine-key-abcdefgh  ",
	}
	if strings.Join(seen(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("engine saw:\n%s", strings.Join(seen(), "\n"))
	}
	if st, out := call("GET", "/upstream/nope/props", ""); st != 404 || !strings.Contains(out, "model_not_found") {
		t.Fatalf("%d %s", st, out)
	}
	if st, _ := call("GET", "/upstream/qwen/../v1/models", ""); st != 400 {
		t.Fatalf("dot segments: %d", st)
	}
	resp, _ := http.Get(url + "/upstream/qwen/props")
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	if len(seen()) != 3 {
		t.Fatalf("refused requests reached the engine: %v", seen())
	}
}
