package handler

import (
	"slices"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Spend-aware routing (docs/pools.md#prefer-cheap, docs/keys.md#spend-aware-routing).
// A pool with `prefer cheap` tries its members cheapest first, and so does
// every pool for a key whose `spend 10/d cheap_at 80%` share is passed:
// such a key moves to the local engines before its budget refuses it, or
// sends it to its over_budget fallback. The hook is preferCheap, which
// servePool (routing.go) asks once its pool has planned.
//
// A member's price is the book's for its engine and the model it is sent
// (spend.go: a price line, the built-in table; a local engine is free
// unless priced), input and output per million tokens added up: what a
// typical request pays. The plan holds only the members able to serve
// (healthy, breaker closed); among them the cheapest go first, whatever
// their readiness (a stopped local engine is started rather than a ready
// cloud one paid), and members of one price keep the pool's own order
// (session, affinity, load or rotation). The dearer members stay in the
// plan behind: a failover still reaches them.

// ChoiceCheap is the pool choice of a request whose first member was
// moved there by its price.
const ChoiceCheap = "cheap"

// preferCheap orders a pool's plan cheapest first when the pool prefers
// cheap or the request's key is past its cheap_at; else it leaves it as
// it is.
func (g *Gateway) preferCheap(req *request, p *pool, plan []candidate, res *Result) []candidate {
	if len(plan) < 2 || p.cfg.Prefer != config.PreferCheap && !pastCheapAt(req.key, req.spendLeft) {
		return plan
	}
	first := plan[0].name()
	cheapFirst(plan, func(c *candidate) price.Rate { return blended(g.book.Of(c.rt.cfg.Name, c.model).Price) })
	if res != nil && plan[0].name() != first {
		res.PoolChoice = ChoiceCheap
	}
	return plan
}

// cheapFirst sorts plan by price, stably: ties keep their order.
func cheapFirst(plan []candidate, priceOf func(*candidate) price.Rate) {
	prices := make(map[string]price.Rate, len(plan)) // each member's once: a lookup per comparison adds up
	for i := range plan {
		prices[plan[i].name()] = priceOf(&plan[i])
	}
	slices.SortStableFunc(plan, func(a, b candidate) int {
		pa, pb := prices[a.name()], prices[b.name()]
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
}

// blended is what a price is compared by: input and output per million
// tokens added up.
func blended(p price.Price) price.Rate { return p.Input + p.Output }

// pastCheapAt reports whether a request takes its key's spend past the
// key's cheap_at share of its money budget: spent, with what requests in
// flight hold, this one's reservation included (left: the tighter of the
// key's and its team's, as the door admitted it).
func pastCheapAt(kr *keys.Rules, left quota.Headroom) bool {
	if kr == nil || kr.CheapAt <= 0 || left.Limit <= 0 {
		return false
	}
	used := left.Limit - left.Remaining
	return float64(used) >= float64(left.Limit)*float64(kr.CheapAt)/100
}
