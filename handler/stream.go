package handler

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// run walks the plan. Each candidate is tried, and retried on transient
// failures, until one gives an answer worth committing; a failure that
// says "try elsewhere" moves on to the next candidate. Nothing but SSE
// comments reaches the client before commit; after it, nothing switches.
func (g *Gateway) run(w http.ResponseWriter, req *request, plan []candidate, res *Result) {
	rp := &reply{w: w, rc: http.NewResponseController(w), stream: req.stream, keepAlive: g.keepAlive, start: time.Now(), res: res}
	var failed []*attempt
	rewaited := false // back to the engine once after its fallback failed a slow start
	for i := 0; i < len(plan); i++ {
		c := plan[i]
		if c.role == rolePool && req.budget != nil && (res.Attempts >= req.budget.attempts || time.Now().After(req.budget.deadline)) {
			continue // the pool's failover budget is spent; body fallbacks may follow
		}
		var fallback *route
		if i+1 < len(plan) && plan[i+1].role == roleFallback {
			fallback = plan[i+1].rt
		}
		for retry := 0; ; retry++ {
			a := g.try(rp, req, c, fallback)
			if a.resp != nil || a.outcome == outcomeClosed || a.outcome == outcomeConnect || a.outcome == outcomeDNS || a.outcome == outcomeTimeout {
				res.Attempts++
			}
			if a.outcome == outcomeGood {
				res.Engine, res.ModelSent = c.rt.cfg.Name, a.sent
				if c.isFallback() {
					res.Fallback = c.rt.cfg.Name
					g.countFallback(plan[0], c, failed)
				}
				a.index = i
				g.commit(rp, a)
				return
			}
			if ce := g.log.Check(zapcore.DebugLevel, "attempt failed"); ce != nil {
				ce.Write(zap.String("attempt", a.label()), zap.Error(a.err))
			}
			// let go of the lease now: a later candidate may be a group peer
			// whose start drains this engine (the error body is kept)
			a.close()
			failed = append(failed, a)
			if a.outcome == outcomeCanceled {
				return // nobody is listening
			}
			if c.role == rolePool || retry >= *c.rt.cfg.Retries || !a.retryable() {
				break
			}
			wait := max(backoff(retry), a.retryAfter())
			if !rp.pause(req.r.Context(), wait) {
				return
			}
			if g.Hooks.Retry != nil {
				g.Hooks.Retry(c.rt.cfg.Name)
			}
		}
		last := failed[len(failed)-1]
		if last.contextTooLong() {
			plan = withContextFallback(plan, i)
			if i+1 < len(plan) && plan[i+1].role == roleContext {
				g.log.Info("context too long: request goes to the context fallback",
					zap.String("engine", c.rt.cfg.Name), zap.String("fallback", plan[i+1].rt.cfg.Name))
				continue
			}
		}
		if !last.movesOn() {
			break
		}
		if c.role == roleFallback && i > 0 && !rewaited && slowBefore(failed) {
			// the fallback took over a slow start and failed: go back to
			// waiting for the engine, which is still starting
			rewaited = true
			again := plan[i-1]
			plan = append(append(append(make([]candidate, 0, len(plan)+1), plan[:i+1]...), again), plan[i+1:]...)
			continue
		}
		if c.role == rolePool && i+1 < len(plan) && g.Hooks.Replay != nil {
			g.Hooks.Replay(req.pool)
		}
		if i+1 < len(plan) && plan[i+1].role == roleFallback && last.outcome != outcomeSlow {
			g.log.Info("engine failed: request goes to its fallback", zap.String("engine", c.rt.cfg.Name),
				zap.String("fallback", plan[i+1].rt.cfg.Name), zap.String("failure", last.label()))
		}
	}
	if len(failed) == 0 {
		return // cannot happen: a plan has a candidate and a budget an attempt
	}
	g.fail(rp, failed)
}

// slowBefore reports whether an earlier attempt left a slow start.
func slowBefore(failed []*attempt) bool {
	for _, a := range failed {
		if a.outcome == outcomeSlow {
			return true
		}
	}
	return false
}

// countFallback reports that c answered instead of the plan's first
// candidate, with the reason it came to that.
func (g *Gateway) countFallback(first, c candidate, failed []*attempt) {
	if g.Hooks.Fallback == nil {
		return
	}
	reason := "failure"
	switch {
	case c.role == roleBody:
		reason = "body"
	case c.role == roleContext:
		reason = "context"
	case len(failed) > 0 && failed[len(failed)-1].outcome == outcomeSlow:
		reason = "slow_start"
	case len(failed) > 0 && failed[len(failed)-1].outcome == outcomeOpen:
		reason = "breaker"
	}
	g.Hooks.Fallback(first.rt.cfg.Name, c.rt.cfg.Name, reason)
}

