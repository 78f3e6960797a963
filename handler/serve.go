package handler

import (
	"fmt"
	"net/http"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// New builds a gateway for cfg over the given engines, which must include
// one per cfg.Engines entry, by name.
//
// cfg must have passed Validate: the caller validates once, before it
// builds the engines.
func New(cfg config.Config, engs []*engines.Engine, log *zap.Logger) (*Gateway, error) {
	if log == nil {
		log = zap.NewNop()
	}
	cfg = cfg.WithDefaults() // every default, in one place
	g := &Gateway{
		clock:              clock.Real,
		log:                log,
		who:                keys.Who{Ring: keys.NewRing(config.SplitKeys(cfg.Keys)), Identities: keys.NewIdentities(cfg.Identity)},
		maxBody:            cfg.MaxBody,
		bodies:             &bodyBudget{limit: cfg.MaxBodyInFlight},
		bodyTimeout:        time.Duration(cfg.BodyTimeout),
		byModel:            map[string]*route{},
		allowBodyFallbacks: *cfg.BodyFallbacks,
		listAliases:        cfg.ListAliases,
		maxFallbacks:       cfg.MaxFallbacks,
		maxAttempts:        cfg.MaxAttempts,
		annotate:           cfg.AnnotateResponse,
		traceContent:       cfg.TraceContent,
		extraPaths:         map[string]bool{},
		passthrough:        *cfg.Passthrough,
		ptMethods:          cfg.PassthroughMethods,
		ptBudgets:          cfg.PassthroughBudgets,
		keepAlive:          time.Duration(cfg.KeepAlive),
	}
	for _, p := range *cfg.ExtraPaths {
		g.extraPaths[p] = true
	}
	g.expectIssued(cfg)
	g.book = newBook(cfg)
	g.teams = keys.NewTeams(cfg.Teams)
	g.webhook = newBudgetWebhook(cfg.BudgetWebhook, log) // budgetwebhook.go
	byName := map[string]*engines.Engine{}
	for _, e := range engs {
		byName[e.Name()] = e
	}
	wakeAll := *cfg.Wake
	templates := map[string]engines.Config{} // of pools with a source: no route (dynamic.go)
	for _, ec := range cfg.Engines {
		if cfg.Templates()[ec.Name] {
			templates[ec.Name] = ec
			continue
		}
		e := byName[ec.Name]
		if e == nil {
			return nil, fmt.Errorf("engine %s has no runtime", ec.Name)
		}
		rt := &route{eng: e, cfg: e.Config(), wake: wakeAll}
		rt.filters = filtersOf(rt.cfg)
		rt.provider = rt.cfg.Provider
		for _, f := range rt.filters {
			g.filterPaths = append(g.filterPaths, f.Path)
		}
		if ec.Wake != nil {
			rt.wake = *ec.Wake
		}
		g.routes = append(g.routes, rt)
		for _, m := range ec.Models {
			g.byModel[m] = rt
		}
	}
	byRoute := map[string]*route{}
	for _, rt := range g.routes {
		byRoute[rt.cfg.Name] = rt
	}
	g.byName = byRoute
	for _, rt := range g.routes {
		rt.fallback = byRoute[rt.cfg.Fallback]
		if rt.cfg.ContextFallback != "" {
			name, model, _ := strings.Cut(rt.cfg.ContextFallback, "/")
			rt.contextFallback, rt.contextModel = byRoute[name], model
		}
		rt.plan = buildPlan(rt)
	}
	g.pools = map[string]*pool{}
	for _, pc := range cfg.Pools {
		p := newPool(pc, byRoute, g.now)
		g.makeDynamic(p, templates[pc.Template], wakeAll, byRoute)
		g.pools[pc.Name] = p
		g.poolList = append(g.poolList, p)
	}
	if len(g.poolList) > 0 && g.pools[config.DefaultPool] == nil {
		g.pools[config.DefaultPool] = g.poolList[0]
	}
	return g, nil
}

// ServeHTTP serves the request if it is the gateway's (a path under /v1/)
// and reports false otherwise, leaving the response untouched for the next
// handler.
//
// The result is filled in as the request goes, so that a caller can read it
// in a deferred function even when the response was aborted (a stream cut
// after commit ends with panic(http.ErrAbortHandler)).
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, res *Result) bool {
	p := r.URL.Path
	kind := g.pathKind(p, r.Method)
	if kind == notOurs {
		return false
	}
	start := g.clock.Now()
	res.Start = start
	res.Handled = true
	res.op = operationOf(p, kind == passthroughPath)
	res.API = res.op.api().String()
	res.body.b = g.bodies
	defer res.body.release()
	defer func() {
		now := g.clock.Now()
		res.Duration = now.Sub(start)
		res.ended(now)
		if res.Status == 0 && r.Context().Err() != nil {
			res.Status = StatusClientClosed // as Caddy's access log says it
		}
	}()
	clean := p
	if kind == passthroughPath {
		clean = strings.TrimSuffix(p, "/") // an engine's UI is at /upstream/<model>/
	}
	if !config.CleanPath(clean) {
		res.refuse(w, apierror.BadRequest("invalid_path", "the request path must not contain '.', '..' or empty segments"))
		return true
	}
	kr, gerr := g.who.Check(r)
	if gerr != nil {
		res.refuse(w, gerr)
		return true
	}
	if kr != nil {
		res.KeyName = kr.Name
	}
	res.key = kr
	if kind == v1Path && !isModels(p, r.Method) {
		if res.route, gerr = g.mayRoute(p, kr); gerr != nil { // v1routes.go
			res.refuse(w, gerr)
			return true
		}
	}
	switch {
	case kind == passthroughPath:
		g.servePassthrough(w, r, res)
	case kind == extraPath:
		g.serveRouted(w, r, res)
	case isModels(p, r.Method):
		if gerr := g.reserveRate(w, kr, res); gerr != nil {
			res.refuse(w, gerr)
			return true
		}
		if p == "/v1/models" {
			g.serveModels(w, r, kr)
			res.Status = http.StatusOK
		} else {
			res.Status = g.serveModel(w, r, strings.TrimPrefix(p, "/v1/models/"), kr)
		}
	case r.Method == http.MethodPost:
		g.serveRouted(w, r, res)
	default:
		w.Header().Set("Allow", "POST")
		res.refuse(w, &apierror.Error{Status: http.StatusMethodNotAllowed, Type: apierror.TypeInvalidRequest, Code: "method_not_allowed", Message: fmt.Sprintf("%s %s is not served: the gateway routes POST requests with a JSON body under /v1/ and GET /v1/models", r.Method, p)})
	}
	return true
}

// isModels reports whether a request lists models: GET (or HEAD)
// /v1/models or /v1/models/<id>.
func isModels(p, method string) bool {
	return (method == http.MethodGet || method == http.MethodHead) &&
		(p == "/v1/models" || strings.HasPrefix(p, "/v1/models/"))
}
