package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Every row of the request faults' table, with the bodies the engines
// answer (llama-server's tools/server, vLLM's OpenAI serving, ollama's
// api), and answers that are the engine's own trouble, which are none.
func TestRequestFaultTable(t *testing.T) {
	withTools := []byte(`{"model":"m","messages":[],"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}]}`)
	plain := []byte(`{"model":"m","messages":[]}`)
	for _, tc := range []struct {
		name   string
		status int
		body   string
		sent   []byte
		kind   faultKind // "": not the request's fault
		what   string
	}{
		{"llama-server without --jinja", 500, `{"error":{"code":500,"message":"tools param requires --jinja flag","type":"server_error"}}`, withTools, faultTools, "tools param requires --jinja flag"},
		{"an older llama-server's tools", 500, `{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`, withTools, faultTools, "Unsupported param: tools"},
		{"an older llama-server's tool_choice", 500, `{"error":{"code":500,"message":"Unsupported param: tool_choice","type":"server_error"}}`, withTools, faultTools, "Unsupported param: tool_choice"},
		{"llama-server's streamed tools", 500, `{"error":{"code":500,"message":"Cannot use tools with stream","type":"server_error"}}`, withTools, faultTools, "Cannot use tools with stream"},
		{"vLLM without a tool parser", 400, `{"object":"error","message":"\"auto\" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set","type":"BadRequestError","param":null,"code":400}`, withTools, faultTools, `"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set`},
		{"ollama's model without tools", 400, `{"error":"registry.ollama.ai/library/gemma3:270m does not support tools"}`, withTools, faultTools, "registry.ollama.ai/library/gemma3:270m does not support tools"},
		{"ollama's model without thinking", 400, `{"error":"\"gemma3:270m\" does not support thinking"}`, plain, faultParam, `"gemma3:270m" does not support thinking`},
		{"llama-server's unsupported member", 500, `{"error":{"code":500,"message":"Unsupported param: best_of","type":"server_error"}}`, plain, faultParam, "Unsupported param: best_of"},
		{"llama-server's n", 500, `{"error":{"code":500,"message":"Only one completion choice is allowed","type":"server_error"}}`, plain, faultParam, "Only one completion choice is allowed"},
		{"llama-server's context", 400, `{"error":{"code":400,"message":"request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9412,"n_ctx":8192}}`, plain, faultContext, "request (9412 tokens) exceeds the available context size (8192 tokens), try increasing it"},
		{"an older llama-server's batch", 500, `{"error":{"code":500,"message":"input is too large to process. increase the physical batch size","type":"server_error"}}`, plain, faultContext, "input is too large to process. increase the physical batch size"},
		{"vLLM's context", 400, `{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`, plain, faultContext, "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion."},
		{"OpenAI's context", 400, `{"error":{"message":"This model's maximum context length is 128000 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`, plain, faultContext, "This model's maximum context length is 128000 tokens."},
		{"Anthropic's prompt", 400, `{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 210000 tokens > 200000 maximum"}}`, plain, faultContext, "prompt is too long: 210000 tokens > 200000 maximum"},
		{"llama-server's grammar", 400, `{"error":{"code":400,"message":"Failed to parse grammar","type":"invalid_request_error"}}`, plain, faultGrammar, "Failed to parse grammar"},
		{"llama-server's tool schema", 500, `{"error":{"code":500,"message":"JSON schema conversion failed:\nUnrecognized schema: {\"not\":{}}","type":"server_error"}}`, withTools, faultToolSchema, "JSON schema conversion failed:\nUnrecognized schema: {\"not\":{}}"},
		{"vLLM's guided decoding", 400, `{"object":"error","message":"The provided JSON schema contains features not supported by xgrammar.","type":"BadRequestError","param":null,"code":400}`, plain, faultGrammar, "The provided JSON schema contains features not supported by xgrammar."},
		{"the engine's own failure", 500, `{"error":{"code":500,"message":"llama_decode failed","type":"server_error"}}`, withTools, "", ""},
		{"a model still loading", 503, `{"error":{"code":503,"message":"Loading model","type":"unavailable_error"}}`, plain, "", ""},
		{"a rate limit's tokens", 429, `{"error":{"message":"too many tokens per minute","type":"rate_limit_error"}}`, plain, "", ""},
		{"loose context words on an engine's 500", 500, `{"error":{"code":500,"message":"failed to grow the context window: out of memory","type":"server_error"}}`, plain, "", ""},
		{"a gateway's context words on a 502", 502, `{"error":{"message":"upstream context length unknown"}}`, plain, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := recogniseFault(tc.status, []byte(tc.body), tc.sent)
			switch {
			case tc.kind == "" && f != nil:
				t.Fatalf("an engine's trouble read as the request's fault %+v", f)
			case tc.kind == "":
			case f == nil:
				t.Fatal("not recognised")
			case f.kind != tc.kind || f.what != tc.what || f.fix == "":
				t.Fatalf("got %s %q (fix %q), want %s %q", f.kind, f.what, f.fix, tc.kind, tc.what)
			}
		})
	}
}

