package grammar

import (
	"encoding/json"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// Rewrite gives a resumed stream's chunks (and an engine's chunks after
// the gateway's loading status chunks) the id and created of the chunks the
// client already has, so the answer reads as one stream, and its
// usage the tokens sent before the seam (Carry), so that the answer reports
// (and the key is charged) the whole answer, not the continuation's part.
type Rewrite struct {
	ID, Created json.RawMessage
	// Model, when set, is the model the stream's first chunks named: the
	// gateway's own loading status chunks (handler/reply.go) name the model the
	// client asked for, before any engine has answered
	Model json.RawMessage
	Carry int
}

// ApplyAll rewrites each event of events (held before commit).
func (r *Rewrite) ApplyAll(events []byte) []byte {
	if r == nil || len(events) == 0 {
		return events
	}
	out := make([]byte, 0, len(events)+64)
	for len(events) > 0 {
		n := sse.EventEnd(events)
		if n < 0 {
			n = len(events)
		}
		e := Grammar{}.Scan(events[:n], false)
		out = r.AppendTo(out, events[:n], &e)
		events = events[n:]
	}
	return out
}

// Apply is one event rewritten, in a new slice when it changed.
func (r *Rewrite) Apply(ev []byte) []byte {
	if r == nil {
		return ev
	}
	e := Grammar{}.Scan(ev, false)
	return r.AppendTo(nil, ev, &e)
}

// AppendTo appends ev to dst with its id, created and model replaced and
// the carry added to its usage, from where e (ev's scan) found them; the
// event's other lines (event:, id:) stay as they are. It allocates nothing
// but dst's growth: this runs for every event of a rewritten stream.
func (r *Rewrite) AppendTo(dst, ev []byte, e *Event) []byte {
	var buf [len(usageCounts) + 3]jsonmember.Edit
	edits := buf[:0]
	data := e.Data
	if e.Kind != Content || len(data) == 0 || data[0] != '{' {
		return append(dst, ev...)
	}
	if e.ID.OK() && len(r.ID) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.ID.Value.Start, End: e.ID.Value.End, Repl: r.ID})
	}
	if e.Created.OK() && len(r.Created) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.Created.Value.Start, End: e.Created.Value.End, Repl: r.Created})
	}
	if e.Model.OK() && len(r.Model) > 0 {
		edits = append(edits, jsonmember.Edit{Start: e.Model.Value.Start, End: e.Model.Value.End, Repl: r.Model})
	}
	if u := e.UsageAt; u.OK() && r.Carry > 0 && data[u.Value.Start] == '{' {
		var nums [len(usageCounts)][20]byte // once a stream: its usage event
		for i, name := range usageCounts {
			m, ok := jsonmember.LastMember(data, u.Value.Start, name)
			if !ok {
				continue
			}
			if n, err := strconv.Atoi(string(data[m.Value.Start:m.Value.End])); err == nil {
				edits = append(edits, jsonmember.Edit{Start: m.Value.Start, End: m.Value.End, Repl: strconv.AppendInt(nums[i][:0], int64(n+r.Carry), 10)})
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
