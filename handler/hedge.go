package handler

import (
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// When a request hedges: the decisions of a hedged request (race.go runs
// it). A hedge starts the next candidate beside an attempt that has given
// no content after hedge_after; the first content wins. These are the
// delay (a fixed one, or auto: from the engine's first-token times), the
// budget that keeps a slow engine from doubling the upstream spend, and
// who is never hedged.

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
