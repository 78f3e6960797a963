package handler

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
)

// Routing: which of the gateway's paths a request is on, and which engine,
// pool or plan serves its model.

// pathKind says which of the gateway's paths p is.
type pathKind int

const (
	notOurs         pathKind = iota
	v1Path                   // under /v1/
	extraPath                // one of extra_paths, with a body to route by
	passthroughPath          // under /upstream/
)

func (g *Gateway) pathKind(p, method string) pathKind {
	switch {
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		return v1Path
	case g.passthrough && strings.HasPrefix(p, config.UpstreamPrefix) && len(p) > len(config.UpstreamPrefix):
		return passthroughPath
	case g.extraPaths[p] && method == http.MethodPost:
		return extraPath
	}
	return notOurs
}

func (g *Gateway) serveRouted(w http.ResponseWriter, r *http.Request, res *Result) {
	req, gerr := g.readRequest(w, r, res)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	res.ModelAsked = req.model
	req.key, req.route = res.key, res.route
	if g.traceContent {
		g.notePrompt(req, res) // tracecontent.go
	}
	req, t, gerr := g.reserve(w, req, res)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	defer g.charge(w, t, req, res)
	if t != nil {
		req.askUsage()
	}
	withPriority(req, res)
	if p := g.pools[req.model]; p != nil {
		res.Known = true
		g.servePool(w, req, p, res)
		return
	}
	rt := g.byModel[req.model]
	plan := rt.planOrNil()
	if rt == nil {
		if rt, plan = g.namedPlan(req); rt == nil {
			res.refuse(w, g.unknownModel(req.model, req.key))
			return
		}
	}
	res.Known = true
	if req.route != "" && !rt.servesRoute(req.route) {
		res.refuse(w, notServedRoute(req, rt))
		return
	}
	if _, ok := req.op.readsNow(&rt.cfg, rt.eng); !ok {
		res.refuse(w, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "model_not_found", Message: fmt.Sprintf("the model %q is not served over this API here: its engine %s speaks only %s", req.model, rt.cfg.Name, config.APIsOf(rt.cfg.APIs))})
		return
	}
	plan, perr := g.withBodyFallbacks(req, plan)
	if perr != nil {
		res.refuse(w, perr)
		return
	}
	g.run(w, req, plan, res)
}

// planOrNil is the route's plan, or nil for no route.
func (rt *route) planOrNil() []candidate {
	if rt == nil {
		return nil
	}
	return rt.plan
}

// namedPlan serves "model": "engine/model" (or a bare engine name), as
// Meridian, LiteLLM and Bifrost clients name a provider's model: the
// engine's plan with the model sent as named, which the key may use like
// any candidate (the planner checks it). A model this handler serves under
// that very name was found before: it wins.
func (g *Gateway) namedPlan(req *request) (*route, []candidate) {
	c, ok := g.named(req.model, req.key)
	if !ok {
		return nil, nil
	}
	primary := candidate{rt: c.rt, model: c.model, role: rolePrimary, acquire: true, slow: c.rt.fallback}
	plan := []candidate{primary}
	if fb := c.rt.fallback; fb != nil {
		plan = append(plan, candidate{rt: fb, model: c.rt.cfg.FallbackModel, role: roleFallback})
	}
	return c.rt, plan
}

// mayName reports whether a key may name engine/model as its request's
// model: the engine and the model it is sent are checked as for a body
// fallback (reach.go).
func (g *Gateway) mayName(kr *keys.Rules, model string) bool {
	c, ok := g.named(model, kr)
	return ok && g.mayReach(kr, c)
}

// servePool serves a request for a pool (or "auto") with its members.
func (g *Gateway) servePool(w http.ResponseWriter, req *request, p *pool, res *Result) {
	var rank func(*poolMember) int
	if p.fleet {
		f := g.fleet(req.r.Context())
		rank = func(m *poolMember) int {
			if m.rt.cfg.ModelsFrom == "" {
				return readiness(m)
			}
			return g.nodeState(f, m.rt, m.model)
		}
	}
	plan := g.preferCheap(req, p, p.plan(req, rank, res), res) // cheap.go
	if len(plan) == 0 {
		res.refuse(w, p.unavailable())
		return
	}
	req.failover = &failover{attempts: p.attempts, deadline: g.clock.Now().Add(p.failoverTime)}
	req.pool = p.cfg.Name
	plan, err := g.withBodyFallbacks(req, plan)
	if err != nil {
		res.refuse(w, err)
		return
	}
	g.run(w, req, plan, res)
}
