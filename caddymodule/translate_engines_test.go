package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// Scripted engines for the translation tests: each speaks exactly one API,
// answers the other APIs' paths with a 404 in its own error shape, and
// refuses what its real counterpart refuses (unknown members, broken tool
// turns: providertest's CheckChat and CheckMessages, the rules the
// providers' fakes hold requests to), so a translation that only looks right to the gateway fails
// here as it would against the provider. The script is the same for all:
// after a tool's result, a text that quotes it; with tools offered, a call
// of get_weather for Paris, its arguments in fragments; otherwise a text.

// weatherFragments are get_weather's arguments as an engine streams them:
// split inside a key and a value, as models do.
var weatherFragments = []string{`{"ci`, `ty": `, `"Par`, `is"}`}

const (
	weatherArgs    = `{"city": "Paris"}`
	chatGreeting   = "Hello from the Chat engine."
	msgGreeting    = "Hello from the Messages engine."
	msgToolPreface = "Let me check the weather."
	toolSaid       = "The tool said: "
	chatCallID     = "call_Wk3pX9sJ2"
	msgToolUseID   = "toolu_01ScriptedWeather"
)

// Token counts the engines report, so a test can tell them from the
// gateway's own counting.
const (
	chatPromptTokens, chatCompletionTokens = 11, 7
	msgInputTokens, msgOutputTokens        = 21, 13
)

// scriptedEngine is a recorder with what it refused.
type scriptedEngine struct {
	*recorder
	refusedMu sync.Mutex
	refused   []string
}

// words splits a text into stream deltas that add up to it.
func words(s string) []string { return strings.SplitAfter(s, " ") }

// textOf is the text of a Chat or Messages content member: a string, or
// text parts/blocks.
func textOf(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		switch p.Type {
		case "text", "input_text", "output_text":
			b.WriteString(p.Text)
		case "tool_result":
			b.WriteString(textOf(p.Content))
		}
	}
	return b.String()
}

// bothCities in the user's message makes the engines call get_weather
// twice in one turn.
const bothCities = "Paris and Lyon"

var lyonFragments = []string{`{"city"`, `: "Ly`, `on"}`}

const msgToolUseID2 = "toolu_02ScriptedWeather"

// scriptedCall is a tool call an engine makes: its id and its arguments
// in the fragments it streams them in.
type scriptedCall struct {
	id        string
	fragments []string
}

// parallelChatCalls are two calls in one turn with the ids some
// OpenAI-compatible engines give (Kimi's functions.name:n), which
// Anthropic's tool ids may not contain.
var parallelChatCalls = []scriptedCall{
	{"functions.get_weather:0", weatherFragments},
	{"functions.get_weather:1", lyonFragments},
}

// toolResults are the contents of the tool messages that end a Chat
// conversation.
func toolResults(msgs []providertest.ChatMessage) []string {
	var out []string
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		out = append([]string{textOf(msgs[i].Content)}, out...)
	}
	return out
}

// ---- Chat Completions ----

// scriptedChat speaks Chat Completions only.
func scriptedChat(t *testing.T) *scriptedEngine {
	t.Helper()
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			providertest.OpenAIError(w, 404, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req providertest.ChatRequest
		if msg := providertest.CheckChat(body, &req); msg != "" {
			e.refuse(msg)
			providertest.OpenAIError(w, 400, "invalid_request_error", msg)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		var text, finish string
		var call bool
		calls := []scriptedCall{{chatCallID, weatherFragments}}
		switch {
		case last.Role == "tool":
			text, finish = toolSaid+strings.Join(toolResults(req.Messages), "; "), "stop"
		case len(req.Tools) > 0:
			call, finish = true, "tool_calls"
			if strings.Contains(textOf(last.Content), bothCities) {
				calls = parallelChatCalls
			}
		default:
			text, finish = chatGreeting, "stop"
		}
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`,
			chatPromptTokens, chatCompletionTokens, chatPromptTokens+chatCompletionTokens)
		if !req.Stream {
			msg := map[string]any{"role": "assistant", "content": nil, "refusal": nil}
			if call {
				var tcs []any
				for _, c := range calls {
					tcs = append(tcs, map[string]any{"id": c.id, "type": "function",
						"function": map[string]any{"name": "get_weather", "arguments": strings.Join(c.fragments, "")}})
				}
				msg["tool_calls"] = tcs
			} else {
				msg["content"] = text
			}
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion", "created": 1700000000,
				"model": req.Model, "choices": []any{map[string]any{"index": 0, "message": msg, "logprobs": nil, "finish_reason": finish}},
				"usage": json.RawMessage(usage)})
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		withUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		w.Header().Set("Content-Type", "text/event-stream")
		chunk := func(delta, finish string) {
			u := ""
			if withUsage {
				u = `,"usage":null`
			}
			fmt.Fprintf(w, `data: {"id":"chatcmpl-scripted","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[{"index":0,"delta":%s,"logprobs":null,"finish_reason":%s}]%s}`+"\n\n",
				req.Model, delta, finish, u)
			w.(http.Flusher).Flush()
		}
		if call {
			chunk(`{"role":"assistant","content":null,"refusal":null}`, "null")
			for i, c := range calls {
				chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"id":%q,"type":"function","function":{"name":"get_weather","arguments":""}}]}`, i, c.id), "null")
				for _, f := range c.fragments {
					a, _ := json.Marshal(f)
					chunk(fmt.Sprintf(`{"tool_calls":[{"index":%d,"function":{"arguments":%s}}]}`, i, a), "null")
				}
			}
		} else {
			chunk(`{"role":"assistant","content":"","refusal":null}`, "null")
			for _, word := range words(text) {
				c, _ := json.Marshal(word)
				chunk(`{"content":`+string(c)+`}`, "null")
			}
		}
		chunk(`{}`, `"`+finish+`"`)
		if withUsage {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-scripted","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[],"usage":%s}`+"\n\n", req.Model, usage)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	return e
}