// fail answers when no candidate gave an answer: with the first upstream
// error (the primary's, normally) as it was sent, or the first failure as an
// error of ours, with every attempt listed when there were several.
func (g *Gateway) fail(rp *reply, failed []*attempt) {
	first := failed[0]
	for _, a := range failed {
		if a.outcome == outcomeStatus {
			first = a
			break
		}
	}
	var labels []string
	if len(failed) > 1 {
		for _, a := range failed {
			labels = append(labels, a.label())
		}
	}
	if first.outcome == outcomeStatus {
		g.passUpstreamError(rp, first, labels)
		return
	}
	e := first.failureError()
	if labels != nil {
		e.Message += " (attempts: " + strings.Join(labels, ", ") + ")"
	}
	if rp.preamble {
		rp.errorEvent(e)
		return
	}
	if labels != nil {
		rp.w.Header().Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	rp.firstByte(e.Status)
	e.write(rp.w)
}

// passUpstreamError sends an upstream's error answer: status, headers and
// body as the upstream sent them, except that the attempts, when there were
// several, are added to the error's message.
func (g *Gateway) passUpstreamError(rp *reply, a *attempt, labels []string) {
	body := a.errBody
	if labels != nil {
		body = withAttempts(body, strings.Join(labels, ", "))
	}
	if rp.preamble {
		rp.errorEvent(&Error{a.resp.StatusCode, typeUpstream, "upstream_error", upstreamMessage(body)})
		return
	}
	h := rp.w.Header()
	copyHeader(h, a.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-LLM-Engine", a.c.rt.cfg.Name)
	if labels != nil {
		h.Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	rp.firstByte(a.resp.StatusCode)
	rp.w.WriteHeader(a.resp.StatusCode)
	_, _ = rp.w.Write(body)
}

// withAttempts adds the attempt list to an OpenAI-shaped error's message.
// A body of another shape is left alone (the X-LLM-Attempts header has it).
func withAttempts(body []byte, attempts string) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	note := " (attempts: " + attempts + ")"
	switch e := doc["error"].(type) {
	case map[string]any:
		msg, _ := e["message"].(string)
		e["message"] = msg + note
	case string:
		doc["error"] = e + note
	default:
		return body
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// upstreamMessage is the message of an upstream's error body, or the body.
func upstreamMessage(body []byte) string {
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Error) > 0 {
		var e struct{ Message string }
		if json.Unmarshal(doc.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
		var s string
		if json.Unmarshal(doc.Error, &s) == nil {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}

// commit gives the attempt's answer to the client. This is the commit
// point: the first content leaves the gateway here, and from now on the
// request is this engine's, whatever happens.
func (g *Gateway) commit(rp *reply, a *attempt) {
	defer a.close()
	resp := a.resp
	name := a.c.rt.cfg.Name
	if rp.preamble {
		// the status and headers went out with the preamble: body only
		if a.c.isFallback() {
			rp.comment("fallback " + name)
		}
	} else {
		h := rp.w.Header()
		copyHeader(h, resp.Header)
		if g.annotate && a.events == nil && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			h.Del("Content-Length") // the annotated body is longer
		}
		h.Set("X-LLM-Engine", name)
		if a.c.isFallback() {
			h.Set("X-LLM-Fallback", name)
		}
		if a.events != nil {
			// an event stream is delivered event by event: no length,
			// and no buffering in proxies in front of us
			h.Del("Content-Length")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
		}
		rp.firstByte(resp.StatusCode)
		rp.w.WriteHeader(resp.StatusCode)
	}
	if a.events == nil {
		// a body that is not a stream gets the same budget between reads:
		// headers followed by silence must not hold the request forever
		a.startIdleTimer()
		a.touch()
		resp.Body = &touchReader{resp.Body, a}
		if !rp.preamble && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			g.writeJSONAnswer(rp, a)
			return
		}
		if err := copyBody(rp.w, resp.Body, rp.preamble); err != nil {
			g.cutBody(rp, a, err)
		}
		return
	}
	if _, err := rp.w.Write(a.held); err != nil {
		g.cut(rp, a, errClientGone)
	}
	if a.tr = g.newTranscript(a.req, a); a.tr != nil {
		a.tr.addAll(a.held)
	}
	a.held = nil
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
		if u, ok := usageOf(body); ok {
			rp.res.Usage, rp.res.HasUsage = u, true
		}
		if g.annotate {
			body = annotate(body, a.c.rt.cfg.Name, a.sent, time.Since(rp.start).Milliseconds(), a.index)
		}
	}
	if _, err := rp.w.Write(body); err != nil {
		g.cut(rp, a, errClientGone)
	}
	if !whole {
		if err := copyBody(rp.w, a.resp.Body, false); err != nil {
			g.cutBody(rp, a, err)
		}
	}
}

// relay passes the rest of an event stream on, event by event: a data line
// that is not JSON is dropped, and a stream that ends without its last
// event complete, or stalls past stream_idle_timeout, is cut honestly.
//
// Events are not copied: consecutive events lie side by side in the
// reader's buffer, so the batch of events one read brought is written with
// one Write and one Flush, just before the next read would block, as
// reverse_proxy writes its copy buffer.
func (g *Gateway) relay(rp *reply, a *attempt) {
	var batch []byte // events read and not yet written: a span of the reader's buffer
	send := func(flush bool) {
		if len(batch) > 0 {
			if _, err := rp.w.Write(batch); err != nil {
				g.cut(rp, a, errClientGone)
			}
			batch = nil
		}
		if flush {
			if err := rp.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				g.cut(rp, a, errClientGone)
			}
			// a slow client is no silent upstream: the idle budget
			// counts from the last event delivered
			a.touch()
		}
	}
	for {
		if !a.events.buffered() {
			send(true) // the next read may block: everything read so far goes out now
		}
		ev, err := a.nextEvent()
		if err == io.EOF {
			// a clean end, [DONE] or not: finish at once
			send(true)
			return
		}
		if err != nil {
			send(false)
			a.fail(err)
			if a.outcome != outcomeCanceled && g.resume(rp, a, err) {
				return
			}
			g.cut(rp, a, err)
		}
		kind, usage, hasUsage := inspectEvent(ev)
		if kind == eventMalformed {
			send(false)
			g.droppedEvent(a)
			continue
		}
		if a.rewrite != nil {
			ev = a.rewrite.apply(ev)
		}
		a.tr.add(ev)
		batch = extend(batch, ev)
		if hasUsage {
			rp.res.Usage, rp.res.HasUsage = usage, true
		}
		if kind == eventDone {
			send(true)
			a.drainAfterDone()
			return
		}
	}
}

// extend appends ev to batch without copying when ev follows batch in the
// same buffer, which is how consecutive events come out of an sseReader.
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
func (a *attempt) drainAfterDone() {
	t := time.AfterFunc(100*time.Millisecond, func() { a.cancel(context.Canceled) })
	defer t.Stop()
	for {
		if _, err := a.events.next(); err != nil {
			return
		}
	}
}

// touchReader restarts the attempt's idle budget at every read.
type touchReader struct {
	io.ReadCloser
	a *attempt
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.a.touch()
	}
	return n, err
}

// cutBody classifies a body read that failed, then cuts.
func (g *Gateway) cutBody(rp *reply, a *attempt, err error) {
	if !errors.Is(err, errClientGone) {
		a.fail(err)
	}
	g.cut(rp, a, err)
}

// errClientGone marks a copy that ended because the client stopped reading.
var errClientGone = errors.New("client went away")

// cut ends a response whose upstream failed after commit. The client must
// see an error, never a tidy end that looks complete: a stream gets one
// in-band error event first, and the connection is aborted either way.
func (g *Gateway) cut(rp *reply, a *attempt, err error) {
	if errors.Is(err, errClientGone) || a.req.r.Context().Err() != nil {
		// the client left ("stop generating"): the engine did nothing wrong
		a.close()
		panic(http.ErrAbortHandler)
	}
	a.c.breaker().Failure()
	g.log.Warn("upstream failed mid-response", zap.String("engine", a.c.rt.cfg.Name), zap.Error(err))
	if a.events != nil || rp.preamble {
		reason := rootCause(err)
		if a.outcome == outcomeTimeout {
			reason = "no event within its " + a.timeout.Error() + " of " + a.budget().String()
		}
		rp.errorEvent(&Error{http.StatusBadGateway, typeUpstream, "upstream_stream_cut",
			"engine " + a.c.rt.cfg.Name + " cut the stream: " + reason})
	}
	a.close()
	panic(http.ErrAbortHandler)
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies a body that is not an event stream; flushEach flushes
// every read (a stream whose preamble went out). A read error is the
// upstream's, a write error becomes errClientGone.
func copyBody(w http.ResponseWriter, body io.Reader, flushEach bool) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	rc := http.NewResponseController(w)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return errClientGone
			}
			if flushEach {
				_ = rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func isEventStream(ct string) bool {
	if ct == "" {
		return false
	}
	if strings.HasPrefix(ct, "text/event-stream") && (len(ct) == len("text/event-stream") || ct[len("text/event-stream")] == ';') {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}
