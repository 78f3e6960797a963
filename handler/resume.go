package handler

import (
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
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

// resumeTries counts the resumes of one stream: each resumer is asked once.
type resumeTries int

// resume tries to continue a's cut stream (first committed by origin): on
// each resumer in turn, each
// once per stream. It returns the attempt whose stream continues the answer
// (its held events already sent, after one seam comment), or nil when none
// can, and then the original failure is the client's to hear.
func (g *Gateway) resume(rp *reply, origin candidate, a *attempt, cause error, tried *resumeTries) *attempt {
	t := a.stream.tr
	if t == nil || !t.resumable || t.off || len(t.text) == 0 {
		return nil
	}
	rs := resumers(origin)
	for int(*tried) < len(rs) {
		c := rs[*tried]
		*tried++
		if !g.mayReach(a.req.key, c) {
			continue // a fallback the caller's key may not use (reach.go)
		}
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
	body := jsonmember.WithMaxTokensLeft(prefillBody(req, string(t.text)), carry)
	fields, err := jsonmember.ScanRequest(body)
	if err != nil {
		return nil
	}
	req2 := *req
	req2.body, req2.fields = body, fields
	req2.translations = &translations{} // another body: its own translations
	b := g.newAttempt(&req2, c, req.r.Context(), g.clock.Now())
	b.resume = true
	g.try(rp, b)
	v := judged(rp.res, b)
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
	st.rewrite = &grammar.Rewrite{ID: t.id, Created: t.created}
	if a.stream.rewrite != nil {
		st.rewrite = &grammar.Rewrite{ID: a.stream.rewrite.ID, Created: a.stream.rewrite.Created, Model: a.stream.rewrite.Model}
	}
	st.rewrite.Carry = carry
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
		e := st.gram.Scan(ev, false)
		st.see(&e)
		ev = st.rewrite.AppendTo(nil, ev, &e)
		t.add(ev)
		if err := rp.write(ev); err != nil {
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
	if rp.res.HasUsage && rp.res.Usage.Output > a.stream.carry {
		return rp.res.Usage.Output - a.stream.carry
	}
	return max(0, (len(t.text)-a.stream.textAtStart)/4)
}
