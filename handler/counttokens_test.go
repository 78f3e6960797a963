package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Claude Code's count_tokens, as it sends it: system, tools, a tool turn.
const countBody = `{"model":"m","system":[{"type":"text","text":"You are Claude Code."}],
"tools":[{"name":"Bash","description":"Run a command","input_schema":{"type":"object","properties":{"command":{"type":"string"}}}}],
"messages":[{"role":"user","content":"list files"},
{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"Bash","input":{"command":"ls"}}]},
{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"a.go b.go"}]}]}`

// countTokens posts countBody to the gateway with key (may be "").
func countTokens(t *testing.T, url, key string) (int, http.Header, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages/count_tokens?beta=true", strings.NewReader(countBody))
	req.Header.Set("Anthropic-Version", "2023-06-01")
	if key != "" {
		req.Header.Set("X-Api-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// tokenizer answers /tokenize as an engine does (answer), everything else
// 404 as a 2024 llama-server does; it records what /tokenize was sent.
func tokenizer(t *testing.T, answer string) (string, func() []string) {
	return loggingUpstream(t, func(r *http.Request, b []byte) string { return r.URL.Path + " " + string(b) },
		func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/tokenize" && answer != "" {
				w.Header().Set("Content-Type", "application/json")
				io.WriteString(w, answer)
				return
			}
			w.WriteHeader(404)
			io.WriteString(w, `{"error":{"code":404,"message":"File Not Found","type":"not_found_error"}}`)
		})
}

func TestCountTokensOnAChatEngineAsksItsTokenizer(t *testing.T) {
	for _, c := range []struct {
		name, answer string
		want         string
	}{
		{"llama-server", `{"tokens":[1,2,3,4,5,6,7]}`, `{"input_tokens":7}`},
		{"vLLM", `{"count":42,"max_model_len":8192,"tokens":[]}`, `{"input_tokens":42}`},
	} {
		t.Run(c.name, func(t *testing.T) {
			up, seen := tokenizer(t, c.answer)
			_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up, Models: []string{"m"}, ModelName: "qwen", APIs: []string{"chat"}}}}.WithDefaults(), nil)
			st, h, body := countTokens(t, url, "")
			if st != 200 || body != c.want || h.Get(TokenCountHeader) != "tokenizer" {
				t.Fatalf("%d %s %s: %s", st, h.Get(TokenCountHeader), h.Get("Content-Type"), body)
			}
			sent := seen()
			if len(sent) != 1 || !strings.HasPrefix(sent[0], "/tokenize ") {
				t.Fatalf("the engine was sent %q", sent)
			}
			var tb struct {
				Model    string            `json:"model"`
				Messages []json.RawMessage `json:"messages"`
				Tools    []json.RawMessage `json:"tools"`
				Content  string            `json:"content"`
			}
			json.Unmarshal([]byte(strings.TrimPrefix(sent[0], "/tokenize ")), &tb)
			// the prompt as the engine would be sent it in Chat Completions:
			// the system, the tools, the call and its result
			for _, want := range []string{"You are Claude Code.", `"name":"Bash"`, `Bash {"command":"ls"}`, "a.go b.go", "list files"} {
				if !strings.Contains(tb.Content, want) {
					t.Errorf("the counted text lacks %q: %q", want, tb.Content)
				}
			}
			if tb.Model != "qwen" || len(tb.Messages) != 4 || len(tb.Tools) != 1 {
				t.Fatalf("model %q, %d messages, %d tools", tb.Model, len(tb.Messages), len(tb.Tools))
			}
		})
	}
}

func TestCountTokensWithoutATokenizerIsAnEstimateAskedOnce(t *testing.T) {
	up, seen := tokenizer(t, "") // ollama: no /tokenize
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "ollama", To: up, Models: []string{"m"}}}}.WithDefaults(), nil)
	var first string
	for i := range 2 {
		st, h, body := countTokens(t, url, "")
		if st != 200 || h.Get(TokenCountHeader) != "estimate" || !strings.HasPrefix(body, `{"input_tokens":`) {
			t.Fatalf("count %d: %d %s %s", i, st, h.Get(TokenCountHeader), body)
		}
		if first == "" {
			first = body
		} else if body != first {
			t.Fatalf("the same request estimated %s, then %s", first, body)
		}
	}
	var paths []string
	for _, l := range seen() {
		paths = append(paths, strings.Fields(l)[0])
	}
	// its own count_tokens (no api line: it might have one), its
	// tokenizer, each once for the engine's process
	if got := strings.Join(paths, " "); got != "/v1/messages/count_tokens /tokenize" {
		t.Fatalf("the engine was asked %s", got)
	}
	if u := strings.Join(g.byName["ollama"].eng.Status().Unspoken, " "); u != "count_tokens tokenize" {
		t.Fatalf("learned %q", u)
	}
}

func TestCountTokensIsChargedNothing(t *testing.T) {
	up, _ := tokenizer(t, `{"tokens":[1,2,3]}`)
	clk := clock.NewFake()
	url := budgetGateway(t, config.Config{
		Keys:    []config.Key{{Name: "team-a", Value: teamKey, Tokens: limits(t, "10/d")}},
		Engines: []engines.Config{{Name: "e", To: up, Models: []string{"m"}, APIs: []string{"chat"}}},
	}, clk)
	// a count of a prompt larger than the whole budget, many times
	for i := range 5 {
		if st, _, body := countTokens(t, url, teamKey); st != 200 || body != `{"input_tokens":3}` {
			t.Fatalf("count %d: %d %s", i, st, body)
		}
	}
	if st, _, body := countTokens(t, url, otherKey); st != 401 {
		t.Fatalf("a count without a valid key: %d %s", st, body)
	}
}

func TestCountTokensCostsNoMoney(t *testing.T) {
	up, _ := tokenizer(t, `{"tokens":[1,2,3]}`)
	for _, api := range []string{"chat", "anthropic"} {
		// from the engine's tokenizer, and natively
		native, _ := loggingUpstream(t, func(r *http.Request, _ []byte) string { return r.URL.Path }, answerJSON(`{"input_tokens":3}`))
		to := up
		if api == "anthropic" {
			to = native
		}
		cfg := config.Config{Engines: []engines.Config{{Name: "e", To: to, Models: []string{"m"}, APIs: []string{api}}},
			Prices: []config.Price{priceLine(t, "e", "3", "15")}}
		_, url := testGateway(t, cfg, nil)
		drain()
		if st, _, body := countTokens(t, url, ""); st != 200 || body != `{"input_tokens":3}` {
			t.Fatalf("%s: %d %s", api, st, body)
		}
		if res := <-served; res.Cost != 0 {
			t.Fatalf("%s: a count cost %s", api, res.Cost)
		}
	}
}
