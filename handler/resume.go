package handler

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"

	"bytes"
	"encoding/json"
	"strings"

	"go.uber.org/zap"
)

// Resuming a cut stream: when an engine with `resume on` dies or stalls
// after its stream committed, the gateway sends the original request plus
// the text streamed so far as a last assistant message to an engine with
// `prefill on` (one that continues an assistant message placed last): first
// the engine itself, then its fallback. The continuation is relayed in the
// same stream, after one seam comment, with the same id and created as the
// chunks already sent. Only plain text of a chat completion is continued:
// tool calls, several choices and other routes end with the honest in-band
// error, as without resume; an engine that cannot continue is never asked
// to start the answer over.
//
// Anthropic's Messages API streams resume the same way: the API takes a
// final assistant message as the start of the answer. The transcript keeps
// the text deltas of one text block (index 0; a tool_use or thinking block,
// or a second block, makes the stream not resumable), and the
// continuation's message_start, content_block_start and ping are dropped:
// the client has them, and its deltas continue block 0.

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
func (g *Gateway) newTranscript(a *attempt) *transcript {
	req := a.req
	chat := strings.HasSuffix(req.r.URL.Path, "/chat/completions") || req.r.URL.Path == "/v1/messages"
	if a.c.role != rolePrimary || !a.c.rt.cfg.Resumes() || len(resumers(a.c)) == 0 ||
		!chat || !req.fields.Messages.OK() {
		return nil
	}
	return &transcript{api: req.api}
}

// resumers are the candidates that may continue c's cut stream, in order:
// the engine itself, then its fallback, each only with `prefill on`.
func resumers(c candidate) []candidate {
	var out []candidate
	if c.rt.cfg.Prefills() {
		out = append(out, candidate{rt: c.rt, model: c.model, role: rolePrimary, acquire: true})
	}
	if fb := c.rt.fallback; fb != nil && fb.cfg.Prefills() {
		out = append(out, candidate{rt: fb, model: c.rt.cfg.FallbackModel, role: roleFallback})
	}
	return out
}

// resumeTries counts the resumes of one stream: each resumer is asked once.
type resumeTries int

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

// resume tries to continue a's cut stream (first committed by origin): on
// each resumer in turn, each
// once per stream. It returns the attempt whose stream continues the answer
// (its held events already sent, after one seam comment), or nil when none
// can, and then the original failure is the client's to hear.
func (g *Gateway) resume(rp *reply, origin candidate, a *attempt, cause error, tried *resumeTries) *attempt {
	t := a.stream.tr
	if t == nil || t.off || len(t.text) == 0 {
		return nil
	}
	rs := resumers(origin)
	for int(*tried) < len(rs) {
		c := rs[*tried]
		*tried++
		if rp.spend != nil && !rp.spend() {
			return nil // a resume is an upstream call: max_attempts bounds it too
		}
		rp.res.Attempts++
		if b := g.continueOn(rp, a, c, cause); b != nil {
			return b
		}
	}
	return nil
}

// continueOn asks c to continue a's stream from its transcript.
func (g *Gateway) continueOn(rp *reply, a *attempt, c candidate, cause error) *attempt {
	t := a.stream.tr
	req := a.req
	carry := a.stream.carry + spentSoFar(rp, a, t)
	body := withMaxTokensLeft(prefillBody(req, string(t.text)), carry)
	fields, err := jsonmember.ScanRequest(body)
	if err != nil {
		return nil
	}
	req2 := *req
	req2.body, req2.fields = body, fields
	b := g.try(rp, &req2, c)
	v := judge(b.judgement(g.clock.Now()), c.policy())
	b.ticket.settle(v)
	rp.res.tell(b, v, g.clock.Now(), true)
	if b.outcome != outcomeGood || b.stream == nil {
		g.log.Warn("resuming a cut stream failed", zap.String("engine", a.c.rt.cfg.Name),
			zap.String("on", c.rt.cfg.Name), zap.String("attempt", b.label(v)), zap.Error(b.err))
		b.close()
		g.countResume(a, c, "failed")
		return nil
	}
	g.log.Info("resuming a cut stream", zap.String("engine", a.c.rt.cfg.Name),
		zap.String("on", c.rt.cfg.Name), zap.Int("text_bytes", len(t.text)), zap.String("cause", rootCause(cause)))
	rp.comment("resumed on " + c.rt.cfg.Name)
	st := b.stream
	st.tr = t
	st.carry, st.textAtStart = carry, len(t.text)
	st.rewrite = &rewriteIDs{id: t.id, created: t.created}
	if a.stream.rewrite != nil {
		st.rewrite = &rewriteIDs{id: a.stream.rewrite.id, created: a.stream.rewrite.created, model: a.stream.rewrite.model}
	}
	st.rewrite.carry = carry
	held := st.held
	st.held = nil
	for len(held) > 0 {
		n := sse.EventEnd(held)
		if n < 0 {
			n = len(held)
		}
		ev := held[:n]
		held = held[n:]
		if t.preamble(ev) {
			continue // the client has its role chunk (or message_start) already
		}
		ev = st.rewrite.apply(ev)
		st.note(ev)
		t.add(ev)
		if _, err := rp.w.Write(ev); err != nil {
			g.cut(rp, b, errClientGone)
		}
	}
	g.countResume(a, c, "ok")
	return b
}

func (g *Gateway) countResume(a *attempt, on candidate, outcome string) {
	if g.Hooks.Resume != nil {
		g.Hooks.Resume(a.c.rt.cfg.Name, on.rt.cfg.Name, outcome)
	}
}

// prefillBody is the request with the text so far as a last assistant
// message (the model is set by the attempt, as for any candidate).
func prefillBody(req *request, text string) []byte {
	msgs := req.fields.Messages.Value
	closing := msgs.End - 1 // the array's ']'
	i := closing - 1
	for i > msgs.Start && (req.body[i] == ' ' || req.body[i] == '\n' || req.body[i] == '\r' || req.body[i] == '\t') {
		i--
	}
	var ins []byte
	if req.body[i] != '[' {
		ins = append(ins, ',')
	}
	ins = append(ins, `{"role":"assistant","content":`...)
	ins = jsonmember.AppendString(ins, text)
	ins = append(ins, '}')
	return jsonmember.ApplyEdits(req.body, jsonmember.Edit{Start: closing, End: closing, Repl: ins})
}

// spentSoFar is the completion tokens a's stream had sent before it was cut,
// beyond those carried into it: what its usage said, else its text at about
// four bytes a token.
func spentSoFar(rp *reply, a *attempt, t *transcript) int {
	if rp.res.HasUsage && rp.res.Usage.Completion > a.stream.carry {
		return rp.res.Usage.Completion - a.stream.carry
	}
	return max(0, (len(t.text)-a.stream.textAtStart)/4)
}

// withMaxTokensLeft asks a continuation only for what is left of the
// request's maximum answer, once spent tokens were sent.
func withMaxTokensLeft(body []byte, spent int) []byte {
	if spent <= 0 {
		return body
	}
	var edits []jsonmember.Edit
	for _, name := range [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		m, ok := jsonmember.LastMember(body, jsonmember.SkipSpace(body, 0), name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(string(body[m.Value.Start:m.Value.End]))
		if err != nil {
			continue
		}
		left := strconv.AppendInt(nil, int64(max(1, n-spent)), 10)
		edits = append(edits, jsonmember.Edit{Start: m.Value.Start, End: m.Value.End, Repl: left})
	}
	return jsonmember.ApplyEdits(body, edits...)
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
