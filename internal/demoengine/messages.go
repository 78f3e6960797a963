package demoengine

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// messagesRequest is what the demo engine reads of an Anthropic Messages
// API request (POST /v1/messages): each message's content is a string or a
// list of content blocks.
type messagesRequest struct {
	Model     string        `json:"model"`
	Stream    bool          `json:"stream"`
	MaxTokens int           `json:"max_tokens"`
	Messages  []chatMessage `json:"messages"`
}

// lastUserText is the text of the last user message.
func (r messagesRequest) lastUserText() string { return lastUserText(r.Messages, "text") }

// chatMessage is a message of a conversation, its content a string or a
// list of typed parts.
type chatMessage struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// lastUserText is the text of the last user message of msgs: its content
// string, or its parts of type textType joined.
func lastUserText(msgs []chatMessage, textType string) string {
	var text string
	for _, m := range msgs {
		if m.Role != "user" {
			continue
		}
		var s string
		if json.Unmarshal(m.Content, &s) == nil {
			text = s
			continue
		}
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if json.Unmarshal(m.Content, &parts) == nil {
			var b strings.Builder
			for _, p := range parts {
				if p.Type == textType {
					b.WriteString(p.Text)
				}
			}
			text = b.String()
		}
	}
	return text
}

// anthropicError is the Messages API's error shape.
func anthropicError(w http.ResponseWriter, status int, typ, msg string) {
	if typ == "unavailable_error" || typ == "server_error" {
		typ = "api_error"
	}
	writeJSON(w, status, map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}})
}

// messages answers Anthropic's Messages API as Anthropic does: one message
// object, or with "stream": true the typed events message_start,
// content_block_start, ping, content_block_delta (a few words each),
// content_block_stop, message_delta (the stop reason and the output
// tokens) and message_stop. A word counts as a token: an answer longer than
// max_tokens stops there with stop_reason "max_tokens" (the
// README advertised /v1/messages and the demo engine answered 404).
func (s *server) messages(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readAnthropic(w, r)
	if !ok {
		return
	}
	var req messagesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	if req.MaxTokens <= 0 {
		anthropicError(w, http.StatusBadRequest, "invalid_request_error", "max_tokens: a positive number is required")
		return
	}
	ms := &messageState{
		id:          fmt.Sprintf("msg_demo%d", s.seq.Add(1)),
		model:       req.Model,
		words:       strings.Fields(s.replyTo(r, body, req.lastUserText())),
		stopReason:  "end_turn",
		inputTokens: len(body) / 4,
	}
	if ms.model == "" {
		ms.model = s.o.Model
	}
	if len(ms.words) > req.MaxTokens {
		ms.words, ms.stopReason = ms.words[:req.MaxTokens], "max_tokens"
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, ms.message(true))
		return
	}
	s.streamMessage(w, r, ms)
}

// readAnthropic reads a Messages API request, or answers the engine's
// refusal (its key, its scripted failures) in Anthropic's shape.
func (s *server) readAnthropic(w http.ResponseWriter, r *http.Request) ([]byte, bool) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, false
	}
	if status, typ, msg := s.refusal(r, true); status != 0 {
		anthropicError(w, status, typ, msg)
		return nil, false
	}
	return body, true
}

// countTokens answers /v1/messages/count_tokens: a quarter of the body's
// bytes, the demo engine's measure of input tokens everywhere.
func (s *server) countTokens(w http.ResponseWriter, r *http.Request) {
	body, ok := s.readAnthropic(w, r)
	if !ok {
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"input_tokens": len(body) / 4})
}

// messageState is one Messages API answer being built.
type messageState struct {
	id, model   string
	words       []string
	stopReason  string
	inputTokens int
}

// message is the message object: whole, or as message_start carries it
// (no content, no stop reason, the output tokens so far).
func (ms *messageState) message(finished bool) map[string]any {
	out := map[string]any{
		"id": ms.id, "type": "message", "role": "assistant", "model": ms.model,
		"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": ms.inputTokens, "output_tokens": 1,
			"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	}
	if finished {
		out["content"] = []any{map[string]any{"type": "text", "text": strings.Join(ms.words, " ")}}
		out["stop_reason"] = ms.stopReason
		out["usage"].(map[string]any)["output_tokens"] = len(ms.words)
	}
	return out
}

func (s *server) streamMessage(w http.ResponseWriter, r *http.Request, ms *messageState) {
	flusher := startEvents(w)
	send := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		b, _ := json.Marshal(fields)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	if !send("message_start", map[string]any{"message": ms.message(false)}) ||
		!send("content_block_start", map[string]any{"index": 0, "content_block": map[string]any{"type": "text", "text": ""}}) ||
		!send("ping", map[string]any{}) {
		return
	}
	if !s.streamWords(r, ms.words, func(piece string) bool {
		return send("content_block_delta", map[string]any{"index": 0,
			"delta": map[string]any{"type": "text_delta", "text": piece}})
	}) {
		return
	}
	_ = send("content_block_stop", map[string]any{"index": 0}) &&
		send("message_delta", map[string]any{
			"delta": map[string]any{"stop_reason": ms.stopReason, "stop_sequence": nil},
			"usage": map[string]any{"input_tokens": ms.inputTokens, "output_tokens": len(ms.words)}}) &&
		send("message_stop", map[string]any{})
}
