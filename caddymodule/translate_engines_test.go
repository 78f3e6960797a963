package caddymodule

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Scripted engines for the translation tests: each speaks exactly one API,
// answers the other APIs' paths with a 404 in its own error shape, and
// refuses what its real counterpart refuses (unknown members, broken tool
// turns), so a translation that only looks right to the gateway fails
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

// unknownMembers are the members of a JSON object not in known.
func unknownMembers(body []byte, known ...string) []string {
	var m map[string]json.RawMessage
	json.Unmarshal(body, &m)
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
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
func toolResults(msgs []chatMessage) []string {
	var out []string
	for i := len(msgs) - 1; i >= 0 && msgs[i].Role == "tool"; i-- {
		out = append([]string{textOf(msgs[i].Content)}, out...)
	}
	return out
}

// ---- Chat Completions ----

// chatMembers are Chat Completions' request members: OpenAI answers 400
// "Unrecognized request argument" to any other.
var chatMembers = []string{"messages", "model", "audio", "frequency_penalty", "function_call", "functions", "logit_bias",
	"logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities", "n", "parallel_tool_calls", "prediction",
	"presence_penalty", "prompt_cache_key", "prompt_cache_retention", "reasoning_effort", "response_format",
	"safety_identifier", "seed", "service_tier", "stop", "store", "stream", "stream_options", "temperature", "tool_choice",
	"tools", "top_logprobs", "top_p", "user", "verbosity", "web_search_options"}

type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type chatMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []chatToolCall  `json:"tool_calls"`
}

