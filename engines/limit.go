package engines

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// The concurrency limit of an engine (max_concurrent, queue): at
// most max requests are in flight on it, up to queueMax more wait for a
// place in order of arrival, and any further one is refused at once with a
// *BusyError, as is one whose wait outlasts the queue timeout. llama-swap
// answers 429 beyond its concurrencyLimit; a llama-server with 4 slots
// queues the rest inside itself, where nobody sees or bounds the wait.
//
// A place is taken before the engine's lease (so a request that waits in the
// queue holds no lease, and never keeps a draining or swapped-out engine
// up), and given back with it. A freed place goes straight to the head of
// the queue, so a newcomer never overtakes a request that waits.

// BusyError refuses a request for an engine whose places are all taken and
// whose queue is full, or whose wait in the queue ran out.
type BusyError struct {
	Engine        string
	MaxConcurrent int
	Default       bool // MaxConcurrent is DefaultMaxConcurrent: the config names none
	Queue         int
	// Waited is how long the request waited in the queue: 0 when the
	// queue was full on arrival.
	Waited time.Duration
	// RetryAfter is when a place is likely free: about one request's
	// time on the engine; for a start refused for room, when room may
	// come (the first min_loaded to end).
	RetryAfter time.Duration

	// WaitingFor is set when the scheduler refused the engine's start
	// (box.go): it waited max_wait for room, and what the rules protect
	// (min_loaded, evict never) left it none. Each item names an engine
	// that holds room and why: "qwen (in use, 2 in flight)", "llama
	// (min_loaded for 40s more)". Need and Box say what it needed of what.
	WaitingFor []string
	Need       string
	Box        string
}

// Room reports whether the refusal is the scheduler's (no room for the
// engine's start), not its max_concurrent's: a 503, not a 429.
func (e *BusyError) Room() bool { return e.Box != "" }

func (e *BusyError) Error() string {
	if e.Room() {
		held := "engines that may not be stopped"
		if len(e.WaitingFor) > 0 {
			held = strings.Join(e.WaitingFor, ", ")
		}
		return fmt.Sprintf("engine %s is waiting for room: it needs %s of the %s, held by %s; it waited %s (max_wait)",
			e.Engine, e.Need, e.Box, held, e.Waited.Round(time.Second))
	}
	if e.Waited > 0 {
		return fmt.Sprintf("engine %s is busy: the request waited %s in its queue (max_concurrent %d) and its queue_timeout ran out",
			e.Engine, e.Waited.Round(time.Millisecond), e.MaxConcurrent)
	}
	if e.Default {
		return fmt.Sprintf("engine %s is busy: %d requests in flight, the default max_concurrent (an engine's max_concurrent line allows more)",
			e.Engine, e.MaxConcurrent)
	}
	return fmt.Sprintf("engine %s is busy: %d requests in flight and %d waiting (max_concurrent %d, queue %d)",
		e.Engine, e.MaxConcurrent, e.Queue, e.MaxConcurrent, e.Queue)
}

// BusyReason says why a request was refused: its queue was full, or its
// wait ran out.
type BusyReason string

// The reasons.
const (
	BusyQueueFull    BusyReason = "queue_full"
	BusyQueueTimeout BusyReason = "queue_timeout"
)

// QueueOutcome is how a wait in the queue ended.
type QueueOutcome string

// The outcomes.
const (
	QueueServed   QueueOutcome = "served"   // a place came free
	QueueTimedOut QueueOutcome = "timeout"  // queue_timeout ran out
	QueueLeft     QueueOutcome = "canceled" // the request left (its client went away, or it went to the fallback)
)

// QueueObserver hears about the queue of an engine with max_concurrent; an
// Observer may implement it. Its methods run on the request's goroutine.
type QueueObserver interface {
	// EngineQueueWait: a request waited in the engine's queue.
	EngineQueueWait(name string, waited time.Duration, outcome QueueOutcome)
	// EngineBusy: a request was refused by the engine's limit.
	EngineBusy(name string, reason BusyReason)
}

// firstHoldGuess is how long a place is taken to be held before any
// request has given one back: the Retry-After of the first refusals.
const firstHoldGuess = time.Second

// maxRetryAfter bounds the Retry-After of a refusal.
const maxRetryAfter = time.Minute

// limiter is the places of one engine and the queue for them.
type limiter struct {
	max      int
	queueMax int
	timeout  time.Duration
	clock    clock.Clock
	closed   <-chan struct{} // the engine's end: every waiter leaves with ErrClosed

	mu         sync.Mutex
	held       int       // places taken
	queue      []*waiter // oldest first
	avgHold    time.Duration
	served     uint64            // places handed to waiters so far
	lastServed map[string]uint64 // by key: when one of its waiters last got a place
}

// waiter is one request in the queue.
type waiter struct {
	granted chan struct{} // closed when a place is handed to it
	prio    int           // the request's priority: higher goes first
	key     string        // the caller's key name: equal priorities take turns by key
}

// place is a taken place; give it back once.
type place struct {
	at time.Time
}

