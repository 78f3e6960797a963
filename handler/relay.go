package handler

import (
	"context"
	"errors"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/idle"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// The relay: the commit point, the relay of an answer to the client, and
// the honest cut. Once commit has sent the first content, the request is
// the answering engine's: a failure after it is never passed off as a
// clean answer, and it never switches engines (resume.go continues the same
// answer, with a seam comment, or not at all).

// commit gives the attempt's answer to the client. This is the commit
// point: the first content leaves the gateway here, and from now on the
// request is this engine's, whatever happens.
func (g *Gateway) commit(rp *reply, a *attempt) {
	defer a.close()
	resp := a.resp
	name := a.c.rt.cfg.Name
	st := a.stream
	if rp.preamble {
		// the status and headers went out with the preamble, before the
		// engine was known: it is named in the stream, and in trailers
		// (X-LLM-Engine, X-LLM-Fallback) a client reads after the body
		if a.c.isFallback() || a.req.overBudget {
			rp.comment("fallback " + name)
			rp.w.Header().Set(http.TrailerPrefix+"X-LLM-Fallback", name)
		} else {
			rp.comment("engine " + name)
		}
		rp.w.Header().Set(http.TrailerPrefix+"X-LLM-Engine", name)
	} else {
		h := rp.w.Header()
		upstream.CopyHeader(h, resp.Header)
		if a.req.rateHeaders != nil {
			// the caller's key's limits, not the engine's (whose key is
			// another account)
			for k := range h {
				if strings.HasPrefix(k, "X-Ratelimit-") {
					delete(h, k)
				}
			}
			for k, v := range a.req.rateHeaders {
				h[k] = v
			}
		}
		if g.annotate && st == nil && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			h.Del("Content-Length") // the annotated body is longer
		}
		h.Set("X-LLM-Engine", name)
		if a.c.isFallback() || a.req.overBudget {
			h.Set("X-LLM-Fallback", name)
		}
		g.declareCostTrailer(h) // spend.go
		if st != nil {
			// an event stream is delivered event by event: no length,
			// and no buffering in proxies in front of us
			h.Del("Content-Length")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
		}
		rp.firstByte(resp.StatusCode)
		rp.w.WriteHeader(resp.StatusCode)
	}
	if st == nil {
		// a body that is not a stream gets the same budget between reads:
		// headers followed by silence must not hold the request forever
		g.startIdle(a)
		a.idle.Touch()
		resp.Body = &idle.TouchReader{ReadCloser: resp.Body, W: a.idle}
		if !rp.preamble && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			g.writeJSONAnswer(rp, a)
			return
		}
		if err := rp.copyBody(resp.Body, rp.preamble, a.idle); err != nil {
			g.cutBody(rp, a, err)
		}
		return
	}
	if st.rewrite == nil && rp.ids != nil {
		// the gateway's loading chunks went first: the stream is theirs
		st.rewrite = &grammar.Rewrite{ID: rp.ids.ID, Created: rp.ids.Created, Model: rp.ids.Model}
	}
	// the held events were read (awaitFirstContent) and are written as read
	st.held = st.rewrite.ApplyAll(st.held)
	if st.used {
		rp.res.Usage, rp.res.HasUsage = rp.res.Usage.Update(st.usage), true
	}
	if err := rp.write(st.held); err != nil {
		g.cut(rp, a, errClientGone)
	}
	rp.seq = st.seq // the held events went out: an error takes the next number
	if st.tr = g.newTranscript(a); st.tr != nil {
		st.tr.addAll(st.held)
	}
	st.held = nil
	g.relay(rp, a)
}

// maxWholeAnswer bounds the JSON answer read whole to find its usage (and
// annotate it); a larger one is passed on as it is.
const maxWholeAnswer = 1 << 20

// writeJSONAnswer sends a non-streaming JSON answer, reading it whole (when
// it is not huge) to count its tokens and, with annotate_response, to add
// "extra_fields".
func (g *Gateway) writeJSONAnswer(rp *reply, a *attempt) {
	body, err := io.ReadAll(io.LimitReader(a.resp.Body, maxWholeAnswer+1))
	if err != nil {
		g.cutBody(rp, a, err)
	}
	whole := len(body) <= maxWholeAnswer
	if whole {
		if u, ok := grammar.AnswerUsage(rp.api, body); ok {
			rp.res.Usage, rp.res.HasUsage = u, true
		}
		if g.traceContent {
			g.noteAnswer(rp.res, grammar.AnswerText(body))
		}
		if g.annotate {
			cost := g.priceOf(a.c.rt, a.sent).Cost(rp.res.Usage) // this answer's (spend.go)
			body = jsonmember.Annotate(body, a.c.rt.cfg.Name, a.sent, rp.since().Milliseconds(), a.index, cost.Append(nil))
		}
	}
	a.idle.Block()
	if err := rp.write(body); err != nil {
		g.cut(rp, a, errClientGone)
	}
	a.idle.Unblock()
	if !whole {
		if err := rp.copyBody(a.resp.Body, false, a.idle); err != nil {
			g.cutBody(rp, a, err)
		}
	}
}

