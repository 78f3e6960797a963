package engines

import (
	"context"
	"net/url"
	"time"
)

// Leases: Acquire (single-flight: one start however many wait), the queue of
// max_concurrent, and the lease's return, which arms the idle timer.

// TryAcquire returns a lease at once if the engine is ready and has a free
// place (max_concurrent), nil otherwise. It never waits and never starts
// anything: the fast path of a request.
func (e *Engine) TryAcquire() *Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != Ready || e.closed {
		return nil
	}
	var p *place
	if e.lim != nil { // nil only in tests that build an Engine by hand: New always makes one
		if p = e.lim.tryTake(); p == nil {
			return nil
		}
	}
	l := e.leaseLocked()
	l.place = p
	return l
}

// leaseLocked hands out a lease on a ready engine. Call with mu held.
func (e *Engine) leaseLocked() *Lease {
	if e.leases == 0 {
		e.freshUse = true // a new use: its requests' priorities make the engine's
	}
	e.leases++
	if e.idleTimer != nil {
		e.idleGen++ // a pending idle stop is now stale
		e.idleTimer.Stop()
	}
	return &Lease{e: e, base: e.base, slot: -1}
}

// Peek returns where the engine answers if it is ready (and not down),
// without a lease: for serving as another engine's fallback, which the
// gateway never starts, leases or drains.
func (e *Engine) Peek() *url.URL {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != Ready || e.closed || e.down.Load() {
		return nil
	}
	return e.base
}

// Borrow is Peek for a request that the engine serves as a fallback: where
// it answers, and one of its max_concurrent places, held until Release (a
// fallback's limit holds for the requests that fall back to it too). It is
// no lease: the engine is never kept up or drained for it. It returns nil
// when the engine is not ready (or down), and a *BusyError at once when
// every place is taken: a fallback is no place to queue.
func (e *Engine) Borrow() (*Lease, error) {
	e.mu.Lock()
	if e.state != Ready || e.closed || e.down.Load() {
		e.mu.Unlock()
		return nil, nil
	}
	l := &Lease{e: e, base: e.base, borrowed: true, slot: -1}
	if e.lim != nil {
		l.place = e.lim.tryTake()
	}
	e.mu.Unlock()
	if e.lim != nil && l.place == nil {
		e.busy(BusyQueueFull)
		return nil, e.busyError(0)
	}
	return l, nil
}

// Busy reports whether every place of the engine's max_concurrent is taken
// (never, without a limit): a request sent to it now would queue.
func (e *Engine) Busy() bool { return e.lim != nil && e.lim.full() }

// Release gives the lease back; calling it again does nothing.
func (l *Lease) Release() {
	l.once.Do(func() {
		if !l.borrowed {
			l.e.release()
		}
		if l.slot >= 0 {
			l.e.slots.done(l.slot)
		}
		if l.place != nil {
			l.e.lim.give(l.place)
		}
	})
}

// Acquire returns a lease on the engine once it is ready. A stopped engine is
// started when wake allows it; concurrent callers share one start. A caller
// whose ctx ends stops waiting without affecting the start. If the start it
// waited for fails, Acquire returns that start's *StartError; the next call
// tries a fresh start.
//
// The caller first takes a place of max_concurrent (DefaultMaxConcurrent
// without one): it may wait in the engine's queue (leaving it at once when
// ctx ends), and gets a *BusyError when the queue is full or its wait runs
// out.
func (e *Engine) Acquire(ctx context.Context, wake bool) (*Lease, error) {
	if e.lim == nil {
		return e.acquire(ctx, wake)
	}
	p, err := e.takePlace(ctx)
	if err != nil {
		return nil, err
	}
	l, err := e.acquire(ctx, wake)
	if err != nil {
		e.lim.give(p)
		return nil, err
	}
	l.place = p
	return l, nil
}

// takePlace takes a place of the engine's limit, and says so to the
// observer.
func (e *Engine) takePlace(ctx context.Context) (*place, error) {
	p, waited, queued, why, err := e.lim.take(ctx)
	if queued {
		outcome := QueueServed
		switch {
		case why == BusyQueueTimeout:
			outcome = QueueTimedOut
		case p == nil:
			outcome = QueueLeft
		}
		if qo, ok := e.obs.(QueueObserver); ok {
			qo.EngineQueueWait(e.cfg.Name, waited, outcome)
		}
	}
	if why != "" {
		e.busy(why)
		return nil, e.busyError(waited)
	}
	return p, err
}

// busy tells the observer of a refusal.
func (e *Engine) busy(why BusyReason) {
	if qo, ok := e.obs.(QueueObserver); ok {
		qo.EngineBusy(e.cfg.Name, why)
	}
}

func (e *Engine) busyError(waited time.Duration) *BusyError {
	return &BusyError{Engine: e.cfg.Name, MaxConcurrent: e.lim.max, Default: e.cfg.MaxConcurrent == 0, Queue: e.cfg.Queue,
		Waited: waited, RetryAfter: e.lim.retryAfter()}
}

// acquire is Acquire without the limit.
func (e *Engine) acquire(ctx context.Context, wake bool) (*Lease, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var waitedFor uint64
	for {
		if e.closed {
			return nil, ErrClosed
		}
		switch e.state {
		case Ready:
			l := e.leaseLocked()
			prio, _ := PriorityOf(ctx)
			e.notePrio(prio)
			return l, nil
		case Stopped:
			if waitedFor != 0 && waitedFor == e.startSeq && e.lastErr != nil {
				return nil, e.lastErr
			}
			if !wake {
				return nil, ErrNotRunning
			}
			e.noteStarter(ctx)
			e.beginStart(startWhy(ctx))
			waitedFor = e.startSeq
		case Sleeping:
			if !wake {
				return nil, ErrNotRunning
			}
			e.waking = true
			e.noteStarter(ctx)
			e.beginStart("wake: " + startWhy(ctx))
			waitedFor = e.startSeq
		case Starting:
			if waitedFor == 0 {
				waitedFor = e.startSeq
			}
		}
		prio, _ := PriorityOf(ctx)
		e.waiting++
		if e.waitPrios == nil {
			e.waitPrios = map[int]int{}
		}
		e.waitPrios[prio]++
		if e.state == Starting {
			e.pokeBoxes()
		}
		err := e.wait(ctx)
		e.waiting--
		if e.waitPrios[prio]--; e.waitPrios[prio] == 0 {
			delete(e.waitPrios, prio)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (e *Engine) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leases--
	if e.leases > 0 {
		return
	}
	e.lastUsed = e.now()
	if e.state == Draining {
		e.broadcast() // the drain is waiting for this
		return
	}
	e.pokeBoxes() // idle now: a start waiting for room may stop it
	e.armIdle()
}

// Start starts the engine if it is stopped and waits until it is ready,
// whatever the wake policy (the admin API's start). It takes no place of
// max_concurrent: it sends no request.
func (e *Engine) Start(ctx context.Context) error {
	l, err := e.acquire(context.WithValue(ctx, whyKey{}, "admin start"), true)
	if err != nil {
		return err
	}
	l.Release()
	return nil
}
