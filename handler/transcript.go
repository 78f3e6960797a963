package handler

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// maxTranscript bounds the text kept per stream; beyond it a stream is no
// longer resumable (and the memory is given back).
const maxTranscript = 256 << 10

// transcript is what a resumable stream has sent so far.
type transcript struct {
	text    []byte
	id      json.RawMessage // of the chunks already sent
	created json.RawMessage
	off     bool         // tool calls, several choices, too long: not resumable
	api     apierror.API // the stream's grammar
	// resumable: a fallback may continue the stream; else only its trace
	// keeps its text (trace_content)
	resumable bool
}

// resumeChunk is the part of a chat chunk a transcript needs.
type resumeChunk struct {
	ID      json.RawMessage `json:"id"`
	Created json.RawMessage `json:"created"`
	Choices []struct {
		Index int `json:"index"`
		Delta *struct {
			Content      *string         `json:"content"`
			ToolCalls    json.RawMessage `json:"tool_calls"`
			FunctionCall json.RawMessage `json:"function_call"`
		} `json:"delta"`
	} `json:"choices"`
}

// add records one event that went to the client.
func (t *transcript) add(ev []byte) {
	if t == nil || t.off {
		return
	}
	data, ok := sse.Data(ev)
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
		return
	}
	if t.api == apierror.Anthropic {
		t.addAnthropic(data)
		return
	}
	var c resumeChunk
	if json.Unmarshal(data, &c) != nil {
		return
	}
	if t.id == nil && len(c.ID) > 0 {
		t.id, t.created = c.ID, c.Created
	}
	for _, ch := range c.Choices {
		if ch.Index != 0 {
			t.stop()
			return
		}
		if ch.Delta == nil {
			continue
		}
		if grammar.IsSet(ch.Delta.ToolCalls) || grammar.IsSet(ch.Delta.FunctionCall) {
			t.stop()
			return
		}
		if ch.Delta.Content != nil {
			t.text = append(t.text, *ch.Delta.Content...)
		}
	}
	if len(t.text) > maxTranscript {
		t.stop()
	}
}

// preamble reports whether an event of a continuation is one the client
// already has: OpenAI's role chunk, Anthropic's message_start,
// content_block_start and ping.
func (t *transcript) preamble(ev []byte) bool {
	if t.api == apierror.Anthropic {
		return grammar.ClassifyAnthropic(ev) == grammar.Preamble
	}
	return grammar.Classify(ev, true) == grammar.Preamble
}

func (t *transcript) stop() {
	t.off, t.text = true, nil
}

// addAll records every event in a run of events.
func (t *transcript) addAll(events []byte) {
	for len(events) > 0 && t != nil && !t.off {
		n := sse.EventEnd(events)
		if n < 0 {
			n = len(events)
		}
		t.add(events[:n])
		events = events[n:]
	}
}

// rewriteIDs gives a resumed stream's chunks (and an engine's chunks after
// the gateway's loading status chunks) the id and created of the chunks the
// client already has, so the answer reads as one stream, and its
// usage the tokens sent before the seam (carry), so that the answer reports
// (and the key is charged) the whole answer, not the continuation's part.
type rewriteIDs struct {
	id, created json.RawMessage
	// model, when set, is the model the stream's first chunks named: the
	// gateway's own loading status chunks (reply.go) name the model the
	// client asked for, before any engine has answered
	model json.RawMessage
	carry int
}

// applyAll rewrites each event of events (held before commit).
func (r *rewriteIDs) applyAll(events []byte) []byte {
	if r == nil || len(events) == 0 {
		return events
	}
	out := make([]byte, 0, len(events)+64)
	for len(events) > 0 {
		n := sse.EventEnd(events)
		if n < 0 {
			n = len(events)
		}
		out = append(out, r.apply(events[:n])...)
		events = events[n:]
	}
	return out
}

func (r *rewriteIDs) apply(ev []byte) []byte {
	if r == nil {
		return ev
	}
	data, ok := sse.Data(ev)
	if !ok {
		return ev
	}
	data = bytes.TrimSpace(data)
	f, err := jsonmember.ScanAnswer(data)
	if err != nil {
		return ev
	}
	var edits []jsonmember.Edit
	if f.ID.OK() && len(r.id) > 0 {
		edits = append(edits, jsonmember.Edit{Start: f.ID.Value.Start, End: f.ID.Value.End, Repl: r.id})
	}
	if f.Created.OK() && len(r.created) > 0 {
		edits = append(edits, jsonmember.Edit{Start: f.Created.Value.Start, End: f.Created.Value.End, Repl: r.created})
	}
	if f.Model.OK() && len(r.model) > 0 {
		edits = append(edits, jsonmember.Edit{Start: f.Model.Value.Start, End: f.Model.Value.End, Repl: r.model})
	}
	if f.Usage.OK() && r.carry > 0 && data[f.Usage.Value.Start] == '{' {
		for _, name := range [...]string{"completion_tokens", "output_tokens", "total_tokens"} {
			m, ok := jsonmember.LastMember(data, f.Usage.Value.Start, name)
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(string(data[m.Value.Start:m.Value.End])); err == nil {
				edits = append(edits, jsonmember.Edit{Start: m.Value.Start, End: m.Value.End, Repl: strconv.AppendInt(nil, int64(n+r.carry), 10)})
			}
		}
	}
	if len(edits) == 0 {
		return ev
	}
	out := append([]byte("data: "), jsonmember.ApplyEdits(data, edits...)...)
	return append(out, "\n\n"...)
}
