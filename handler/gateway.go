// Package handler is one request's path through the gateway: read the body,
// pick a plan of candidates, attempt them in order, stream the answer, and
// make an OpenAI-shaped error when there is none.
package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// StatusClientClosed is the status recorded for a request whose client went
// away before an answer (nginx's and Caddy's access logs say 499 too).
const StatusClientClosed = 499

// family is the API family an engine must speak to serve req: its API's,
// or "embeddings" for an embeddings request, which an embedding engine
// (api embeddings) serves as well as an OpenAI one.
func (req *request) family() string {
	switch req.r.URL.Path {
	case "/v1/embeddings", "/embeddings", "/embedding":
		return "embeddings"
	}
	return req.api.Family()
}

// route is how requests reach one engine.
type route struct {
	eng             *engines.Engine
	cfg             engines.Config // with defaults
	wake            bool
	fallback        *route
	contextFallback *route
	contextModel    string
	plan            []candidate
	filters         []jsonmember.Filter // set and strip
}

// Gateway serves requests for one handler instance. It holds no engine
// itself: engines are given to it (the caddy module keeps them across
// reloads).
type Gateway struct {
	log       *zap.Logger
	keys      *keys.Ring
	maxBody   int64
	keepAlive time.Duration
	dropped   atomic.Int64      // malformed events dropped
	routes    []*route          // in config order
	byModel   map[string]*route // every model name and alias
	byName    map[string]*route // every engine
	pools     map[string]*pool  // by name, and "auto" for the default pool
	poolList  []*pool
	annotate  bool
	// listAliases: /v1/models lists every name of an engine, not one
	listAliases bool

	extraPaths  map[string]bool
	filterPaths [][]string // every engine's set and strip paths: spelled one way only
	passthrough bool
	ptMethods   []string // the methods /upstream/ serves
	ptBudgets   bool     // keys with a token budget may use /upstream/

	allowBodyFallbacks bool
	maxFallbacks       int
	maxAttempts        int
	listing            listing
	clock              clock.Clock
	limiter            *quota.Limiter

	// Hooks are set by the caddy module, before serving, to count events.
	Hooks Hooks
}

// New builds a gateway for cfg over the given engines, which must include
// one per cfg.Engines entry, by name.
//
// cfg must have passed Validate: the caller validates once, before it
// builds the engines.
func New(cfg config.Config, engs []*engines.Engine, log *zap.Logger) (*Gateway, error) {
	if log == nil {
		log = zap.NewNop()
	}
	g := &Gateway{
		clock:   clock.Real,
		log:     log,
		keys:    keys.NewRing(config.SplitKeys(cfg.Keys)),
		maxBody: cfg.MaxBody,
		byModel: map[string]*route{},
	}
	if g.maxBody == 0 {
		g.maxBody = config.DefaultMaxBody
	}
	g.allowBodyFallbacks = cfg.BodyFallbacks == nil || *cfg.BodyFallbacks
	g.listAliases = cfg.ListAliases
	g.maxFallbacks, g.maxAttempts = cfg.MaxFallbacks, cfg.MaxAttempts
	if g.maxFallbacks == 0 {
		g.maxFallbacks = config.DefaultMaxFallbacks
	}
	if g.maxAttempts == 0 {
		g.maxAttempts = config.DefaultMaxAttempts
	}
	g.annotate = cfg.AnnotateResponse
	extra := config.DefaultExtraPaths
	if cfg.ExtraPaths != nil {
		extra = *cfg.ExtraPaths
	}
	g.extraPaths = map[string]bool{}
	for _, p := range extra {
		g.extraPaths[p] = true
	}
	g.passthrough = cfg.Passthrough == nil || *cfg.Passthrough
	g.ptMethods, g.ptBudgets = cfg.PassthroughMethods, cfg.PassthroughBudgets
	if len(g.ptMethods) == 0 {
		g.ptMethods = DefaultPassthroughMethods
	}
	g.keepAlive = time.Duration(cfg.KeepAlive)
	if g.keepAlive <= 0 {
		g.keepAlive = config.DefaultKeepAlive
	}
	byName := map[string]*engines.Engine{}
	for _, e := range engs {
		byName[e.Name()] = e
	}
	wakeAll := cfg.Wake == nil || *cfg.Wake
	for _, ec := range cfg.Engines {
		e := byName[ec.Name]
		if e == nil {
			return nil, fmt.Errorf("engine %s has no runtime", ec.Name)
		}
		rt := &route{eng: e, cfg: e.Config(), wake: wakeAll}
		rt.filters = filtersOf(rt.cfg)
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
		g.pools[pc.Name] = p
		g.poolList = append(g.poolList, p)
	}
	if len(g.poolList) > 0 && g.pools[config.DefaultPool] == nil {
		g.pools[config.DefaultPool] = g.poolList[0]
	}
	return g, nil
}

