package handler

import (
	"slices"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// When a request hedges: the decisions of a hedged request (race.go runs
// it). A hedge starts the next candidate beside an attempt that has given
// no content after hedge_after; the first content wins. These are the
// delay (a fixed one, or auto: from the engine's first-token times), the
// budget that keeps a slow engine from doubling the upstream spend, and
// who is never hedged.

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

// hedgeOf is the hedge that applies to candidate c of req: its pool's for
// a pool member, else its engine's; nil when the request is never hedged
// (its key says hedge off) or c's scope does not hedge.
func (g *Gateway) hedgeOf(req *request, c candidate) (*engines.Hedge, *hedgeBudget) {
	if req.key != nil && req.key.NoHedge {
		return nil, nil
	}
	if c.role == rolePool {
		if p := g.pools[req.pool]; p != nil && p.cfg.Hedge.On() {
			return p.cfg.Hedge, &p.hedges
		}
		return nil, nil
	}
	if h := c.rt.cfg.Hedge; h.On() {
		return h, &c.rt.hedges
	}
	return nil, nil
}

// hedges reports whether any candidate of the plan may hedge: only then
// does the request run its attempts as a race (a request that cannot
// hedge keeps the plain walk, on its own goroutine).
func (g *Gateway) hedges(req *request, plan []candidate) bool {
	if len(plan) < 2 && len(req.fallbacks) == 0 {
		return false
	}
	for _, c := range plan {
		if h, _ := g.hedgeOf(req, c); h != nil {
			return true
		}
	}
	return false
}

// hedgeDelay is how long c's attempt may go without content before the
// next candidate starts beside it.
func hedgeDelay(h *engines.Hedge, rt *route) time.Duration {
	if !h.Auto {
		return time.Duration(h.After)
	}
	return rt.firsts.auto()
}

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

// hedgeBudget counts the requests of one scope (an engine, a pool) that
// may hedge and the hedges they started, per minute: a hedge may start
// while the hedges of this minute and the last are below the budget's
// share of their requests, and one a minute always may.
type hedgeBudget struct {
	mu                      sync.Mutex
	window                  time.Time // the start of this minute's counts
	requests, hedges        int
	lastRequests, lastHedge int
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

// take reports whether a hedge may start, and counts it if so.
func (b *hedgeBudget) take(now time.Time, share float64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.roll(now)
	hedges := b.hedges + b.lastHedge
	if hedges > 0 && float64(hedges) >= share*float64(b.requests+b.lastRequests) {
		return false
	}
	b.hedges++
	return true
}
