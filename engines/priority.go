package engines

import "context"

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
