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
	brk     *engines.Breaker // a pool member's own breaker; nil: the engine's
	label   string           // how attempts name it; "": the engine's name
}

// breaker guards this candidate: a pool member's own, else its engine's.
func (c *candidate) breaker() *engines.Breaker {
	if c.brk != nil {
		return c.brk
	}
	return c.rt.eng.Breaker()
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
// the engine, then its fallback. The loop that walks a plan may insert a
// context fallback; nothing else changes it.
func buildPlan(rt *route) []candidate {
	p := []candidate{{rt: rt, model: rt.cfg.ModelName, role: rolePrimary, acquire: true}}
	if rt.fallback != nil {
		p = append(p, candidate{rt: rt.fallback, model: rt.cfg.FallbackModel, role: roleFallback})
	}
	return p
}

// withContextFallback returns the plan with the context fallback of the
// failed candidate inserted after position i, once.
func withContextFallback(plan []candidate, i int) []candidate {
	rt := plan[i].rt
	if rt.contextFallback == nil {
		return plan
	}
	for _, c := range plan {
		if c.role == roleContext {
			return plan
		}
	}
	c := candidate{rt: rt.contextFallback, model: rt.contextModel, role: roleContext, acquire: true}
	out := make([]candidate, 0, len(plan)+1)
	out = append(out, plan[:i+1]...)
	out = append(out, c)
	return append(out, plan[i+1:]...)
}