func newLimiter(max, queueMax int, timeout time.Duration, clk clock.Clock, closed <-chan struct{}) *limiter {
	return &limiter{max: max, queueMax: queueMax, timeout: timeout, clock: clk, closed: closed}
}

// tryTake takes a free place if one is free and nobody waits for it.
func (l *limiter) tryTake() *place {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.held >= l.max {
		return nil
	}
	l.held++
	return &place{at: l.clock.Now()}
}

// take takes a place, waiting in the queue when every place is taken. It
// returns a *BusyError (reason in why) when the queue is full or the wait
// ran out, ctx's error when ctx ended first (the request left, and its
// place in the queue is free at once), and ErrClosed when the engine was
// torn down meanwhile. waited is how long it queued (0 if it did not).
func (l *limiter) take(ctx context.Context) (p *place, waited time.Duration, queued bool, why BusyReason, err error) {
	if p := l.tryTake(); p != nil {
		return p, 0, false, "", nil
	}
	l.mu.Lock()
	if l.held < l.max { // a place came free since tryTake
		l.held++
		l.mu.Unlock()
		return &place{at: l.clock.Now()}, 0, false, "", nil
	}
	if len(l.queue) >= l.queueMax {
		l.mu.Unlock()
		return nil, 0, false, BusyQueueFull, nil
	}
	prio, key := PriorityOf(ctx)
	w := &waiter{granted: make(chan struct{}), prio: prio, key: key}
	// the wait's start and timer come before the waiter is in the queue, in
	// order: a clock that moves once the request is seen queued (a test's)
	// sees the timer, however late this goroutine runs after the unlock;
	// armed under the lock, so a take that does not queue arms none
	began := l.clock.Now()
	t := l.clock.NewTimer(l.timeout)
	defer t.Stop()
	l.queue = append(l.queue, w)
	l.mu.Unlock()

	var timedOut bool
	gone := ctx.Err
	select {
	case <-w.granted:
		return &place{at: l.clock.Now()}, l.clock.Now().Sub(began), true, "", nil
	case <-ctx.Done():
	case <-l.closed:
		gone = func() error { return ErrClosed }
	case <-t.C():
		timedOut = true
	}
	waited = l.clock.Now().Sub(began)
	if !l.leave(w) {
		// a place was handed over in the same instant
		if !timedOut {
			l.give(&place{at: l.clock.Now()}) // nobody will use it: pass it on
			return nil, waited, true, "", gone()
		}
		return &place{at: l.clock.Now()}, waited, true, "", nil
	}
	if timedOut {
		return nil, waited, true, BusyQueueTimeout, nil
	}
	return nil, waited, true, "", gone()
}

// leave takes w out of the queue; false if it was handed a place already.
func (l *limiter) leave(w *waiter) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, o := range l.queue {
		if o == w {
			l.queue = append(l.queue[:i], l.queue[i+1:]...)
			return true
		}
	}
	return false
}

// give gives a place back: to the oldest waiter, or to the free places.
func (l *limiter) give(p *place) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if hold := l.clock.Now().Sub(p.at); hold > 0 {
		if l.avgHold == 0 {
			l.avgHold = hold
		} else {
			l.avgHold += (hold - l.avgHold) / 5 // a moving average of the last few
		}
	}
	if len(l.queue) > 0 {
		i := l.next()
		w := l.queue[i]
		l.queue = append(l.queue[:i], l.queue[i+1:]...)
		l.served++
		if l.lastServed == nil {
			l.lastServed = map[string]uint64{}
		}
		l.lastServed[w.key] = l.served
		close(w.granted) // the place passes on: held stays
		return
	}
	l.held--
}

// next is the waiter a free place goes to: the highest priority; among
// equal ones, the key whose waiters were served least recently (so one
// team's burst does not starve another's), then the oldest. Call with mu
// held and a waiter queued.
func (l *limiter) next() int {
	best := 0
	for i, w := range l.queue[1:] {
		b := l.queue[best]
		switch {
		case w.prio != b.prio:
			if w.prio > b.prio {
				best = i + 1
			}
		case w.key != b.key && l.lastServed[w.key] < l.lastServed[b.key]:
			best = i + 1
		}
	}
	return best
}

// retryAfter is when a refused request may try again: about how long a
// place is held, in whole seconds, between 1 s and a minute.
func (l *limiter) retryAfter() time.Duration {
	l.mu.Lock()
	d := l.avgHold
	l.mu.Unlock()
	if d <= 0 {
		d = firstHoldGuess
	}
	d = (d + time.Second - 1).Truncate(time.Second)
	return min(max(d, time.Second), maxRetryAfter)
}

// full reports whether every place is taken.
func (l *limiter) full() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held >= l.max
}

// counts are the places taken and the requests waiting.
func (l *limiter) counts() (held, queued int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.held, len(l.queue)
}

// queued is how many wait in the queue now.
func (l *limiter) queued() int {
	_, q := l.counts()
	return q
}

// A request's priority (a key's `priority`, which its X-LLM-Priority header
// may lower, never raise) and its key's name travel in its context: higher
// priority goes first in an engine's queue, and the start of the engine
// its highest-priority waiter wants goes first in the scheduler; equal
// priorities take turns by key.

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