// SetClock sets the clock of the gateway's budgets, back-offs and waits (a
// FakeClock in tests); call it before serving.
func (g *Gateway) SetClock(c clock.Clock) { g.clock = c }

// Result says what happened to a request, for the caddy module's
// placeholders and access logs.
type Result struct {
	Engine     string    // the engine that answered, "" if none did
	ModelAsked string    // the body's model
	ModelSent  string    // what the answering engine was sent
	Attempts   int       // upstream attempts made
	KeyName    string    // the name of the caller's key, if named
	Fallback   string    // the fallback that answered, if one did
	Status     int       // the status the client got
	Start      time.Time // when the gateway took the request
	TTFB       time.Duration
	Duration   time.Duration
	Usage      grammar.Usage // tokens, when the answer reported them
	HasUsage   bool
	Known      bool   // ModelAsked names a model or pool of this gateway
	Handled    bool   // the gateway served the request (a path under /v1/)
	Refused    string // the caller's key rules refused it: "rate" or "tokens"
	Tries      []Try  // the request's story: each upstream attempt (story.go)
	Pool       string // the pool that chose the member, if one did
	PoolChoice string // why it chose its first member: session, affinity, load, rotation (pool.go)

	api apierror.API // the request's API family, for the shape of refusals
	key *keys.Rules  // the caller's key's rules, nil for none
}

// Hooks let the caddy module count what happens inside a request; nil
// fields are skipped. They run on the request's goroutine: keep them cheap.
type Hooks struct {
	// Fallback: a fallback answered instead of engine; reason is one of
	// slow_start, breaker, failure, context, body, busy, over_budget.
	Fallback func(engine, fallback, reason string)
	// Retry: engine is tried again after a transient failure.
	Retry func(engine string)
	// Replay: a pool request moves on to its next member.
	Replay func(pool string)
	// Dropped: engine sent a data event that was not JSON.
	Dropped func(engine string)
	// Resume: a cut stream of engine was (outcome "ok") or could not be
	// ("failed") continued on its fallback.
	Resume func(engine, fallback, outcome string)
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
	res.api = apierror.Of(p)
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
	kr, ok := g.keys.Check(r)
	if !ok {
		res.refuse(w, &apierror.Error{Status: http.StatusUnauthorized, Type: apierror.TypeAuthentication, Code: "invalid_api_key", Message: "missing or invalid gateway key: send it as 'Authorization: Bearer <key>'"})
		return true
	}
	if kr != nil {
		res.KeyName = kr.Name
	}
	res.key = kr
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

// refuse answers with an error of the gateway's own.
func (res *Result) refuse(w http.ResponseWriter, e *apierror.Error) {
	e.WriteAs(w, res.api)
	res.Status = e.Status
	if e.Code == "model_not_allowed" {
		res.Refused = "model" // however the key's list was met: model, fallbacks, /upstream/
	}
}

// filtersOf parses an engine's filters; the config was validated, so every
// path is well formed and every value is JSON.
func filtersOf(cfg engines.Config) []jsonmember.Filter {
	var fs []jsonmember.Filter
	for _, p := range cfg.Strip {
		fs = append(fs, jsonmember.Filter{Path: strings.Split(p, ".")})
	}
	for _, s := range cfg.Set {
		fs = append(fs, jsonmember.Filter{Path: strings.Split(s.Path, "."), Value: []byte(s.Value)})
	}
	return fs
}

// isModels reports whether a request lists models: GET (or HEAD)
// /v1/models or /v1/models/<id>.
func isModels(p, method string) bool {
	return (method == http.MethodGet || method == http.MethodHead) &&
		(p == "/v1/models" || strings.HasPrefix(p, "/v1/models/"))
}

// now is the gateway's clock's time, read at each call: breakers made in New
// follow a clock set later by SetClock.
func (g *Gateway) now() time.Time { return g.clock.Now() }
