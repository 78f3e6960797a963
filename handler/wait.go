package handler

import (
	"context"
	"errors"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Waiting for an engine: a ready engine is leased at once; otherwise the
// request waits for its start (which it may trigger, per the wake policy),
// keeps a streaming client alive meanwhile, and, once fallback_after has
// passed, leaves for the candidate's slow-start fallback if that answers.

type acquired struct {
	lease *engines.Lease
	err   error
}

// lease gets a lease on the candidate's engine, starting it when the wake
// policy allows. A ready engine is leased at once. Otherwise the request
// waits; a streaming request gets its SSE preamble after preambleDelay and
// keep-alive comments; and once fallback_after has passed, if the
// candidate's slow fallback answers its readiness probe right then, the
// request leaves the wait (outcomeSlow) for it. The start itself is never
// cancelled: it belongs to the engine, not to this request. It reports
// whether a holds a lease.
func (g *Gateway) lease(rp *reply, req *request, a *attempt) bool {
	eng := a.c.rt.eng
	if l := eng.TryAcquire(); l != nil {
		a.lease = l
		return true
	}
	ctx := a.parent
	actx, cancel := context.WithCancel(ctx)
	defer cancel()
	// the timers are armed before the wait starts, in order: a clock that
	// moves once the engine was asked (a test's) sees them, however late
	// this goroutine runs after the go statement
	wt := rp.timers()
	defer wt.stop()
	var fallbackAt <-chan time.Time
	slow := a.c.slow
	if slow != nil {
		t := g.clock.NewTimer(max(0, time.Duration(a.c.rt.cfg.FallbackAfter)-rp.since()))
		defer t.Stop()
		fallbackAt = t.C()
	}
	done := make(chan acquired, 1)
	go func() {
		l, err := eng.Acquire(actx, a.c.rt.wake)
		done <- acquired{l, err}
	}()
	ls := g.newLoading(rp, req, a.c.rt)
	for {
		select {
		case r := <-done:
			if r.lease != nil {
				ls.done()
			}
			return a.acquiredResult(ctx, r)
		case <-wt.preambleC():
			wt.onPreamble()
			ls.tick()
		case <-wt.keepAliveC():
			if ls != nil && rp.preamble {
				wt.keepAlive.Reset(rp.keepAlive) // before the flush, as in onKeepAlive
				ls.tick()
				continue
			}
			wt.onKeepAlive()
		case <-fallbackAt:
			fallbackAt = nil
			if slow.eng.Busy() || !slow.eng.Probe(ctx) {
				continue // the fallback is down or full too: keep waiting for our engine
			}
			cancel()
			if r := <-done; r.lease != nil {
				// the engine came up in the same instant: use it
				return a.acquiredResult(ctx, r)
			}
			a.outcome, a.waited = outcomeSlow, rp.since()
			msg := "engine slow to start: request goes to its fallback"
			if eng.State() == engines.Ready {
				// it waited in the engine's queue (max_concurrent), not
				// for a start
				a.outcome = outcomeBusy
				msg = "engine busy: a queued request goes to its fallback"
			}
			g.log.Info(msg, zap.String("engine", a.c.rt.cfg.Name), zap.String("fallback", slow.cfg.Name),
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
	var busy *engines.BusyError
	switch {
	case ctx.Err() != nil:
		a.outcome = outcomeCanceled
	case errors.As(r.err, &busy):
		a.outcome = outcomeBusy
	case errors.Is(r.err, engines.ErrNotRunning):
		a.outcome = outcomeNotRunning
	default:
		a.outcome = outcomeStart
	}
	return false
}

// mayWakeNode decides for a models_from node whose model is unloaded: with
// wake off the request does not go (the gateway never makes a node load a
// model then); with wake on it goes, and the node counts as loading the
// model from now on, so that the next requests wait for it rather than
// wake another node.
func (g *Gateway) mayWakeNode(ctx context.Context, a *attempt) bool {
	rt := a.c.rt
	if g.nodeState(g.fleet(ctx), rt, a.sent) != nodeUnloaded {
		return true
	}
	if !rt.wake {
		a.outcome = outcomeNotRunning
		a.err = fmt.Errorf("model %s is not loaded on engine %s and wake is off for it: the gateway does not make a node load a model", a.sent, rt.cfg.Name)
		return false
	}
	g.wakeNode(rt, a.sent)
	return true
}

// borrow takes a place on a fallback, which is used only if it is up: never
// started or leased, but its max_concurrent holds. It reports whether a
// holds the place.
func (a *attempt) borrow() bool {
	l, err := a.c.rt.eng.Borrow()
	switch {
	case err != nil:
		a.outcome, a.err = outcomeBusy, err
	case l == nil:
		a.outcome = outcomeNotRunning
		a.err = fmt.Errorf("fallback engine %s is not running (the gateway never starts a fallback)", a.c.rt.cfg.Name)
	default:
		a.lease = l
		return true
	}
	return false
}
