package handler

import (
	"bytes"
	"encoding/json"
	"strings"

	"go.uber.org/zap"
)

// Resuming a cut stream: when an engine with `resume on` dies or stalls
// after its stream committed, the gateway sends its fallback (which must
// have `prefill on`: it continues an assistant message placed last) the
// original request plus the text streamed so far as that last message, and
// relays the continuation in the same stream, with the same id and created
// as the chunks already sent. Only plain text of a chat completion is
// continued: tool calls, several choices and other routes end with the
// honest in-band error, as without resume.

// maxTranscript bounds the text kept per stream; beyond it a stream is no
// longer resumable (and the memory is given back).
const maxTranscript = 256 << 10

// transcript is what a resumable stream has sent so far.
type transcript struct {
	text    []byte
	id      json.RawMessage // of the chunks already sent
	created json.RawMessage
	off     bool // tool calls, several choices, too long: not resumable
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

// newTranscript starts a transcript for a stream that may be resumed.
func (g *Gateway) newTranscript(req *request, a *attempt) *transcript {
	fb := a.c.rt.fallback
	if a.c.role != rolePrimary || !a.c.rt.cfg.Resume || fb == nil || !fb.cfg.Prefill ||
		!strings.HasSuffix(req.r.URL.Path, "/chat/completions") || !req.fields.messages.ok() {
		return nil
	}
	return &transcript{}
}

// add records one event that went to the client.
func (t *transcript) add(ev []byte) {
	if t == nil || t.off {
		return
	}
	data, ok := dataOf(ev)
	if !ok {
		return
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 || data[0] != '{' {
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
		if isSet(ch.Delta.ToolCalls) || isSet(ch.Delta.FunctionCall) {
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

func (t *transcript) stop() {
	t.off, t.text = true, nil
}

// addAll records every event in a run of events.
func (t *transcript) addAll(events []byte) {
	for len(events) > 0 && t != nil && !t.off {
		n := eventEnd(events)
		if n < 0 {
			n = len(events)
		}
		t.add(events[:n])
		events = events[n:]
	}
}

// resume tries to continue a's cut stream on its fallback. It reports
// whether it did (and then the stream has been completed or ended
// honestly); false leaves the original failure to be reported.
func (g *Gateway) resume(rp *reply, a *attempt, cause error) bool {
	t := a.tr
	if t == nil || t.off || len(t.text) == 0 {
		return false
	}
	req := a.req
	fb := a.c.rt.fallback
	body := prefillBody(req, string(t.text), a.c.rt.cfg.FallbackModel)
	fields, err := scanBody(body)
	if err != nil {
		return false
	}
	req2 := *req
	req2.body, req2.fields = body, fields
	c := candidate{rt: fb, model: "", role: roleFallback}
	b := g.try(rp, &req2, c, nil)
	if b.outcome != outcomeGood || b.events == nil {
		g.log.Warn("resuming a cut stream failed", zap.String("engine", a.c.rt.cfg.Name),
			zap.String("fallback", fb.cfg.Name), zap.String("attempt", b.label()), zap.Error(b.err))
		b.close()
		g.countResume(a, "failed")
		return false
	}
	defer b.close()
	a.c.breaker().Failure() // the cut still counts against the engine
	g.log.Info("resuming a cut stream on the fallback", zap.String("engine", a.c.rt.cfg.Name),
		zap.String("fallback", fb.cfg.Name), zap.Int("text_bytes", len(t.text)), zap.String("cause", rootCause(cause)))
	a.close()
	rp.comment("resumed on " + fb.cfg.Name)
	b.rewrite = &rewriteIDs{id: t.id, created: t.created}
	held := b.held
	b.held = nil
	for len(held) > 0 {
		n := eventEnd(held)
		if n < 0 {
			n = len(held)
		}
		ev := held[:n]
		held = held[n:]
		if classifyEvent(ev, true) == eventPreamble {
			continue // the client has its role chunk already
		}
		if _, err := rp.w.Write(b.rewrite.apply(ev)); err != nil {
			g.cut(rp, b, errClientGone)
		}
	}
	g.countResume(a, "ok")
	g.relay(rp, b)
	return true
}

func (g *Gateway) countResume(a *attempt, outcome string) {
	if g.Hooks.Resume != nil {
		g.Hooks.Resume(a.c.rt.cfg.Name, a.c.rt.fallback.cfg.Name, outcome)
	}
}

// prefillBody is the request with the text so far as a last assistant
// message, and the fallback's model name when it has one.
func prefillBody(req *request, text, model string) []byte {
	msgs := req.fields.messages.value
	closing := msgs.end - 1 // the array's ']'
	i := closing - 1
	for i > msgs.start && (req.body[i] == ' ' || req.body[i] == '\n' || req.body[i] == '\r' || req.body[i] == '\t') {
		i--
	}
	var ins []byte
	if req.body[i] != '[' {
		ins = append(ins, ',')
	}
	ins = append(ins, `{"role":"assistant","content":`...)
	ins = appendJSONString(ins, text)
	ins = append(ins, '}')
	edits := []edit{{closing, closing, ins}}
	if model != "" && model != req.model {
		edits = append(edits, replaceValue(req.fields.model, model))
	}
	return applyEdits(req.body, edits...)
}

// rewriteIDs gives a resumed stream's chunks the id and created of the
// chunks the client already has, so the answer reads as one stream.
type rewriteIDs struct {
	id, created json.RawMessage
}

func (r *rewriteIDs) apply(ev []byte) []byte {
	if r == nil {
		return ev
	}
	data, ok := dataOf(ev)
	if !ok {
		return ev
	}
	data = bytes.TrimSpace(data)
	f, err := scanBody(data)
	if err != nil {
		return ev
	}
	var edits []edit
	if f.id.ok() && len(r.id) > 0 {
		edits = append(edits, edit{f.id.value.start, f.id.value.end, r.id})
	}
	if f.created.ok() && len(r.created) > 0 {
		edits = append(edits, edit{f.created.value.start, f.created.value.end, r.created})
	}
	if len(edits) == 0 {
		return ev
	}
	out := append([]byte("data: "), applyEdits(data, edits...)...)
	return append(out, "\n\n"...)
}
