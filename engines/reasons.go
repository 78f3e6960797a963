package engines

import (
	"context"
	"fmt"
	"strings"
	"time"
)

// Why the scheduler did what it did: every start, stop and keep
// it decides carries a reason in words, kept on the engine (its last start
// and its last stop) and on the claims that wait (why each waits), for the
// admin API, the status page and the log; and counters of its stops and
// swaps, for the metrics (swapCount, kept by the box: box.go).

// StopRoom is a stop the scheduler made to give a waiting start room in a
// memory budget (StopGroup: the turn of an exclusive group).
const StopRoom StopReason = "room"

// whyKey carries why a start is asked for (an admin start) in its context.
type whyKey struct{}

// startWhy is why a start asked for with ctx happens: a request's, unless
// the context says otherwise.
func startWhy(ctx context.Context) string {
	if s, ok := ctx.Value(whyKey{}).(string); ok {
		return s
	}
	if p, key := PriorityOf(ctx); p != 0 || key != "" {
		if key != "" {
			return fmt.Sprintf("request (key %s, priority %d)", key, p)
		}
		return fmt.Sprintf("request (priority %d)", p)
	}
	return "request"
}

// noteStart records why a start begins. Call with mu held.
func (e *Engine) noteStart(why string) {
	e.why.Started, e.why.StartedAt = why, e.now()
}

// noteStop records why the engine stops, unless a more precise reason was
// recorded for this stop already. Call with mu held.
func (e *Engine) noteStop(why string) {
	if e.stopWhy != "" {
		why, e.stopWhy = e.stopWhy, ""
	}
	e.why.Stopped, e.why.StoppedAt = why, e.now()
}

// noteRefused records a start the scheduler refused: it did not start, so
// its reason is no start's (the page read "started: request" on an engine
// that never ran); the refusal is the engine's last stop, with what kept it
// out. Call with mu held.
func (e *Engine) noteRefused(busy *BusyError) {
	why := "start refused: no room in the " + busy.Box
	if busy.Waited > 0 {
		why += " after " + busy.Waited.Round(time.Millisecond).String()
	}
	if len(busy.WaitingFor) > 0 {
		why += ", held by " + strings.Join(busy.WaitingFor, ", ")
	}
	e.why.Started, e.why.StartedAt = "", time.Time{}
	e.why.Stopped, e.why.StoppedAt = why, e.now()
}

// noteGranted adds to the start's reason what its claim on b took: the
// wait for room and the engines stopped for it.
func (e *Engine) noteGranted(b *box, waited time.Duration, stopped []string) {
	if waited < time.Millisecond && len(stopped) == 0 {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	var parts []string
	if waited >= time.Millisecond {
		parts = append(parts, "waited "+waited.Round(time.Millisecond).String()+" for room in the "+b.what())
	}
	if len(stopped) > 0 {
		parts = append(parts, "stopped "+strings.Join(stopped, ", ")+" for it")
	}
	e.why.Started += "; " + strings.Join(parts, "; ")
}

// stopFor stops the engine for the scheduler, saying why.
func (e *Engine) stopFor(ctx context.Context, why string, reason StopReason) error {
	e.mu.Lock()
	e.stopWhy = why
	e.mu.Unlock()
	return e.Stop(ctx, true, reason)
}

// stopWords is the reason recorded for a stop without a scheduler's own.
func (e *Engine) stopWords(reason StopReason) string {
	switch reason {
	case StopIdle:
		return "idle_timeout " + time.Duration(e.cfg.IdleTimeout).String()
	case StopAdmin:
		return "admin stop"
	case StopReload:
		return "config reload"
	case StopCrash:
		return "crashed"
	}
	return string(reason)
}

// Served tells the engine that a request of priority prio was served on
// it: the engine's priority, for the order in which idle engines are
// stopped, is the highest priority among the requests of its last use (a
// use begins when a request takes a lease on an idle engine). The caddy
// module calls it when a request ends; Acquire notes the priority of the
// requests that waited for a start itself.
func (e *Engine) Served(prio int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.notePrio(prio)
}

// notePrio adds prio to the priorities of the engine's last use. Call with
// mu held.
func (e *Engine) notePrio(prio int) {
	if e.freshUse {
		e.usePrio, e.freshUse = prio, false
		return
	}
	e.usePrio = max(e.usePrio, prio)
}

// Why is the scheduler's last start and stop of the engine, and why.
func (e *Engine) Why() Reasons {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.why
}