// ---- Anthropic Messages ----

// scriptedMessages speaks Anthropic's Messages only.
func scriptedMessages(t *testing.T) *scriptedEngine {
	t.Helper()
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			providertest.AnthropicError(w, 404, "not_found_error", "Not Found")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req providertest.MessagesRequest
		if msg := providertest.CheckMessages(r, body, &req); msg != "" {
			e.refuse(msg)
			providertest.AnthropicError(w, 400, "invalid_request_error", msg)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		var results []string
		for _, b := range last.Blocks {
			if b.Type == "tool_result" {
				results = append(results, textOf(b.Content))
			}
		}
		type block struct {
			kind   string // text or tool_use
			deltas []string
			id     string
		}
		var blocks []block
		stop := "end_turn"
		switch {
		case last.Role == "user" && len(results) > 0:
			blocks = []block{{"text", words(toolSaid + strings.Join(results, "; ")), ""}}
		case len(req.Tools) > 0:
			// Claude says a line before a call: the call is block 1, not 0
			blocks = []block{{"text", words(msgToolPreface), ""}, {"tool_use", weatherFragments, msgToolUseID}}
			if strings.Contains(textOf(last.Content), bothCities) {
				blocks = append(blocks, block{"tool_use", lyonFragments, msgToolUseID2})
			}
			stop = "tool_use"
		default:
			blocks = []block{{"text", words(msgGreeting), ""}}
		}
		if !req.Stream {
			var content []any
			for _, b := range blocks {
				if b.kind == "text" {
					content = append(content, map[string]any{"type": "text", "text": strings.Join(b.deltas, "")})
				} else {
					content = append(content, map[string]any{"type": "tool_use", "id": b.id, "name": "get_weather",
						"input": json.RawMessage(strings.Join(b.deltas, ""))})
				}
			}
			out, _ := json.Marshal(map[string]any{"id": "msg_01Scripted", "type": "message", "role": "assistant", "model": req.Model,
				"content": content, "stop_reason": stop, "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": msgInputTokens, "output_tokens": msgOutputTokens,
					"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}})
			w.Header().Set("Content-Type", "application/json")
			w.Write(out)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		event := func(name, data string) {
			fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
			w.(http.Flusher).Flush()
		}
		event("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01Scripted","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d,"cache_creation_input_tokens":0,"cache_read_input_tokens":0,"output_tokens":1}}}`, req.Model, msgInputTokens))
		for i, b := range blocks {
			if b.kind == "text" {
				event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"text","text":""}}`, i))
				if i == 0 {
					event("ping", `{"type": "ping"}`)
				}
				for _, d := range b.deltas {
					q, _ := json.Marshal(d)
					event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"text_delta","text":%s}}`, i, q))
				}
			} else {
				event("content_block_start", fmt.Sprintf(`{"type":"content_block_start","index":%d,"content_block":{"type":"tool_use","id":%q,"name":"get_weather","input":{}}}`, i, b.id))
				event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":""}}`, i))
				for _, d := range b.deltas {
					q, _ := json.Marshal(d)
					event("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":%d,"delta":{"type":"input_json_delta","partial_json":%s}}`, i, q))
				}
			}
			event("content_block_stop", fmt.Sprintf(`{"type":"content_block_stop","index":%d}`, i))
		}
		event("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":%q,"stop_sequence":null},"usage":{"output_tokens":%d}}`, stop, msgOutputTokens))
		event("message_stop", `{"type":"message_stop"}`)
	})
	return e
}

// failing answers every request with status and body in its API's shape.
func failing(t *testing.T, status int, body string) *recorder {
	t.Helper()
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		io.WriteString(w, body)
	})
}

// ---- what the engines saw ----

// refuse records a request the engine refused as its provider would.
func (e *scriptedEngine) refuse(msg string) {
	e.refusedMu.Lock()
	defer e.refusedMu.Unlock()
	e.refused = append(e.refused, msg)
}

