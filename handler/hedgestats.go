package handler

import (
	"slices"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// What hedging keeps of an engine and a pool (hedge.go decides with it):
// their times to first content, for hedge_after auto, and their budget of
// hedges. A file of its own that knows nothing else of the package, so
// that the route and the pool can hold these without a cycle.

// hedgeAutoDefault is hedge_after auto's delay while an engine has too few
// first tokens to go by (fewer than hedgeAutoMin).
const (
	hedgeAutoDefault = time.Second
	hedgeAutoMin     = 20
	// hedgeAutoSamples is how many of an engine's latest first-token
	// times auto goes by; hedgeAutoEvery how often its percentile is
	// computed again.
	hedgeAutoSamples = 256
	hedgeAutoEvery   = 16
)

// firstTokens are an engine's latest times from sending a request to its
// first content, for hedge_after auto.
type firstTokens struct {
	mu    sync.Mutex
	ring  []time.Duration
	n     int           // samples taken in all
	delay time.Duration // the last computed delay; 0 until hedgeAutoMin
}

// add takes one time to first content.
func (ft *firstTokens) add(d time.Duration) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if len(ft.ring) < hedgeAutoSamples {
		ft.ring = append(ft.ring, d)
	} else {
		ft.ring[ft.n%hedgeAutoSamples] = d
	}
	ft.n++
	if ft.n >= hedgeAutoMin && (ft.delay == 0 || ft.n%hedgeAutoEvery == 0) {
		s := slices.Clone(ft.ring)
		slices.Sort(s)
		// the 99th percentile: a healthy engine's requests are hedged
		// about once in a hundred, and the budget caps the rest
		ft.delay = max(s[(len(s)*99)/100], engines.HedgeAutoFloor)
	}
}

// auto is hedge_after auto's delay: the 99th percentile of the engine's
// latest first-token times, at least engines.HedgeAutoFloor; one second
// until it has hedgeAutoMin of them.
func (ft *firstTokens) auto() time.Duration {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	if ft.delay == 0 {
		return hedgeAutoDefault
	}
	return ft.delay
}

// The hedge budget's floor: a bucket of hedgeFloorBurst hedges that may
// start beyond the share of requests, one more every hedgeFloorEvery.
// Without it a quiet gateway's share is a fraction of a hedge, and a
// silent request right after a hedged one waits its whole first token; with
// it a slow engine is still sent at most three more hedges at once and
// three a minute beyond the share (docs/failover.md says what each floor
// measured).
const (
	hedgeFloorBurst = 3
	hedgeFloorEvery = 20 * time.Second
)

// hedgeBudget counts the requests of one scope (an engine, a pool) that
// may hedge and the hedges they started, per minute: a hedge may start
// while the hedges of this minute and the last are below the budget's
// share of their requests, and beyond it while the floor has a hedge left.
type hedgeBudget struct {
	mu                      sync.Mutex
	window                  time.Time // the start of this minute's counts
	requests, hedges        int
	lastRequests, lastHedge int
	floor                   float64   // the floor's hedges left (a token bucket)
	filled                  time.Time // when floor was last brought up to date; zero: full
}

// roll moves the counts on to the minute of now.
func (b *hedgeBudget) roll(now time.Time) {
	switch since := now.Sub(b.window); {
	case since < time.Minute:
	case since < 2*time.Minute:
		b.lastRequests, b.lastHedge = b.requests, b.hedges
		b.requests, b.hedges, b.window = 0, 0, b.window.Add(time.Minute)
	default:
		b.lastRequests, b.lastHedge, b.requests, b.hedges, b.window = 0, 0, 0, 0, now
	}
}

// request counts a request that may hedge.
func (b *hedgeBudget) request(now time.Time) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	b.requests++
}

// take reports whether a hedge may start, and counts it if so: within the
// share of the requests of this minute and the last, else from the floor.
func (b *hedgeBudget) take(now time.Time, share float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	if float64(b.hedges+b.lastHedge) >= share*float64(b.requests+b.lastRequests) && !b.fromFloor(now) {
		return false
	}
	b.hedges++
	return true
}

// fromFloor takes a hedge from the floor's bucket, if it has one.
func (b *hedgeBudget) fromFloor(now time.Time) bool {
	if b.filled.IsZero() {
		b.floor = hedgeFloorBurst
	} else {
		b.floor = min(hedgeFloorBurst, b.floor+float64(now.Sub(b.filled))/float64(hedgeFloorEvery))
	}
	b.filled = now
	if b.floor < 1 {
		return false
	}
	b.floor--
	return true
}
