package handler

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// The engines' own answers for a route they do not have, as their sources
// write them, and 404s that are about a model, not a route.
func TestPathNotFoundKnowsTheEnginesWords(t *testing.T) {
	for _, c := range []struct {
		name   string
		status int
		body   string
		want   bool
	}{
		{"llama-server before 2024", 404, "File Not Found", true},
		{"llama-server 2024", 404, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`, true},
		{"llama-server now", 404, `{"error":{"message":"File Not Found","type":"not_found_error","code":404}}`, true},
		{"vLLM, SGLang (FastAPI)", 404, `{"detail":"Not Found"}`, true},
		{"FastAPI, another method", 405, `{"detail":"Method Not Allowed"}`, true},
		{"ollama (gin)", 404, "404 page not found", true},
		{"gin, another method", 405, "405 method not allowed", true},
		{"an empty 404", 404, "", true},
		{"vLLM's unknown model", 404, "{\"object\":\"error\",\"message\":\"The model `x` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}", false},
		{"ollama's unknown model", 404, `{"error":{"message":"model \"x\" not found, try pulling it first","type":"api_error","param":null,"code":null}}`, false},
		{"a 500 that says not found", 500, "Not Found", false},
		{"OpenAI's, and the compatible services'", 404, `{"error":{"message":"Invalid URL (POST /v1/messages)","type":"invalid_request_error","param":null,"code":null}}`, true},
	} {
		if got := pathNotFound(c.status, []byte(c.body)); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// oldLlamaServer answers as a llama-server of 2024 does: Chat Completions,
// and its own 404 for every other API's path.
func oldLlamaServer(t *testing.T) (string, func() []string) {
	return loggingUpstream(t, func(r *http.Request, _ []byte) string { return r.URL.Path },
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/chat/completions" {
				w.Header().Set("Content-Type", "application/json; charset=utf-8")
				w.WriteHeader(404)
				io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
				return
			}
			answerOK(w, "m")
		})
}

func TestANativePathsNotFoundIsLearnedAndTranslatedAtOnce(t *testing.T) {
	up, paths := oldLlamaServer(t)
	zero := 0
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "llama", To: up, Models: []string{"m"}, Retries: &zero, BreakerFailures: 1}}}.WithDefaults(), nil)
	for i := range 3 {
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Anthropic-Version", "2023-06-01")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || !strings.Contains(string(body), `"type":"message"`) || !strings.Contains(string(body), `"text":"ok"`) {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
		res := lastResult.Load()
		if res.EngineAPI != "chat" || len(res.Tries) != 1 || res.Tries[0].Reason != "ok" || res.Attempts != 1 {
			t.Fatalf("request %d: engine API %s, tries %+v, attempts %d", i, res.EngineAPI, res.Tries, res.Attempts)
		}
	}
	if got := strings.Join(paths(), " "); got != "/v1/messages /v1/chat/completions /v1/chat/completions /v1/chat/completions" {
		t.Fatalf("the engine was sent %s: one 404 for the engine's process, then translation", got)
	}
	e := g.byName["llama"].eng
	st := e.Status()
	if st.Breaker != "closed" || len(st.ModelBreakers) != 0 || strings.Join(st.Unspoken, ",") != "messages" {
		t.Fatalf("breaker %s %v, unspoken %v: the 404 was no failure, and it was learned", st.Breaker, st.ModelBreakers, st.Unspoken)
	}
}

func TestAModelsNotFoundIsPassedOnAndNotLearned(t *testing.T) {
	up, _ := loggingUpstream(t, func(r *http.Request, _ []byte) string { return r.URL.Path },
		func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(404)
			io.WriteString(w, "{\"object\":\"error\",\"message\":\"The model `m` does not exist.\",\"type\":\"NotFoundError\",\"param\":null,\"code\":404}")
		})
	zero := 0
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "vllm", To: up, Models: []string{"m"}, Retries: &zero}}}.WithDefaults(), nil)
	resp, body := postJSON(t, url, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	if resp.StatusCode != 404 || !strings.Contains(body, "does not exist") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if u := g.byName["vllm"].eng.Unspoken(); u != 0 {
		t.Fatalf("learned %v from a model's 404", u.Names())
	}
}

func TestAnAPILineIsNeverUnlearned(t *testing.T) {
	up, paths := oldLlamaServer(t)
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "llama", To: up, Models: []string{"m"}, APIs: []string{"chat", "responses"}}}}.WithDefaults(), nil)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/responses", strings.NewReader(`{"model":"m","input":"hi"}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 404 || strings.Join(paths(), " ") != "/v1/responses" || g.byName["llama"].eng.Unspoken() != 0 {
		t.Fatalf("%d, sent %v: a declared API's 404 is the engine's answer", resp.StatusCode, paths())
	}
}