// relay passes an event stream on until it ends. A stream that breaks
// is continued by resume when it can be (a new attempt whose stream the
// loop relays in turn, after a seam comment), and cut honestly when not.
func (g *Gateway) relay(rp *reply, a *attempt) {
	defer func() {
		if g.traceContent && a.stream != nil && a.stream.tr != nil {
			g.noteAnswer(rp.res, a.stream.tr.text)
		}
		a.close() // the last resumed attempt (closing twice is safe)
	}()
	var tried resumeTries
	origin := a.c
	away := watchGoingAway(a.req.r) // goingaway.go
	defer away.done()
	for {
		away.follow(a)
		err := g.relayEvents(rp, a)
		if err == nil || g.wentAway(rp, a) {
			return
		}
		a.broke(err)
		if a.outcome == outcomeCanceled {
			g.cut(rp, a, err)
		}
		a.c.cutFailure(a.sent, a.outcome == outcomeTimeout)
		b := g.resume(rp, origin, a, err, &tried)
		if b == nil {
			g.cut(rp, a, err)
		}
		a.close()
		a = b
	}
}

// relayEvents passes the rest of an event stream on, event by event: a
// data line that is not JSON is dropped, and the stream's end is reported:
// nil for a clean one, the error for a stream that did not end whole.
//
// Each event is read in one pass (grammar.ScanMemo: its kind, usage and
// the sign that the answer is whole). Events are not copied: the batch one
// read brought lies in the reader's buffer and is written with one Write
// and one Flush just before the next read would block, as reverse_proxy
// writes its copy buffer (a rewritten stream's, from one pooled buffer).
func (g *Gateway) relayEvents(rp *reply, a *attempt) error {
	st := a.stream
	var batch []byte // events read and not yet written: a span of the reader's buffer, or st.out
	send := func(flush bool) {
		if len(batch) == 0 && !flush {
			return
		}
		// a slow client is no silent upstream: the idle budget stands
		// still while the client is written to
		a.idle.Block()
		if len(batch) > 0 {
			if err := rp.write(batch); err != nil {
				g.cut(rp, a, errClientGone)
			}
			batch = nil
			if st.out != nil {
				*st.out = (*st.out)[:0]
			}
		}
		if flush {
			if err := rp.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				g.cut(rp, a, errClientGone)
			}
		}
		a.idle.Unblock()
	}
	var memo *grammar.Memo // each event is scanned as what it changes of the last (grammar.Memo)
	defer func() { memo.Release() }()
	for {
		read := !st.events.Buffered() // Next reads the body, and may wait for it
		if read {
			send(true) // the next read may block: everything read so far goes out now
		}
		ev, err := st.events.Next()
		if read {
			a.idle.Block() // till the Unblock after the write: a clock read per read
		}
		if err == io.EOF {
			send(true)
			if !st.ended() {
				// the connection ended cleanly, but the answer did not
				// say it was whole: an engine that died on a body
				// delimited by its connection
				return errEndedUnfinished
			}
			return nil // a whole answer: finish at once, [DONE] or not
		}
		if err != nil {
			send(false)
			return err
		}
		if memo == nil {
			memo = grammar.GetMemo()
		}
		e := st.gram.ScanMemo(ev, memo)
		if e.Kind == grammar.Malformed {
			send(false)
			g.droppedEvent(a)
			continue
		}
		usage := e.Usage
		usage.Output += st.carry // a resumed answer's usage is the whole answer's
		if e.HasUsage && a.req.hideUsage && e.NoChoices {
			// the usage chunk the gateway asked for, not the client
			rp.res.Usage, rp.res.HasUsage = usage, true
			send(false)
			continue
		}
		st.see(&e)
		rp.seq = st.seq
		if st.rewrite != nil {
			batch, _ = st.appendRewritten(batch, ev, &e)
		} else {
			batch = extend(batch, ev)
		}
		// the text as the engine sent it (a rewrite changes ids, not text;
		// a transcript of a rewritten stream takes its ids from the rewrite)
		if st.tr != nil {
			st.tr.addScanned(&e)
		}
		if e.HasUsage {
			rp.res.Usage, rp.res.HasUsage = rp.res.Usage.Update(usage), true
		}
		if e.Kind == grammar.Done {
			st.whole = true
			send(true)
			g.drainAfterDone(a)
			return nil
		}
	}
}

