package demoengine

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// responsesRequest is what the demo engine reads of a Responses API request
// (POST /v1/responses): input is a string or a list of input items.
type responsesRequest struct {
	Model        string          `json:"model"`
	Stream       bool            `json:"stream"`
	Instructions *string         `json:"instructions"`
	Input        json.RawMessage `json:"input"`
}

// lastUserText is the text of the input's last user message.
func (r responsesRequest) lastUserText() string {
	var text string
	if json.Unmarshal(r.Input, &text) == nil {
		return text
	}
	var items []chatMessage
	if json.Unmarshal(r.Input, &items) != nil {
		return ""
	}
	return lastUserText(items, "input_text")
}

// responses answers the Responses API as OpenAI does: one response object,
// or with "stream": true the typed events response.created,
// response.in_progress, response.output_item.added,
// response.content_part.added, response.output_text.delta (a few words
// each), response.output_text.done, response.content_part.done,
// response.output_item.done and response.completed. That stream has no
// `data: [DONE]`.
func (s *server) responses(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !s.gate(w, r) {
		return
	}
	var req responsesRequest
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	n := s.seq.Add(1)
	rs := &responseState{
		id:           fmt.Sprintf("resp_demo%d", n),
		msgID:        fmt.Sprintf("msg_demo%d", n),
		created:      time.Now().Unix(),
		model:        req.Model,
		instructions: req.Instructions,
		text:         s.replyTo(r, body, req.lastUserText()),
		inputTokens:  len(body) / 4,
	}
	if rs.model == "" {
		rs.model = s.o.Model
	}
	if !req.Stream {
		writeJSON(w, http.StatusOK, rs.response("completed", true))
		return
	}
	s.streamResponse(w, r, rs)
}

// responseState is one Responses API answer being built.
type responseState struct {
	id, msgID    string
	created      int64
	model        string
	instructions *string
	text         string
	inputTokens  int
}

func (rs *responseState) message(status string, text *string) map[string]any {
	content := []any{}
	if text != nil {
		content = append(content, outputText(*text))
	}
	return map[string]any{"type": "message", "id": rs.msgID, "status": status, "role": "assistant", "content": content}
}

func outputText(text string) map[string]any {
	return map[string]any{"type": "output_text", "text": text, "annotations": []any{}, "logprobs": []any{}}
}

// response is the response object, finished (output and usage) or not.
func (rs *responseState) response(status string, finished bool) map[string]any {
	out := map[string]any{
		"id": rs.id, "object": "response", "created_at": rs.created, "status": status,
		"model": rs.model, "output": []any{}, "instructions": rs.instructions,
		"error": nil, "incomplete_details": nil, "metadata": map[string]any{},
		"parallel_tool_calls": true, "temperature": 1.0, "top_p": 1.0,
		"tool_choice": "auto", "tools": []any{}, "text": map[string]any{"format": map[string]any{"type": "text"}},
		"usage": nil,
	}
	if finished {
		out["output"] = []any{rs.message("completed", &rs.text)}
		words := len(strings.Fields(rs.text))
		out["usage"] = map[string]any{
			"input_tokens": rs.inputTokens, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": words, "output_tokens_details": map[string]any{"reasoning_tokens": 0},
			"total_tokens": rs.inputTokens + words,
		}
	}
	return out
}

func (s *server) streamResponse(w http.ResponseWriter, r *http.Request, rs *responseState) {
	flusher := startEvents(w)
	seq := 0
	send := func(typ string, fields map[string]any) bool {
		fields["type"] = typ
		fields["sequence_number"] = seq
		seq++
		b, _ := json.Marshal(fields)
		if _, err := fmt.Fprintf(w, "event: %s\ndata: %s\n\n", typ, b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	part := func(text string) map[string]any {
		return map[string]any{"item_id": rs.msgID, "output_index": 0, "content_index": 0, "part": outputText(text)}
	}
	if !send("response.created", map[string]any{"response": rs.response("in_progress", false)}) ||
		!send("response.in_progress", map[string]any{"response": rs.response("in_progress", false)}) ||
		!send("response.output_item.added", map[string]any{"output_index": 0, "item": rs.message("in_progress", nil)}) ||
		!send("response.content_part.added", part("")) {
		return
	}
	words := strings.Fields(rs.text)
	if !s.streamWords(r, words, func(piece string) bool {
		return send("response.output_text.delta", map[string]any{"item_id": rs.msgID, "output_index": 0,
			"content_index": 0, "delta": piece, "logprobs": []any{}})
	}) {
		return
	}
	// the text sent is the words joined by single spaces
	rs.text = strings.Join(words, " ")
	_ = send("response.output_text.done", map[string]any{"item_id": rs.msgID, "output_index": 0,
		"content_index": 0, "text": rs.text, "logprobs": []any{}}) &&
		send("response.content_part.done", part(rs.text)) &&
		send("response.output_item.done", map[string]any{"output_index": 0, "item": rs.message("completed", &rs.text)}) &&
		send("response.completed", map[string]any{"response": rs.response("completed", true)})
}