type chatRequest struct {
	Model    string        `json:"model"`
	Messages []chatMessage `json:"messages"`
	Tools    []struct {
		Type     string `json:"type"`
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	} `json:"tools"`
	Stream        bool `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func openAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": nil}})
	w.Write(b)
}

// checkChat is what OpenAI would refuse in a Chat request, or "".
func checkChat(body []byte, req *chatRequest) string {
	if err := json.Unmarshal(body, req); err != nil {
		return "We could not parse the JSON body of your request: " + err.Error()
	}
	if u := unknownMembers(body, chatMembers...); len(u) > 0 {
		return "Unrecognized request argument supplied: " + strings.Join(u, ", ")
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return "you must provide a model and at least one message"
	}
	for i, t := range req.Tools {
		if t.Type != "function" || t.Function.Name == "" {
			return fmt.Sprintf("Invalid value at tools[%d]: a function tool with a name", i)
		}
	}
	for i, m := range req.Messages {
		switch m.Role {
		case "system", "developer", "user", "assistant", "tool":
		default:
			return fmt.Sprintf("Invalid value: '%s'. Supported values are: 'system', 'assistant', 'user', 'tool', 'developer'", m.Role)
		}
		if m.Role == "tool" {
			// a tool message answers a call of the assistant message before
			// the run of tool messages it is in
			j := i - 1
			for j >= 0 && req.Messages[j].Role == "tool" {
				j--
			}
			if j < 0 || !slices.ContainsFunc(req.Messages[j].ToolCalls, func(c chatToolCall) bool { return c.ID == m.ToolCallID }) {
				return fmt.Sprintf("Invalid parameter: messages with role 'tool' must be a response to a preceeding message with 'tool_calls' (messages[%d], tool_call_id %q)", i, m.ToolCallID)
			}
		}
		for _, c := range m.ToolCalls {
			answered := false
			for _, n := range req.Messages[i+1:] {
				if n.Role != "tool" {
					break
				}
				answered = answered || n.ToolCallID == c.ID
			}
			if !answered || c.Type != "function" || !json.Valid([]byte(c.Function.Arguments)) {
				return fmt.Sprintf("An assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'. The following tool_call_ids did not have response messages: %s", c.ID)
			}
		}
	}
	return ""
}

// scriptedChat speaks Chat Completions only.
func scriptedChat(t *testing.T) *scriptedEngine {
	t.Helper()
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
			openAIError(w, 404, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req chatRequest
		if msg := checkChat(body, &req); msg != "" {
			e.refuse(msg)
			openAIError(w, 400, "invalid_request_error", msg)
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

// messagesMembers are Messages' request members: Anthropic answers 400
// "Extra inputs are not permitted" to any other.
var messagesMembers = []string{"model", "messages", "max_tokens", "metadata", "stop_sequences", "stream", "system",
	"temperature", "thinking", "tool_choice", "tools", "top_k", "top_p", "service_tier", "container", "mcp_servers",
	"context_management", "output_config", "output_format", "inference_geo"}

type messagesBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

type messagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		blocks  []messagesBlock
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_scripted")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_scripted"})
	w.Write(b)
}

var toolUseID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// checkMessages is what Anthropic would refuse in a Messages request, or "".
func checkMessages(r *http.Request, body []byte, req *messagesRequest) string {
	if r.Header.Get("Anthropic-Version") == "" {
		return "anthropic-version: header is required"
	}
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	if u := unknownMembers(body, messagesMembers...); len(u) > 0 {
		return u[0] + ": Extra inputs are not permitted"
	}
	if req.MaxTokens == nil || *req.MaxTokens < 1 {
		return "max_tokens: Field required"
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return "model and messages: Field required"
	}
	if len(req.System) > 0 && req.System[0] == '[' {
		var sys []messagesBlock
		json.Unmarshal(req.System, &sys)
		for i, b := range sys {
			if b.Type != "text" || b.Text == nil || strings.TrimSpace(*b.Text) == "" {
				return fmt.Sprintf("system.%d: text content blocks must contain non-whitespace text", i)
			}
		}
	}
	for i, t := range req.Tools {
		if t.Name == "" || len(t.InputSchema) == 0 {
			return fmt.Sprintf("tools.%d.input_schema: Field required", i)
		}
	}
	toolBlocks := false
	for i := range req.Messages {
		m := &req.Messages[i]
		if m.Role != "user" && m.Role != "assistant" {
			return fmt.Sprintf("messages.%d.role: Input should be 'user' or 'assistant'", i)
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			if strings.TrimSpace(s) == "" && i != len(req.Messages)-1 {
				return fmt.Sprintf("messages.%d: all messages must have non-empty content except for the optional final assistant message", i)
			}
			continue
		}
		if err := json.Unmarshal(m.Content, &m.blocks); err != nil || len(m.blocks) == 0 {
			return fmt.Sprintf("messages.%d.content: Input should be a valid list", i)
		}
		for j, b := range m.blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
			case "tool_use":
				toolBlocks = true
				if m.Role != "assistant" || !toolUseID.MatchString(b.ID) || b.Name == "" || len(b.Input) == 0 || b.Input[0] != '{' {
					return fmt.Sprintf("messages.%d.content.%d.tool_use: a tool_use needs an id matching ^[a-zA-Z0-9_-]+$, a name and an input object", i, j)
				}
			case "tool_result":
				toolBlocks = true
				if m.Role != "user" || !toolUseID.MatchString(b.ToolUseID) {
					return fmt.Sprintf("messages.%d.content.%d.tool_result: tool_use_id must match ^[a-zA-Z0-9_-]+$", i, j)
				}
			case "image", "document", "thinking", "redacted_thinking":
			default:
				return fmt.Sprintf("messages.%d.content.%d.type: Input tag '%s' does not match any of the expected tags", i, j, b.Type)
			}
		}
	}
	if toolBlocks && len(req.Tools) == 0 {
		return "Requests which include `tool_use` or `tool_result` blocks must define tools."
	}
	// every tool_use is answered in the very next message, a user one,
	// with its tool_result, results before anything else
	for i, m := range req.Messages {
		var uses []string
		for _, b := range m.blocks {
			if b.Type == "tool_use" {
				uses = append(uses, b.ID)
			}
		}
		var prev []string
		if i > 0 {
			for _, b := range req.Messages[i-1].blocks {
				if b.Type == "tool_use" {
					prev = append(prev, b.ID)
				}
			}
		}
		seenOther := false
		for j, b := range m.blocks {
			if b.Type != "tool_result" {
				seenOther = true
				continue
			}
			if !slices.Contains(prev, b.ToolUseID) {
				return fmt.Sprintf("messages.%d.content.%d: unexpected `tool_use_id` found in `tool_result` blocks: %s. Each `tool_result` block must have a corresponding `tool_use` block in the previous message.", i, j, b.ToolUseID)
			}
			if seenOther {
				return fmt.Sprintf("messages.%d: tool_result blocks must come first in the user message", i)
			}
		}
		if len(uses) == 0 {
			continue
		}
		answered := map[string]bool{}
		if i+1 < len(req.Messages) && req.Messages[i+1].Role == "user" {
			for _, b := range req.Messages[i+1].blocks {
				if b.Type == "tool_result" {
					answered[b.ToolUseID] = true
				}
			}
		}
		for _, id := range uses {
			if !answered[id] && i+1 < len(req.Messages) {
				return fmt.Sprintf("messages.%d: `tool_use` ids were found without `tool_result` blocks immediately after: %s. Each `tool_use` block must have a corresponding `tool_result` block in the next message.", i, id)
			}
		}
	}
	return ""
}

// scriptedMessages speaks Anthropic's Messages only.
func scriptedMessages(t *testing.T) *scriptedEngine {
	t.Helper()
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPost || r.URL.Path != "/v1/messages" {
			anthropicError(w, 404, "not_found_error", "Not Found")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req messagesRequest
		if msg := checkMessages(r, body, &req); msg != "" {
			e.refuse(msg)
			anthropicError(w, 400, "invalid_request_error", msg)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		var results []string
		for _, b := range last.blocks {
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
