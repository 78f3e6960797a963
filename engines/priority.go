package engines

import (
	"context"
	"time"
)

// A request's priority travels in its context (WithPriority, limit.go,
// where it orders an engine's queue); here it orders the scheduler's starts.

// Priority protects warm engines. Without it a priority-0 key
// alternating two models stopped a priority-10 key's engine at each of its
// pauses (14 swaps in 20 s, the high key's median from 0.002 s to 2.65 s):
// the evict order put the low-priority engines first, but when the
// high-priority one was the only idle engine it went all the same. Now an
// engine whose last use was of a higher priority than a start's is not
// stopped for it until it has been idle for priority_grace, or until the
// start has waited max_wait (then it is a start that waited max_wait, as
// before: it may drain, or be refused when what min_loaded and evict never
// protect leaves it no room). A start's priority is the highest among the
// requests waiting for it, as for its place in the queue.

// protectWarm marks the engines that the grace keeps from a start of
// priority prio: those holding a share whose last use was of a higher
// priority and ended less than grace ago (busy ones too, which the start
// may not stop anyway). grace on a view is how long it is still kept;
// decide passes over them. Not for a start that waited max_wait.
func protectWarm(views []view, prio int, grace time.Duration, now time.Time) {
	if grace <= 0 {
		return
	}
	for i := range views {
		v := &views[i]
		if !v.holds || v.usePrio <= prio || v.lastUsed.IsZero() {
			continue
		}
		if left := v.lastUsed.Add(grace).Sub(now); left > 0 {
			v.grace = left
		}
	}
}

// startPrio is the priority of a start of self: the highest among the
// requests waiting for it (0 when none waits).
func startPrio(views []view, self *Engine) int {
	for _, v := range views {
		if v.e == self {
			return v.prio
		}
	}
	return 0
}

// noteStarter records the key whose request begins a start, by whom the
// swaps it causes are counted. Call with mu held.
func (e *Engine) noteStarter(ctx context.Context) {
	_, e.startKey = PriorityOf(ctx)
}

// starter is the key whose request began the engine's last start ("" for
// a key without a name, a request without a key, an admin start).
func (e *Engine) starter() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.startKey
}
