package engines

import (
	"context"
	"time"
)

// A request's priority (a key's `priority`, which its X-LLM-Priority header
// may lower, never raise) and its key's name travel in its context: higher
// priority goes first in an engine's queue, and the start of the engine
// its highest-priority waiter wants goes first in the scheduler; equal
// priorities take turns by key (issue 29).

type priorityKey struct{}

type priority struct {
	level int
	key   string
}

// WithPriority returns ctx carrying a request's priority and its key name.
func WithPriority(ctx context.Context, level int, key string) context.Context {
	return context.WithValue(ctx, priorityKey{}, priority{level, key})
}

// PriorityOf is what WithPriority put in ctx: level 0 and no key without it.
func PriorityOf(ctx context.Context) (int, string) {
	p, _ := ctx.Value(priorityKey{}).(priority)
	return p.level, p.key
}

// Priority protects warm engines (issue 39). Without it a priority-0 key
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

// DefaultPriorityGrace is how long an idle engine of a higher-priority use
// is kept from a lower-priority start, when the config says nothing.
const DefaultPriorityGrace = 30 * time.Second

// priorityGrace is the grace a box gets when it is made: the last
// config's (SetPriorityGrace), DefaultPriorityGrace before any. Guarded by
// boxesMu.
var priorityGrace = DefaultPriorityGrace

// SetPriorityGrace sets every box's priority_grace (0: off). The caddy
// module calls it when a config loads; the last config's wins, as for the
// memory budget.
func SetPriorityGrace(d time.Duration) {
	boxesMu.Lock()
	defer boxesMu.Unlock()
	priorityGrace = max(d, 0)
	for _, b := range boxes {
		b.mu.Lock()
		b.grace = priorityGrace
		b.mu.Unlock()
		b.sig.poke()
	}
}

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

// keySwaps counts a box's swaps by the key whose request began the start
// that stopped engines (issue 39: who causes them). Key names come from the
// config, so the map is as small as the keys are few. Guarded by the box's
// mu.
type keySwaps map[string]uint64

func (k *keySwaps) add(key string) {
	if *k == nil {
		*k = keySwaps{}
	}
	(*k)[key]++
}