// appendRewritten adds ev, rewritten, to the stream's pooled out buffer,
// which batch is, or becomes (a batch read before is copied in first), and
// returns the batch and the rewritten event.
func (st *stream) appendRewritten(batch, ev []byte, e *grammar.Event) ([]byte, []byte) {
	if st.out == nil {
		st.out = outPool.Get().(*[]byte)
	}
	out := *st.out
	if len(batch) > 0 && (len(out) == 0 || &batch[0] != &out[0]) {
		out = append(out[:0], batch...)
	}
	start := len(out)
	out = st.rewrite.AppendTo(out, ev, e)
	*st.out = out
	return out, out[start:]
}

// extend appends ev to batch without copying when ev follows batch in the
// same buffer, which is how consecutive events come out of an sse.Reader.
func extend(batch, ev []byte) []byte {
	n := len(batch)
	if n == 0 {
		return ev
	}
	if cap(batch) >= n+len(ev) && len(ev) > 0 && &batch[:n+1][n] == &ev[0] {
		return batch[:n+len(ev)]
	}
	return append(batch[:n:n], ev...) // not adjacent: copy (never happens with one reader)
}

// droppedEvent counts a data event that was not JSON.
func (g *Gateway) droppedEvent(a *attempt) {
	g.dropped.Add(1)
	if g.Hooks.Dropped != nil {
		g.Hooks.Dropped(a.c.rt.cfg.Name)
	}
	g.log.Warn("dropped a malformed event", zap.String("engine", a.c.rt.cfg.Name))
}

// drainAfterDone reads what follows [DONE] (normally just the end of the
// chunked body) for a moment, so that the upstream connection is reused
// instead of closed; an upstream that lingers is cut off after 100 ms.
func (g *Gateway) drainAfterDone(a *attempt) {
	t := g.clock.AfterFunc(100*time.Millisecond, func() { a.cancel(context.Canceled) })
	defer t.Stop()
	for _, err := a.stream.events.Next(); err == nil; _, err = a.stream.events.Next() {
	}
}

// cutBody classifies a body read that failed, counts it against its
// breaker, then cuts.
func (g *Gateway) cutBody(rp *reply, a *attempt, err error) {
	if !errors.Is(err, errClientGone) {
		a.broke(err)
		if a.outcome != outcomeCanceled {
			a.c.cutFailure(a.sent, a.outcome == outcomeTimeout)
		}
	}
	g.cut(rp, a, err)
}

// errClientGone marks a copy that ended because the client stopped reading.
var errClientGone = errors.New("client went away")

// cut ends a response whose upstream failed after commit. The client must
// see an error, never a tidy end that looks complete: a stream gets one
// in-band error event first, and the connection is aborted either way.
//
// The breaker has heard of the cut already (relay, cutBody): cut only tells
// the client.
func (g *Gateway) cut(rp *reply, a *attempt, err error) {
	if errors.Is(err, errClientGone) || a.req.r.Context().Err() != nil {
		// the client left ("stop generating"): the engine did nothing wrong
		rp.res.cutShort("client", rp.sent)
		a.close()
		rp.abort()
	}
	rp.res.cutShort(a.cutReason(), rp.sent)
	g.log.Warn("upstream failed mid-response", zap.String("engine", a.c.rt.cfg.Name), zap.Error(err))
	if a.stream != nil || rp.preamble {
		reason := rootCause(err)
		if a.outcome == outcomeTimeout {
			reason = "no event within its " + a.timeout.Error() + " of " + a.timeoutLength().String()
		}
		rp.errorEvent(&apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_stream_cut", Message: "engine " + a.c.rt.cfg.Name + " cut the stream: " + reason})
	}
	a.close()
	rp.abort()
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies a body that is not an event stream; flushEach flushes
// every read (a stream whose preamble went out). A read error is the
// upstream's, a write error becomes errClientGone.
// The idle budget stands still while the client is written to.
func (rp *reply) copyBody(body io.Reader, flushEach bool, idle *idle.Watchdog) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			idle.Block()
			if werr := rp.write(buf[:n]); werr != nil {
				return errClientGone
			}
			if flushEach {
				_ = rp.rc.Flush()
			}
			idle.Unblock()
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

// newTranscript starts a transcript for a stream that may be resumed, or
// whose text its trace keeps (trace_content).
func (g *Gateway) newTranscript(a *attempt) *transcript {
	req := a.req
	if !req.op.transcribed() || !req.fields.Messages.OK() {
		return nil
	}
	resumable := a.c.role == rolePrimary && a.c.rt.cfg.Resumes() && len(resumers(a.c)) > 0
	if !resumable && !g.traceContent {
		return nil
	}
	return &transcript{gram: req.op.grammar(), resumable: resumable}
}