// Whatever an engine's error body holds, reading it neither panics nor
// quotes more than the cap of it, and a quote cut at the cap stays UTF-8
// where the body was.
func FuzzRecogniseFault(f *testing.F) {
	f.Add(500, []byte(`{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`), []byte(`{"tools":[{}]}`))
	f.Add(400, []byte(`{"object":"error","message":"Failed to parse grammar `+strings.Repeat("é", 200)+`"}`), []byte(`{}`))
	f.Add(400, []byte(`prompt is too long`), []byte(`{"tools":[]}`))
	f.Fuzz(func(t *testing.T, status int, body, sent []byte) {
		fault := recogniseFault(status, body, sent)
		if fault == nil {
			return
		}
		if len(fault.what) > maxFaultMessage+len("…") || fault.fix == "" || fault.kind.code() == "" {
			t.Fatalf("%+v", fault)
		}
		if utf8.Valid(body) && !utf8.ValidString(fault.what) {
			t.Fatalf("a UTF-8 body quoted as %q", fault.what)
		}
	})
}

// An older llama-server refuses tools with a 500 "Unsupported param: tools".
// A Messages client and a Responses client with tools hear it at once as a
// 400 in their own API's shape, and twenty of them leave the engine's
// breakers closed: a request without tools is still served.
func TestAnEnginesRefusalOfToolsIsTheClientsA400AndNotTheEnginesFailure(t *testing.T) {
	var refused, served atomic.Int32
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		json.NewDecoder(r.Body).Decode(&body)
		if _, ok := body["tools"]; ok {
			refused.Add(1)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			w.Write([]byte(`{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`))
			return
		}
		served.Add(1)
		answerOK(w, "m")
	}))
	defer up.Close()
	zero := 0
	cfg := config.Config{Engines: []engines.Config{{Name: "llama", To: up.URL, Models: []string{"m"}, APIs: []string{"chat"}, BreakerFailures: 5, Retries: &zero}}}
	g, url := testGateway(t, cfg, nil)
	core, logs := observer.New(zapcore.DebugLevel)
	g.log = zap.New(core)
	faults := map[string]int{}
	g.Hooks.RequestFault = func(engine, kind string) { faults[engine+" "+kind]++ }
	messages := `{"model":"m","max_tokens":100,"stream":true,"messages":[{"role":"user","content":"hi"}],"tools":[{"name":"read","description":"reads","input_schema":{"type":"object"}}]}`
	responses := `{"model":"m","input":"hi","tools":[{"type":"function","name":"read","parameters":{"type":"object"}}]}`
	for i := range 10 {
		resp, body := postPath(t, url, "/v1/messages", messages)
		var anthropic struct {
			Type  string `json:"type"`
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal([]byte(body), &anthropic); err != nil || resp.StatusCode != 400 || anthropic.Type != "error" ||
			anthropic.Error.Type != "invalid_request_error" || !strings.Contains(anthropic.Error.Message, "Unsupported param: tools") || !strings.Contains(anthropic.Error.Message, "--jinja") {
			t.Fatalf("messages %d: %d %s", i, resp.StatusCode, body)
		}
		resp, body = postPath(t, url, "/v1/responses", responses)
		var openai struct {
			Error struct{ Type, Code, Message string }
		}
		if err := json.Unmarshal([]byte(body), &openai); err != nil || resp.StatusCode != 400 ||
			openai.Error.Type != "invalid_request_error" || openai.Error.Code != "tools_not_supported" || !strings.Contains(openai.Error.Message, "Unsupported param: tools") {
			t.Fatalf("responses %d: %d %s", i, resp.StatusCode, body)
		}
	}
	if n := refused.Load(); n != 20 {
		t.Fatalf("the engine was sent %d requests with tools, want 20: a refusal is not retried", n)
	}
	if b := g.byName["llama"].eng.ModelBreaker("m"); !b.Ready() {
		t.Fatal("the model's breaker opened on the requests' faults")
	}
	if resp, body := postJSON(t, url, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`); resp.StatusCode != 200 || served.Load() != 1 {
		t.Fatalf("a request without tools: %d %s", resp.StatusCode, body)
	}
	if faults["llama tools"] != 20 {
		t.Fatalf("counted %v", faults)
	}
	// one warning says what the engine refused and how to make it accept
	// it; the other nineteen of the minute are debug lines
	warned := logs.FilterLevelExact(zapcore.WarnLevel).All()
	if len(warned) != 1 || warned[0].ContextMap()["kind"] != "tools" || warned[0].ContextMap()["refused"] != "Unsupported param: tools" ||
		!strings.Contains(warned[0].ContextMap()["fix"].(string), "--jinja") || !strings.Contains(warned[0].ContextMap()["fix"].(string), "strip tools tool_choice parallel_tool_calls") {
		t.Fatalf("warnings %+v", warned)
	}
}

// postPath posts a JSON body to path of the gateway at url.
func postPath(t *testing.T, url, path, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}
