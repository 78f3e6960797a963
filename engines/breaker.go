package engines

import (
	"sync"
	"time"
)

// BreakerState is where a circuit breaker is.
type BreakerState int

// The states: closed lets everything through; open keeps requests away for
// the cool-down; half-open has let exactly one trial request through and
// waits for its outcome.
const (
	BreakerClosed BreakerState = iota
	BreakerOpen
	BreakerHalfOpen
)

func (s BreakerState) String() string {
	switch s {
	case BreakerOpen:
		return "open"
	case BreakerHalfOpen:
		return "half-open"
	}
	return "closed"
}

// Breaker counts consecutive failures of one upstream. After threshold of
// them it opens: requests go elsewhere without touching the upstream. After
// the cool-down it lets one trial request through; that request's success
// closes it, its failure opens it again for another cool-down.
type Breaker struct {
	threshold int
	cooldown  time.Duration
	now       func() time.Time

	mu       sync.Mutex
	state    BreakerState
	failures int
	openedAt time.Time
}

// NewBreaker makes a closed breaker. now may be nil (time.Now).
func NewBreaker(threshold int, cooldown time.Duration, now func() time.Time) *Breaker {
	if now == nil {
		now = time.Now
	}
	if threshold <= 0 {
		threshold = DefaultBreakerFails
	}
	return &Breaker{threshold: threshold, cooldown: cooldown, now: now}
}

// Allow reports whether a request may go to the upstream now, and whether
// it is the trial request of a half-open breaker. Every allowed request must
// be followed by exactly one Success, Failure or Abandon.
func (b *Breaker) Allow() (ok, trial bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true, false
	case BreakerOpen:
		if b.now().Sub(b.openedAt) < b.cooldown {
			return false, false
		}
		b.state = BreakerHalfOpen
		return true, true
	}
	return false, false // half-open: the trial is still out
}

// Success records a good answer: the breaker closes.
func (b *Breaker) Success() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.state, b.failures = BreakerClosed, 0
}

// Failure records a failure: a trial's failure, or the threshold's, opens it.
func (b *Breaker) Failure() {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.failures++
	if b.state == BreakerHalfOpen || b.failures >= b.threshold {
		b.state, b.openedAt = BreakerOpen, b.now()
	}
}

// Abandon records an allowed request that told nothing about the upstream's
// health (the client left, the request was the caller's fault): a trial
// goes back to open without a new cool-down, so the next request is the
// trial instead.
func (b *Breaker) Abandon(trial bool) {
	if !trial {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state == BreakerHalfOpen {
		b.state = BreakerOpen
		b.openedAt = b.now().Add(-b.cooldown)
	}
}

// Ready reports, without changing anything, whether Allow would let a
// request through now: closed, or open with the cool-down over.
func (b *Breaker) Ready() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state {
	case BreakerClosed:
		return true
	case BreakerOpen:
		return b.now().Sub(b.openedAt) >= b.cooldown
	}
	return false
}

// State is the breaker's state now; an open breaker whose cool-down has
// passed still reads open until a request tries it.
func (b *Breaker) State() BreakerState {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.state
}

// RetryIn is how long an open breaker keeps requests away from now on.
func (b *Breaker) RetryIn() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.state != BreakerOpen {
		return 0
	}
	return max(0, b.cooldown-b.now().Sub(b.openedAt))
}
