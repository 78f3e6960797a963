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

// add records one event that went to the client.
func (t *transcript) add(ev []byte) {
	if t == nil || t.off {
		return
	}
	e := grammar.Grammar{Anthropic: t.api == apierror.Anthropic}.Scan(ev, false)
	t.addScanned(&e)
}

// addScanned records one event from what its scan (grammar.Scan) found,
// reading the members it needs where the scan found them: no decoding, no
// allocation but the text's growth (issue 30: this runs for every event of
// a resumable stream).
func (t *transcript) addScanned(e *grammar.Event) {
	if t == nil || t.off || e.Kind != grammar.Content || len(e.Data) == 0 || e.Data[0] != '{' {
		return
	}
	data := e.Data
	if t.api == apierror.Anthropic {
		t.addAnthropic(data, e)
		return
	}
	if t.id == nil && e.ID.OK() {
		t.id = json.RawMessage(bytes.Clone(memberOf(data, e.ID)))
		if e.Created.OK() {
			t.created = json.RawMessage(bytes.Clone(memberOf(data, e.Created)))
		}
	}
	if !e.Choices.OK() || data[e.Choices.Value.Start] != '[' {
		return
	}
	for i := e.Choices.Value.Start + 1; ; {
		i = jsonmember.SkipSpace(data, i)
		if i >= len(data) || data[i] == ']' {
			break
		}
		end, err := jsonmember.SkipValue(data, i, 3)
		if err != nil {
			return
		}
		if data[i] == '{' && !t.addChoice(data, i) {
			t.stop()
			return
		}
		if i = jsonmember.SkipSpace(data, end); i < len(data) && data[i] == ',' {
			i++
		}
	}
	if len(t.text) > maxTranscript {
		t.stop()
	}
}

// addChoice records the choice at data[obj]; false when the stream cannot
// be continued: a second choice, or tool calls.
func (t *transcript) addChoice(data []byte, obj int) bool {
	if m, ok := jsonmember.LastMember(data, obj, "index"); ok && string(memberOf(data, m)) != "0" {
		return false
	}
	d, ok := jsonmember.LastMember(data, obj, "delta")
	if !ok || data[d.Value.Start] != '{' {
		return true
	}
	for _, name := range [...]string{"tool_calls", "function_call"} {
		if m, ok := jsonmember.LastMember(data, d.Value.Start, name); ok && string(memberOf(data, m)) != "null" {
			return false
		}
	}
	if m, ok := jsonmember.LastMember(data, d.Value.Start, "content"); ok {
		t.text, _ = jsonmember.AppendStringValue(t.text, data, m)
	}
	return true
}

// memberOf is a member's raw value in data.
func memberOf(data []byte, m jsonmember.Member) []byte { return data[m.Value.Start:m.Value.End] }

// preamble reports whether an event of a continuation is one the client
// already has: OpenAI's role chunk, Anthropic's message_start,
// content_block_start and ping.
func (t *transcript) preamble(ev []byte) bool {
	g := grammar.Grammar{Anthropic: t.api == apierror.Anthropic}
	return g.Scan(ev, true).Kind == grammar.Preamble
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
		e := grammar.Grammar{}.Scan(events[:n], false)
		out = r.appendTo(out, events[:n], &e)
		events = events[n:]
	}
	return out
}

// apply is one event rewritten, in a new slice when it changed.
func (r *rewriteIDs) apply(ev []byte) []byte {
	if r == nil {
		return ev
	}
	e := grammar.Grammar{}.Scan(ev, false)
	return r.appendTo(nil, ev, &e)
}

// appendTo appends ev to dst with its id, created and model replaced and
// the carry added to its usage, from where e (ev's scan) found them; the
// event's other lines (event:, id:) stay as they are. It allocates nothing
// but dst's growth: this runs for every event of a rewritten stream.
func (r *rewriteIDs) appendTo(dst, ev []byte, e *grammar.Event) []byte {
	var buf [len(usageCounts) + 3]jsonmember.Edit
	edits := buf[:0]
	data := e.Data
	if e.Kind != grammar.Content || len(data) == 0 || data[0] != '{' {
		return append(dst, ev...)
	}
	if e.ID.OK() && len(r.id) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.ID.Value.Start, End: e.ID.Value.End, Repl: r.id})
	}
	if e.Created.OK() && len(r.created) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.Created.Value.Start, End: e.Created.Value.End, Repl: r.created})
	}
	if e.Model.OK() && len(r.model) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.Model.Value.Start, End: e.Model.Value.End, Repl: r.model})
	}
	if u := e.UsageAt; u.OK() && r.carry > 0 && data[u.Value.Start] == '{' {
		var nums [len(usageCounts)][20]byte // once a stream: its usage event
		for i, name := range usageCounts {
			m, ok := jsonmember.LastMember(data, u.Value.Start, name)
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(string(data[m.Value.Start:m.Value.End])); err == nil {
				edits = append(edits, jsonmember.Edit{Start: m.Value.Start, End: m.Value.End, Repl: strconv.AppendInt(nums[i][:0], int64(n+r.carry), 10)})
			}
		}
	}
	if len(edits) == 0 {
		return append(dst, ev...)
	}
	if off := offsetIn(ev, data); off >= 0 {
		dst = append(dst, ev[:off]...)
		dst = jsonmember.AppendEdits(dst, data, edits...)
		return append(dst, ev[off+len(data):]...)
	}
	// data joined from several lines: one line of the edited payload
	dst = append(dst, "data: "...)
	dst = jsonmember.AppendEdits(dst, data, edits...)
	return append(dst, "\n\n"...)
}

// usageCounts are the usage members a resumed stream's carry is added to.
var usageCounts = [...]string{"completion_tokens", "output_tokens", "total_tokens"}

// offsetIn is where sub starts in b when it is a part of b (not a copy),
// else -1.
func offsetIn(b, sub []byte) int {
	off := cap(b) - cap(sub)
	if len(sub) == 0 || off < 0 || off+len(sub) > len(b) || &b[off] != &sub[0] {
		return -1
	}
	return off
}
