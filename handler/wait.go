package handler

import (
	"context"
	"errors"
	"net/http"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// preambleDelay is how long a streaming request waits for its engine before
// it gets its SSE headers, so that clients and proxies in between see a
// live response while a model loads.
const preambleDelay = 500 * time.Millisecond

// DefaultKeepAlive is the default interval of SSE keep-alive comments while a
// streaming request waits.
const DefaultKeepAlive = 3 * time.Second

// reply is the client's side of a request: what has been sent so far.
type reply struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	stream    bool // the client asked for an event stream
	preamble  bool // SSE headers went out before any upstream answered
	keepAlive time.Duration
	start     time.Time
	res       *Result // what the client got, for logs and metrics
}

// firstByte records the client's first byte and status, once.
func (rp *reply) firstByte(status int) {
	if rp.res == nil || rp.res.Status != 0 {
		return
	}
	rp.res.Status, rp.res.TTFB = status, time.Since(rp.start)
}

// sendPreamble commits SSE headers before any upstream answered.
func (rp *reply) sendPreamble() {
	h := rp.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rp.w.WriteHeader(http.StatusOK)
	_ = rp.rc.Flush()
	rp.preamble = true
	rp.firstByte(http.StatusOK)
}

// errorEvent ends a stream whose headers went out with one error event.
func (rp *reply) errorEvent(e *Error) {
	_, _ = rp.w.Write(e.sseEvent())
	_ = rp.rc.Flush()
}

// comment sends one SSE comment line.
func (rp *reply) comment(text string) {
	_, _ = rp.w.Write([]byte(": " + text + "\n\n"))
	_ = rp.rc.Flush()
}

// waiting returns the timers of a wait: the preamble's (nil once sent or for
// a non-streaming request) and the keep-alive ticker's channel.
type waitTimers struct {
	preamble  *time.Timer
	keepAlive *time.Ticker
}

func (rp *reply) timers() *waitTimers {
	wt := &waitTimers{}
	if rp.stream && !rp.preamble {
		wt.preamble = time.NewTimer(max(0, preambleDelay-time.Since(rp.start)))
	}
	wt.keepAlive = time.NewTicker(rp.keepAlive)
	return wt
}

func (wt *waitTimers) stop() {
	if wt.preamble != nil {
		wt.preamble.Stop()
	}
	wt.keepAlive.Stop()
}

func (wt *waitTimers) preambleC() <-chan time.Time {
	if wt.preamble == nil {
		return nil
	}
	return wt.preamble.C
}

// tick handles a timer that fired during a wait.
func (rp *reply) onPreamble(wt *waitTimers) {
	rp.sendPreamble()
	wt.preamble = nil
	wt.keepAlive.Reset(rp.keepAlive)
}

func (rp *reply) onKeepAlive() {
	if rp.preamble {
		rp.comment("keep-alive")
	}
}

// pause waits d (a retry's back-off) while keeping a waiting stream alive.
// It reports false if the client went away.
func (rp *reply) pause(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	wt := rp.timers()
	defer wt.stop()
	for {
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		case <-wt.preambleC():
			rp.onPreamble(wt)
		case <-wt.keepAlive.C:
			rp.onKeepAlive()
		}
	}
}

type acquired struct {
	lease *engines.Lease
	err   error
}

// lease gets a lease on the candidate's engine, starting it when the wake
// policy allows. A ready engine is leased at once. Otherwise the request
// waits; a streaming request gets its SSE preamble after preambleDelay and
// keep-alive comments; and once fallback_after has passed, if the fallback
// answers its readiness probe right then, the request leaves the wait
// (outcomeSlow) for the fallback. The start itself is never cancelled: it
// belongs to the engine, not to this request. It reports whether a holds a
// lease.
func (g *Gateway) lease(rp *reply, req *request, a *attempt, fallback *route) bool {
	eng := a.c.rt.eng
	if l := eng.TryAcquire(); l != nil {
		a.lease = l
		return true
	}
	ctx := req.r.Context()
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan acquired, 1)
	go func() {
		l, err := eng.Acquire(actx, a.c.rt.wake)
		done <- acquired{l, err}
	}()

	wt := rp.timers()
	defer wt.stop()
	var fallbackAt <-chan time.Time
	if fallback != nil {
		t := time.NewTimer(max(0, time.Duration(a.c.rt.cfg.FallbackAfter)-time.Since(rp.start)))
		defer t.Stop()
		fallbackAt = t.C
	}
	for {
		select {
		case r := <-done:
			return a.acquiredResult(ctx, r)
		case <-wt.preambleC():
			rp.onPreamble(wt)
		case <-wt.keepAlive.C:
			rp.onKeepAlive()
		case <-fallbackAt:
			fallbackAt = nil
			if !fallback.eng.Probe(ctx) {
				continue // the fallback is down too: keep waiting for our engine
			}
			cancel()
			if r := <-done; r.lease != nil {
				// the engine came up in the same instant: use it
				return a.acquiredResult(ctx, r)
			}
			a.outcome, a.waited = outcomeSlow, time.Since(rp.start)
			g.log.Info("engine slow to start: request goes to its fallback",
				zap.String("engine", a.c.rt.cfg.Name), zap.String("fallback", fallback.cfg.Name),
				zap.Duration("waited", a.waited))
			return false
		}
	}
}

func (a *attempt) acquiredResult(ctx context.Context, r acquired) bool {
	if r.err == nil {
		a.lease = r.lease
		return true
	}
	a.err = r.err
	switch {
	case ctx.Err() != nil:
		a.outcome = outcomeCanceled
	case errors.Is(r.err, engines.ErrNotRunning):
		a.outcome = outcomeNotRunning
	default:
		a.outcome = outcomeStart
	}
	return false
}
