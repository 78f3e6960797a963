package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Extra paths, as a llama-swap user reaches for them: llama-server's own
// endpoints outside /v1/, routed by the body's model as /v1/ is.

func TestExtraPathsAreRoutedByTheBodysModel(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		var body struct{ Model string }
		_ = json.Unmarshal(b, &body)
		return r.URL.Path + " " + body.Model + " " + r.Header.Get("Authorization")
	}, answerJSON(`{"results":[]}`))
	cfg := config.Config{Keys: []config.Key{{Value: "gateway-key-0123456789"}}, Engines: []engines.Config{
		{Name: "rr", To: upURL, Models: []string{"bge"}, ModelName: "bge-reranker", APIKey: "engine-key-abcdefgh"}}}
	_, url := testGateway(t, cfg, nil)
	for _, p := range []string{"/rerank", "/infill", "/tokenize"} {
		req, _ := http.NewRequest(http.MethodPost, url+p, strings.NewReader(`{"model":"bge","query":"q","documents":["a"]}`))
		req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "rr" {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, out)
		}
	}
	want := "/rerank bge-reranker Bearer engine-key-abcdefgh,/infill bge-reranker Bearer engine-key-abcdefgh,/tokenize bge-reranker Bearer engine-key-abcdefgh"
	if got := strings.Join(seen(), ","); got != want {
		t.Fatalf("engine saw %s", got)
	}
	// an unknown model is the gateway's OpenAI-shaped 404, and a key is needed
	req, _ := http.NewRequest(http.MethodPost, url+"/rerank", strings.NewReader(`{"model":"nope"}`))
	req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
	resp, _ := http.DefaultClient.Do(req)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(out), "model_not_found") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	resp, _ = http.Post(url+"/rerank", "application/json", strings.NewReader(`{"model":"bge"}`))
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	// a GET there, and any other path, is not the gateway's
	drain()
	resp, _ = http.Get(url + "/rerank")
	resp.Body.Close()
	if res := <-served; res.Handled {
		t.Fatal("GET /rerank was taken")
	}
	resp, _ = http.Post(url+"/other", "application/json", strings.NewReader(`{"model":"bge"}`))
	resp.Body.Close()
	if res := <-served; res.Handled {
		t.Fatal("POST /other was taken")
	}
}

func TestExtraPathsOffRoutesNone(t *testing.T) {
	up, hits := failing(t)
	none := []string{}
	cfg := config.Config{ExtraPaths: &none, Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}
	_, url := testGateway(t, cfg, nil)
	drain()
	resp, _ := http.Post(url+"/rerank", "application/json", strings.NewReader(`{"model":"m"}`))
	resp.Body.Close()
	if res := <-served; res.Handled || hits.Load() != 0 {
		t.Fatal("extra_paths off still routes /rerank")
	}
	for _, bad := range []string{"rerank", "/v1/rerank", "/upstream/x", "/a/../b"} {
		if err := config.CheckExtraPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
