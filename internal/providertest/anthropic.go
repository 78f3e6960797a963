package providertest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// Anthropic's Messages API as api.anthropic.com reads a request
// (https://docs.anthropic.com/en/api/messages): what it refuses, its
// error's shape, and a fake of it. The tests' own Messages-only engines
// hold requests to the same rules.

// What the Anthropic fake answers, and the usage it reports.
const (
	ClaudeModel   = "claude-3-5-sonnet-20241022"
	AnthropicText = "Hello from Anthropic."
	AnthropicIn   = 21
	AnthropicOut  = 13
)

// Anthropic is api.anthropic.com's Messages: x-api-key (AnthropicKey, no
// Authorization) and anthropic-version required. Modes: ok, cached,
// overloaded (529), rate_limited (429 with a retry-after too long to wait
// for).
func Anthropic(t testing.TB, mode string) *Fake {
	return newFake(t, mode, AnthropicKey, func(f *Fake, w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/messages" {
			f.refuse("path %s", r.URL.Path)
			AnthropicError(w, 404, "not_found_error", "Not Found")
			return
		}
		if ct := r.Header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
			f.refuse("content type %q", ct)
			AnthropicError(w, 400, "invalid_request_error", "Content-Type must be application/json")
			return
		}
		if r.Header.Get("X-Api-Key") != f.getKey() || r.Header.Get("Authorization") != "" {
			f.refuse("x-api-key %q, Authorization %q", r.Header.Get("X-Api-Key"), r.Header.Get("Authorization"))
			AnthropicError(w, 401, "authentication_error", "invalid x-api-key")
			return
		}
		var req MessagesRequest
		if msg := CheckMessages(r, body, &req); msg != "" {
			f.refuse("%s: %s", msg, body)
			AnthropicError(w, 400, "invalid_request_error", msg)
			return
		}
		switch f.Mode() {
		case "overloaded":
			AnthropicError(w, 529, "overloaded_error", "Overloaded")
			return
		case "rate_limited":
			w.Header().Set("Retry-After", "60")
			AnthropicError(w, 429, "rate_limit_error", "This request would exceed the rate limit for your organization of 50 requests per minute.")
			return
		}
		in, out, cache := AnthropicIn, AnthropicOut, ""
		if f.Mode() == "cached" {
			in, out = cachedIn-cachedRead-cachedWrite, cachedOut
			cache = fmt.Sprintf(`,"cache_read_input_tokens":%d,"cache_creation_input_tokens":%d`, cachedRead, cachedWrite)
		}
		if !req.Stream {
			writeJSON(w, 200, fmt.Sprintf(`{"id":"msg_01Pv","type":"message","role":"assistant","model":%q,"content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":%d%s,"output_tokens":%d}}`,
				req.Model, AnthropicText, in, cache, out))
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		ev := func(typ, data string) { fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, data) }
		ev("message_start", fmt.Sprintf(`{"type":"message_start","message":{"id":"msg_01Pv","type":"message","role":"assistant","model":%q,"content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":%d%s,"output_tokens":1}}}`, req.Model, in, cache))
		ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
		ev("content_block_delta", fmt.Sprintf(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":%q}}`, AnthropicText))
		ev("content_block_stop", `{"type":"content_block_stop","index":0}`)
		ev("message_delta", fmt.Sprintf(`{"type":"message_delta","delta":{"stop_reason":"end_turn","stop_sequence":null},"usage":{"output_tokens":%d}}`, out))
		ev("message_stop", `{"type":"message_stop"}`)
	})
}

// messagesMembers are Messages' request members: Anthropic answers 400
// "Extra inputs are not permitted" to any other.
var messagesMembers = []string{"model", "messages", "max_tokens", "metadata", "stop_sequences", "stream", "system",
	"temperature", "thinking", "tool_choice", "tools", "top_k", "top_p", "service_tier", "container", "mcp_servers",
	"context_management", "output_config", "output_format", "inference_geo"}

// MessagesBlock is a content block of a Messages request.
type MessagesBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
}

// MessagesRequest is the part of a Messages request the fakes read; each
// message's Blocks are its content's blocks once CheckMessages has read
// them (none when the content is a string).
type MessagesRequest struct {
	Model     string          `json:"model"`
	MaxTokens *int            `json:"max_tokens"`
	System    json.RawMessage `json:"system"`
	Messages  []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
		Blocks  []MessagesBlock `json:"-"`
	} `json:"messages"`
	Tools []struct {
		Name        string          `json:"name"`
		InputSchema json.RawMessage `json:"input_schema"`
	} `json:"tools"`
	Stream bool `json:"stream"`
}

// AnthropicError answers an error in Anthropic's shape.
func AnthropicError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_scripted")
	w.WriteHeader(status)
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}, "request_id": "req_scripted"})
	w.Write(b)
}

// ToolUseID is what Anthropic takes as a tool_use's id (and a
// tool_result's tool_use_id).
var ToolUseID = regexp.MustCompile(`^[a-zA-Z0-9_-]+$`)

// CheckMessages is what Anthropic would refuse in a Messages request, or "".
func CheckMessages(r *http.Request, body []byte, req *MessagesRequest) string {
	if r.Header.Get("Anthropic-Version") == "" {
		return "anthropic-version: header is required"
	}
	if err := json.Unmarshal(body, req); err != nil {
		return "invalid JSON body: " + err.Error()
	}
	if u := UnknownMembers(body, messagesMembers...); len(u) > 0 {
		return u[0] + ": Extra inputs are not permitted"
	}
	if req.MaxTokens == nil || *req.MaxTokens < 1 {
		return "max_tokens: Field required"
	}
	if req.Model == "" || len(req.Messages) == 0 {
		return "model and messages: Field required"
	}
	if len(req.System) > 0 && req.System[0] == '[' {
		var sys []MessagesBlock
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
		if err := json.Unmarshal(m.Content, &m.Blocks); err != nil || len(m.Blocks) == 0 {
			return fmt.Sprintf("messages.%d.content: Input should be a valid list", i)
		}
		for j, b := range m.Blocks {
			switch b.Type {
			case "text":
				if b.Text == nil || *b.Text == "" {
					return fmt.Sprintf("messages.%d.content.%d.text: text content blocks must be non-empty", i, j)
				}
			case "tool_use":
				toolBlocks = true
				if m.Role != "assistant" || !ToolUseID.MatchString(b.ID) || b.Name == "" || len(b.Input) == 0 || b.Input[0] != '{' {
					return fmt.Sprintf("messages.%d.content.%d.tool_use: a tool_use needs an id matching ^[a-zA-Z0-9_-]+$, a name and an input object", i, j)
				}
			case "tool_result":
				toolBlocks = true
				if m.Role != "user" || !ToolUseID.MatchString(b.ToolUseID) {
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
		for _, b := range m.Blocks {
			if b.Type == "tool_use" {
				uses = append(uses, b.ID)
			}
		}
		var prev []string
		if i > 0 {
			for _, b := range req.Messages[i-1].Blocks {
				if b.Type == "tool_use" {
					prev = append(prev, b.ID)
				}
			}
		}
		seenOther := false
		for j, b := range m.Blocks {
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
			for _, b := range req.Messages[i+1].Blocks {
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