// noneRefused fails the test if the engine refused a request.
func (e *scriptedEngine) noneRefused(t *testing.T) {
	t.Helper()
	e.refusedMu.Lock()
	defer e.refusedMu.Unlock()
	if len(e.refused) > 0 {
		t.Errorf("the engine refused what the gateway translated: %q", e.refused)
	}
}

// sawOnly asserts every request the engine got went to path with the
// engine's own key in header (the caller's token never), and returns them.
func (e *scriptedEngine) sawOnly(t *testing.T, path, header, key, callerKey string) []recorded {
	t.Helper()
	got := e.all()
	if len(got) == 0 {
		t.Fatal("the engine got no request")
	}
	for i, r := range got {
		if r.path != path {
			t.Errorf("request %d went to %s, want %s", i, r.path, path)
		}
		if header != "" {
			want := key
			if strings.EqualFold(header, "Authorization") {
				want = "Bearer " + key
			}
			if v := r.header.Get(header); v != want {
				t.Errorf("request %d: %s %q, want the engine's own key %q", i, header, v, want)
			}
		}
		for name, vs := range r.header {
			for _, v := range vs {
				if callerKey != "" && strings.Contains(v, callerKey) {
					t.Errorf("request %d carried the caller's key in %s", i, name)
				}
			}
		}
		if bytes.Contains(r.body, []byte(callerKey)) && callerKey != "" {
			t.Errorf("request %d carried the caller's key in its body", i)
		}
	}
	return got
}

// The scripted engines refuse what their providers refuse: a translation
// test that passes against them is not passing against a lenient fake.
func TestTranslationScriptedEnginesRefuseWhatTheirAPIsRefuse(t *testing.T) {
	msgs, chat := scriptedMessages(t), scriptedChat(t)
	send := func(url, path, body string, header ...string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+path, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, b := do(t, req)
		return resp.StatusCode, b
	}
	const version = "2023-06-01"
	user := `{"role":"user","content":"hi"}`
	use := `{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"get_weather","input":{}}]}`
	result := `{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}`
	tools := `"tools":[{"name":"get_weather","input_schema":{"type":"object"}}]`
	for name, c := range map[string]struct{ body, version string }{
		"no max_tokens":          {`{"model":"m","messages":[` + user + `]}`, version},
		"system role":            {`{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"be nice"},` + user + `]}`, version},
		"empty text block":       {`{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":""}]}]}`, version},
		"result not right after": {`{"model":"m","max_tokens":5,` + tools + `,"messages":[` + user + `,` + use + `,` + user + `,` + result + `]}`, version},
		"result after text":      {`{"model":"m","max_tokens":5,` + tools + `,"messages":[` + user + `,` + use + `,{"role":"user","content":[{"type":"text","text":"x"},{"type":"tool_result","tool_use_id":"toolu_1","content":"ok"}]}]}`, version},
		"no anthropic-version":   {`{"model":"m","max_tokens":5,"messages":[` + user + `]}`, ""},
		"unknown member":         {`{"model":"m","max_tokens":5,"n":2,"messages":[` + user + `]}`, version},
		"tool blocks, no tools":  {`{"model":"m","max_tokens":5,"messages":[` + user + `,` + use + `,` + result + `]}`, version},
	} {
		status, body := send(msgs.URL, "/v1/messages", c.body, "Anthropic-Version", c.version)
		if status != 400 || !strings.Contains(body, `"type":"error"`) || !strings.Contains(body, "invalid_request_error") {
			t.Errorf("Messages engine, %s: %d %s", name, status, body)
		}
	}
	if status, body := send(msgs.URL, "/v1/messages", `{"model":"m","max_tokens":5,`+tools+`,"messages":[`+user+`,`+use+`,`+result+`]}`, "Anthropic-Version", version); status != 200 {
		t.Errorf("Messages engine refused a good tool turn: %d %s", status, body)
	}
	if status, body := send(msgs.URL, "/v1/chat/completions", `{}`); status != 404 || !strings.Contains(body, "not_found_error") {
		t.Errorf("Messages engine on the Chat path: %d %s", status, body)
	}
	for name, body := range map[string]string{
		"unknown member":      `{"model":"m","max_tokens":5,"system":"x","messages":[` + user + `]}`,
		"unanswered call":     `{"model":"m","messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},` + user + `]}`,
		"tool without a call": `{"model":"m","messages":[` + user + `,{"role":"tool","tool_call_id":"call_1","content":"x"}]}`,
	} {
		if status, out := send(chat.URL, "/v1/chat/completions", body); status != 400 || !strings.Contains(out, `"error":{`) {
			t.Errorf("Chat engine, %s: %d %s", name, status, out)
		}
	}
	if status, body := send(chat.URL, "/v1/messages", `{}`); status != 404 || strings.Contains(body, `"type":"error"`) {
		t.Errorf("Chat engine on the Messages path: %d %s", status, body)
	}
}
