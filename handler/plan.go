package handler

import "github.com/llmgateway/caddy-llm-gateway/engines"

// role is why a candidate is in a plan.
type role int

const (
	rolePrimary  role = iota // the engine serving the model
	roleFallback             // the primary's `fallback`: slow start, open breaker, failure
	roleContext              // the `context_fallback` of a context-too-long 400
	roleBody                 // an item of the request's "fallbacks"
	rolePool                 // a member of a pool
)

func (r role) String() string {
	switch r {
	case roleFallback:
		return "fallback"
	case roleContext:
		return "context"
	case roleBody:
		return "body"
	case rolePool:
		return "pool"
	}
	return "primary"
}

// candidate is one way to serve a request: an engine, the model to send it,
// and whether the gateway may start and lease it (the primary) or only use it
// if it already answers (a fallback, which is never started, leased or
// drained).
type candidate struct {
	rt      *route
	model   string // the body's model is rewritten to this; "" leaves it alone
	role    role
	acquire bool
	brk     *engines.Breaker // a pool member's own breaker; nil: the engine's and its model's
	label   string           // how attempts name it; "": the engine's name
	// slow is the engine's fallback while it is slow to start: once
	// fallback_after has passed and slow answers its probe, the wait for
	// this candidate ends (outcomeSlow) and the plan moves on to slow.
	slow *route
}

// breaker is the breaker an error message speaks of: a pool member's own,
// else the one of the scope that is open.
func (c *candidate) breaker(model string) *engines.Breaker {
	if c.brk != nil {
		return c.brk
	}
	if eb := c.rt.eng.Breaker(); !eb.Ready() {
		return eb
	}
	return c.rt.eng.ModelBreaker(model)
}

// isFallback reports whether the candidate answers instead of the engine the
// client asked for (a pool member is what the client asked for).
func (c *candidate) isFallback() bool {
	return c.role == roleFallback || c.role == roleContext || c.role == roleBody
}

// name is how errors and attempt lists name the candidate.
func (c *candidate) name() string {
	if c.label != "" {
		return c.label
	}
	return c.rt.cfg.Name
}

// buildPlan is the fixed part of a route's plan, computed once at provision:
// the engine (which may leave a slow start for its fallback), then its
// fallback. The planner (loop.go) may insert a context fallback, or the
// engine again; the plan itself is never changed.
func buildPlan(rt *route) []candidate {
	p := []candidate{{rt: rt, model: rt.cfg.ModelName, role: rolePrimary, acquire: true, slow: rt.fallback}}
	if rt.fallback != nil {
		p = append(p, candidate{rt: rt.fallback, model: rt.cfg.FallbackModel, role: roleFallback})
	}
	return p
}

// contextCandidate is where a context-too-long 400 of c goes, if anywhere.
func (c *candidate) contextCandidate() (candidate, bool) {
	rt := c.rt.contextFallback
	if rt == nil {
		return candidate{}, false
	}
	return candidate{rt: rt, model: c.rt.contextModel, role: roleContext, acquire: true}, true
}

// again is c waited for once more after its fallback failed a slow start:
// without a slow fallback this time (the fallback has had its turn).
func (c candidate) again() candidate {
	c.slow = nil
	return c
}

// resumers are the candidates that may continue c's cut stream, in order:
// the engine itself, then its fallback, each only with `prefill on`.
func resumers(c candidate) []candidate {
	var out []candidate
	if c.rt.cfg.Prefills() {
		out = append(out, candidate{rt: c.rt, model: c.model, role: rolePrimary, acquire: true})
	}
	if fb := c.rt.fallback; fb != nil && fb.cfg.Prefills() {
		out = append(out, candidate{rt: fb, model: c.rt.cfg.FallbackModel, role: roleFallback})
	}
	return out
}
