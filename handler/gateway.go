// Package handler is one request's path through the gateway: read the body,
// pick a plan of candidates, attempt them in order, stream the answer, and
// make an OpenAI-shaped error when there is none.
package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/multipart"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// StatusClientClosed is the status recorded for a request whose client went
// away before an answer (nginx's and Caddy's access logs say 499 too).
const StatusClientClosed = 499

// Defaults of the handler's limits.
const (
	DefaultMaxBody      = 32 << 20
	DefaultMaxFallbacks = 4
	DefaultMaxAttempts  = 8
	// MinKeyLength is the shortest gateway key accepted: a shorter one is
	// guessable, or a placeholder that expanded to a fragment.
	MinKeyLength = 16
)

// DefaultExtraPaths are llama-server's native endpoints, which read a
// "model" from their body like the OpenAI ones.
var DefaultExtraPaths = []string{
	"/completion", "/completions", "/embedding", "/embeddings", "/rerank", "/reranking",
	"/infill", "/tokenize", "/detokenize", "/apply-template",
}

// Config is the handler's configuration: what `llm_gateway { … }` parses to
// and what the module's JSON holds.
type Config struct {
	// Keys are the bearer tokens callers must present (Authorization:
	// Bearer, X-Api-Key or Api-Key). Default: none, and then no gateway
	// authentication (a warning is logged on a public bind).
	Keys []Key `json:"keys,omitempty"`

	// MaxBody is the largest request body in bytes; a larger one is
	// answered 413. Default: 32 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// Wake says whether a request may start a stopped engine; an engine's
	// own wake overrides it. Default: true.
	Wake *bool `json:"wake,omitempty"`

	// KeepAlive is the interval of SSE comments sent to a streaming
	// request while it waits (for an engine to start, or between retries)
	// after its preamble went out. Default: 3s.
	KeepAlive caddy.Duration `json:"keepalive,omitempty"`

	// BodyFallbacks says whether a request may name its own fallbacks in
	// a "fallbacks" body field. Off, the field is still stripped, and a
	// request carrying it is refused. Default: true.
	BodyFallbacks *bool `json:"body_fallbacks,omitempty"`

	// MaxFallbacks is how many items a request's "fallbacks" may name
	// (after duplicates are removed); more is a 400 before anything is
	// sent. Default: 4.
	MaxFallbacks int `json:"max_fallbacks,omitempty"`

	// MaxAttempts bounds the upstream calls one request may cause, of
	// every kind: retries, fallbacks, pool members, body fallbacks and
	// resumes. Default: 8.
	MaxAttempts int `json:"max_attempts,omitempty"`

	// AnnotateResponse adds "extra_fields" (provider, model, latency_ms,
	// fallback_index) to non-streaming JSON answers. Default: false.
	AnnotateResponse bool `json:"annotate_response,omitempty"`

	// ExtraPaths are paths outside /v1/ that the gateway routes by the
	// body's model, as it routes /v1/: POST requests only (a GET there
	// goes on to the next handler). Default: llama-server's own endpoints,
	// DefaultExtraPaths; an empty list routes none.
	ExtraPaths *[]string `json:"extra_paths,omitempty"`

	// Passthrough serves /upstream/<model>/<path>, any method, from the
	// engine serving <model>: its web UI, /props, /slots, /metrics.
	// Default: true.
	Passthrough *bool `json:"passthrough,omitempty"`

	// Store is where the counters of the keys' rate and token limits live.
	// Default: an embedded store under Caddy's data directory, which keeps
	// them across reloads and restarts of this instance.
	Store *StoreConfig `json:"store,omitempty"`

	// Defaults sets any engine option for every engine that leaves it
	// unset (llama-swap's globalTTL and more): `defaults { idle_timeout
	// 10m }`. Not a name, models or model_name. Default: none.
	Defaults *engines.Config `json:"defaults,omitempty"`

	// Engines are the upstreams, each serving one or more models.
	Engines []engines.Config `json:"engines,omitempty"`

	// Pools are model names served by whichever member is healthy; the
	// pool named "auto" (else the first) is what "model": "auto" asks for.
	Pools []PoolConfig `json:"pools,omitempty"`
}

// StoreConfig names a shared counter store, so that several gateway
// instances enforce one budget per key.
type StoreConfig struct {
	// Redis is the address (host:port) of the Redis server.
	Redis string `json:"redis"`
	// Password authenticates to Redis; placeholders are resolved at load.
	Password string `json:"password,omitempty"`
	// DB is the Redis database number. Default: 0.
	DB int `json:"db,omitempty"`
	// Prefix starts every Redis key. Default: llm_gateway:quota.
	Prefix string `json:"prefix,omitempty"`
}

// ConfigError is a mistake in a config, with the engine or pool it is
// about, so that the Caddyfile adapter can point at that block's line.
type ConfigError struct {
	Engine string // the engine the error is about, if one
	Pool   string // the pool the error is about, if one
	Key    string // the key (by name) the error is about, if one
	Err    error
}

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

func engineErr(name string, err error) error { return &ConfigError{Engine: name, Err: err} }

func poolErr(name string, format string, args ...any) error {
	return &ConfigError{Pool: name, Err: fmt.Errorf(format, args...)}
}

// WithDefaults returns c with every default filled in: the `defaults`
// block's options, then each engine's own defaults (see
// engines.Config.WithDefaults); the handler's own defaults are read where
// they are used.
func (c Config) WithDefaults() Config {
	c = c.inherited()
	for i := range c.Engines {
		c.Engines[i] = c.Engines[i].WithDefaults()
	}
	return c
}

// inherited returns c with its engines (a copy) given the defaults block's
// options they leave unset.
func (c Config) inherited() Config {
	c.Engines = append([]engines.Config(nil), c.Engines...)
	if c.Defaults != nil {
		for i := range c.Engines {
			c.Engines[i] = c.Engines[i].Inherit(*c.Defaults)
		}
	}
	return c
}

// Validate checks the whole config, once: each engine on its own, and the
// rules that span engines and pools (unique names, each model served once,
// fallbacks that exist and do not chain). An error about one engine or pool
// is a *ConfigError naming it.
func (c Config) Validate() error {
	if c.MaxBody < 0 || c.MaxFallbacks < 0 || c.MaxAttempts < 0 {
		return fmt.Errorf("max_body, max_fallbacks and max_attempts may not be negative")
	}
	if c.ExtraPaths != nil {
		for _, p := range *c.ExtraPaths {
			if err := CheckExtraPath(p); err != nil {
				return err
			}
		}
	}
	if len(c.Engines) == 0 {
		return fmt.Errorf("llm_gateway needs at least one engine")
	}
	if c.Defaults != nil {
		if err := c.Defaults.ValidateDefaults(); err != nil {
			return err
		}
	}
	c = c.inherited()
	names := map[string]bool{}
	models := map[string]string{}
	preloads := map[string]string{} // group → the engine that preloads in it
	byName := map[string]engines.Config{}
	for _, e := range c.Engines {
		byName[e.Name] = e
	}
	for _, e := range c.Engines {
		if err := e.Validate(); err != nil {
			return engineErr(e.Name, err)
		}
		if names[e.Name] {
			return engineErr(e.Name, fmt.Errorf("engine %s is defined twice", e.Name))
		}
		names[e.Name] = true
		for _, m := range e.Models {
			if other, ok := models[m]; ok {
				return engineErr(e.Name, fmt.Errorf("model %s is served by both engine %s and engine %s", m, other, e.Name))
			}
			models[m] = e.Name
		}
		if err := validateFallbacks(e, byName); err != nil {
			return engineErr(e.Name, err)
		}
		if e.Preload && e.Group != "" {
			// one GPU runs one of them: a second preload would only evict
			// the first
			if other, ok := preloads[e.Group]; ok {
				return engineErr(e.Name, fmt.Errorf("engines %s and %s of group %s both preload, but only one engine of a group runs at a time: preload one of them", other, e.Name, e.Group))
			}
			preloads[e.Group] = e.Name
		}
	}
	for i, p := range c.Pools {
		if err := p.validate(names); err != nil {
			return &ConfigError{Pool: p.Name, Err: err}
		}
		if e, ok := models[p.Name]; ok {
			return poolErr(p.Name, "pool %s has the name of a model of engine %s", p.Name, e)
		}
		for _, q := range c.Pools[:i] {
			if q.Name == p.Name {
				return poolErr(p.Name, "pool %s is defined twice", p.Name)
			}
		}
	}
	if e, ok := models[DefaultPool]; ok && len(c.Pools) > 0 {
		return engineErr(e, fmt.Errorf("engine %s serves a model named %s, which is the default pool's sentinel", e, DefaultPool))
	}
	for _, k := range c.Keys {
		if err := CheckKey(k); err != nil {
			return err
		}
	}
	return c.validateKeyRules(models)
}

// CheckExtraPath refuses an extra path the gateway routes already, or one
// that is not a clean absolute path.
func CheckExtraPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/") || !cleanPath(p):
		return fmt.Errorf("extra_paths: %q is not a clean absolute path such as /rerank", p)
	case p == "/v1" || strings.HasPrefix(p, "/v1/"):
		return fmt.Errorf("extra_paths: %q is under /v1/, which the gateway routes already", p)
	case strings.HasPrefix(p+"/", UpstreamPrefix):
		return fmt.Errorf("extra_paths: %q is under %s, the passthrough", p, UpstreamPrefix)
	}
	return nil
}

// validateFallbacks checks an engine's fallback and context_fallback against
// the other engines of its handler: the fallback must be one of them, not the
// engine itself, and have no fallback of its own (no chains).
func validateFallbacks(e engines.Config, byName map[string]engines.Config) error {
	if e.Fallback != "" {
		fb, ok := byName[e.Fallback]
		switch {
		case ok && !speaksAll(fb, e):
			return fmt.Errorf("engine %s: its fallback %s does not speak every API it does (api %s vs %s): a request could fall back to an engine that cannot read it", e.Name, e.Fallback, apisOf(e), apisOf(fb))
		case e.Fallback == e.Name:
			return fmt.Errorf("engine %s: its fallback %s is the engine itself", e.Name, e.Fallback)
		case !ok:
			return fmt.Errorf("engine %s: its fallback %s is not an engine of this handler", e.Name, e.Fallback)
		case fb.Fallback != "":
			return fmt.Errorf("engine %s: its fallback %s has a fallback of its own (%s); fallbacks do not chain", e.Name, e.Fallback, fb.Fallback)
		}
	}
	if e.ContextFallback != "" {
		name, _, _ := strings.Cut(e.ContextFallback, "/")
		if _, ok := byName[name]; !ok {
			return fmt.Errorf("engine %s: its context_fallback %s is not an engine of this handler", e.Name, name)
		}
		if name == e.Name {
			return fmt.Errorf("engine %s: its context_fallback %s is the engine itself", e.Name, name)
		}
		if !speaksAll(byName[name], e) {
			return fmt.Errorf("engine %s: its context_fallback %s does not speak every API it does (api %s vs %s)", e.Name, name, apisOf(e), apisOf(byName[name]))
		}
	}
	return nil
}

// speaksAll reports whether fb speaks every API family e does: a fallback
// between formats is refused rather than translated (a faithful translation
// of tool use and streams between the two APIs is its own product).
func speaksAll(fb, e engines.Config) bool {
	for _, family := range []string{"openai", "anthropic"} {
		if e.Speaks(family) && !fb.Speaks(family) {
			return false
		}
	}
	return true
}

func apisOf(e engines.Config) string {
	if len(e.APIs) == 0 {
		return "openai anthropic"
	}
	return strings.Join(e.APIs, " ")
}

// family is the config's name of an API family.
func (a api) family() string {
	if a == apiAnthropic {
		return "anthropic"
	}
	return "openai"
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
	keys      *keyring
	maxBody   int64
	keepAlive time.Duration
	dropped   atomic.Int64      // malformed events dropped
	routes    []*route          // in config order
	byModel   map[string]*route // every model name and alias
	byName    map[string]*route // every engine
	pools     map[string]*pool  // by name, and "auto" for the default pool
	poolList  []*pool
	annotate  bool

	extraPaths  map[string]bool
	passthrough bool

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
func New(cfg Config, engs []*engines.Engine, log *zap.Logger) (*Gateway, error) {
	if log == nil {
		log = zap.NewNop()
	}
	g := &Gateway{
		clock:   clock.Real,
		log:     log,
		keys:    newKeyring(SplitKeys(cfg.Keys)),
		maxBody: cfg.MaxBody,
		byModel: map[string]*route{},
	}
	if g.maxBody == 0 {
		g.maxBody = DefaultMaxBody
	}
	g.allowBodyFallbacks = cfg.BodyFallbacks == nil || *cfg.BodyFallbacks
	g.maxFallbacks, g.maxAttempts = cfg.MaxFallbacks, cfg.MaxAttempts
	if g.maxFallbacks == 0 {
		g.maxFallbacks = DefaultMaxFallbacks
	}
	if g.maxAttempts == 0 {
		g.maxAttempts = DefaultMaxAttempts
	}
	g.annotate = cfg.AnnotateResponse
	extra := DefaultExtraPaths
	if cfg.ExtraPaths != nil {
		extra = *cfg.ExtraPaths
	}
	g.extraPaths = map[string]bool{}
	for _, p := range extra {
		g.extraPaths[p] = true
	}
	g.passthrough = cfg.Passthrough == nil || *cfg.Passthrough
	g.keepAlive = time.Duration(cfg.KeepAlive)
	if g.keepAlive <= 0 {
		g.keepAlive = DefaultKeepAlive
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
		p := newPool(pc, byRoute)
		g.pools[pc.Name] = p
		g.poolList = append(g.poolList, p)
	}
	if len(g.poolList) > 0 && g.pools[DefaultPool] == nil {
		g.pools[DefaultPool] = g.poolList[0]
	}
	return g, nil
}

// SetClock sets the clock of the gateway's budgets, back-offs and waits (a
// FakeClock in tests); call it before serving.
func (g *Gateway) SetClock(c clock.Clock) { g.clock = c }

// Result says what happened to a request, for the caddy module's
// placeholders and access logs.
type Result struct {
	Engine     string // the engine that answered, "" if none did
	ModelAsked string // the body's model
	ModelSent  string // what the answering engine was sent
	Attempts   int    // upstream attempts made
	KeyName    string // the name of the caller's key, if named
	Fallback   string // the fallback that answered, if one did
	Status     int    // the status the client got
	TTFB       time.Duration
	Duration   time.Duration
	Usage      Usage // tokens, when the answer reported them
	HasUsage   bool
	Known      bool   // ModelAsked names a model or pool of this gateway
	Handled    bool   // the gateway served the request (a path under /v1/)
	Refused    string // the caller's key rules refused it: "rate" or "tokens"

	api api       // the request's API family, for the shape of refusals
	key *keyRules // the caller's key's rules, nil for none
}

// Hooks let the caddy module count what happens inside a request; nil
// fields are skipped. They run on the request's goroutine: keep them cheap.
type Hooks struct {
	// Fallback: a fallback answered instead of engine; reason is one of
	// slow_start, breaker, failure, context, body.
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
	res.Handled = true
	res.api = apiOf(p)
	defer func() {
		res.Duration = g.clock.Now().Sub(start)
		if res.Status == 0 && r.Context().Err() != nil {
			res.Status = StatusClientClosed // as Caddy's access log says it
		}
	}()
	clean := p
	if kind == passthroughPath {
		clean = strings.TrimSuffix(p, "/") // an engine's UI is at /upstream/<model>/
	}
	if !cleanPath(clean) {
		res.refuse(w, errBadRequest("invalid_path", "the request path must not contain '.', '..' or empty segments"))
		return true
	}
	kr, ok := g.keys.check(r)
	if !ok {
		res.refuse(w, &Error{http.StatusUnauthorized, typeAuthentication, "invalid_api_key",
			"missing or invalid gateway key: send it as 'Authorization: Bearer <key>'"})
		return true
	}
	if kr != nil {
		res.KeyName = kr.name
	}
	res.key = kr
	switch {
	case kind == passthroughPath:
		g.servePassthrough(w, r, res)
	case kind == extraPath:
		g.serveRouted(w, r, res)
	case p == "/v1/models" && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		g.serveModels(w, r, kr)
		res.Status = http.StatusOK
	case strings.HasPrefix(p, "/v1/models/") && (r.Method == http.MethodGet || r.Method == http.MethodHead):
		res.Status = g.serveModel(w, r, strings.TrimPrefix(p, "/v1/models/"), kr)
	case r.Method == http.MethodPost:
		g.serveRouted(w, r, res)
	default:
		w.Header().Set("Allow", "POST")
		res.refuse(w, &Error{http.StatusMethodNotAllowed, typeInvalidRequest, "method_not_allowed",
			fmt.Sprintf("%s %s is not served: the gateway routes POST requests with a JSON body under /v1/ and GET /v1/models", r.Method, p)})
	}
	return true
}

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
	case g.passthrough && strings.HasPrefix(p, UpstreamPrefix) && len(p) > len(UpstreamPrefix):
		return passthroughPath
	case g.extraPaths[p] && method == http.MethodPost:
		return extraPath
	}
	return notOurs
}

// cleanPath reports whether a path has no dot or empty segments: the path
// is appended to an engine's base path, and /v1/../other must not reach a
// path of the engine's host the config does not name.
func cleanPath(p string) bool {
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if seg == "." || seg == ".." || seg == "" {
			return false
		}
	}
	return true
}

// request is one routed request's state, shared by its attempts.
type request struct {
	r         *http.Request
	body      []byte // as sent upstream: gateway-only fields removed
	fields    jsonmember.Fields
	model     string
	stream    bool
	fallbacks []byte // the raw "fallbacks" value, if the body had one
	api       api    // OpenAI's or Anthropic's
	budget    *failoverBudget
	pool      string            // the pool being served, if any
	keptError bool              // an attempt kept its error body whole already
	form      *multipart.Fields // a multipart body's fields; nil for JSON

	key         *keyRules   // the caller's key's rules, nil for none
	rateHeaders http.Header // x-ratelimit-* of the caller's key
	overBudget  bool        // served by the key's over_budget fallback
	hideUsage   bool        // the usage chunk is the gateway's, not the client's
}

// json reports whether the body is JSON (not a multipart form).
func (req *request) json() bool { return req.form == nil }

// bodyFor is the body as sent for model: the caller's, with its model
// rewritten when an engine calls the model another name.
func (req *request) bodyFor(model string) []byte {
	switch {
	case model == req.model:
		return req.body
	case req.form != nil:
		return jsonmember.ApplyEdits(req.body, jsonmember.Edit{Start: req.form.Model.Start, End: req.form.Model.End, Repl: []byte(model)})
	}
	return jsonmember.ApplyEdits(req.body, jsonmember.ReplaceValue(req.fields.Model, model))
}

// refuse answers with an error of the gateway's own.
func (res *Result) refuse(w http.ResponseWriter, e *Error) {
	e.writeAs(w, res.api)
	res.Status = e.Status
	if e.Code == "model_not_allowed" {
		res.Refused = "model" // however the key's list was met: model, fallbacks, /upstream/
	}
}

func (g *Gateway) serveRouted(w http.ResponseWriter, r *http.Request, res *Result) {
	req, gerr := g.readRequest(r)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	res.ModelAsked = req.model
	req.key = res.key
	req, t, gerr := g.admitKey(w, req, res)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	if t != nil {
		defer settle(t, req, res)
		req.askUsage()
	}
	if p := g.pools[req.model]; p != nil {
		res.Known = true
		g.servePool(w, req, p, res)
		return
	}
	rt := g.byModel[req.model]
	if rt == nil {
		res.refuse(w, g.unknownModel(req.model))
		return
	}
	res.Known = true
	if !rt.cfg.Speaks(req.api.family()) {
		res.refuse(w, &Error{http.StatusNotFound, typeInvalidRequest, "model_not_found",
			fmt.Sprintf("the model %q is not served over this API here: its engine %s speaks only %s", req.model, rt.cfg.Name, apisOf(rt.cfg))})
		return
	}
	plan, perr := g.withBodyFallbacks(req, rt.plan)
	if perr != nil {
		res.refuse(w, perr)
		return
	}
	g.run(w, req, plan, res)
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
	plan := p.plan(req, rank)
	if len(plan) == 0 {
		res.refuse(w, p.unavailable())
		return
	}
	req.budget = &failoverBudget{attempts: p.attempts, deadline: g.clock.Now().Add(p.budget)}
	req.pool = p.cfg.Name
	plan, err := g.withBodyFallbacks(req, plan)
	if err != nil {
		res.refuse(w, err)
		return
	}
	g.run(w, req, plan, res)
}

// readRequest reads and scans the body, once, bounded by max_body.
func (g *Gateway) readRequest(r *http.Request) (*request, *Error) {
	if r.ContentLength > g.maxBody {
		return nil, g.tooLarge()
	}
	body, err := readBody(r.Body, r.ContentLength, g.maxBody)
	if err != nil {
		if errors.Is(err, errTooLarge) {
			return nil, g.tooLarge()
		}
		return nil, errBadRequest("body_read_error", "reading the request body: "+err.Error())
	}
	if boundary, ok := multipart.Boundary(r.Header.Get("Content-Type")); ok {
		return readForm(r, body, boundary)
	}
	fields, err := jsonmember.ScanRequest(body)
	if err != nil {
		return nil, errBadRequest("invalid_json", "the request body is not valid JSON: "+err.Error())
	}
	if fields.Twice != "" {
		// upstreams decoding with Go's encoding/json match member names
		// case-insensitively and take the last: the gateway must not
		// route by one "model" while the engine runs another
		return nil, errBadRequest("ambiguous_member", fmt.Sprintf(
			"the request body has more than one %q member (names are compared ignoring case, as many engines do); send it once", fields.Twice))
	}
	var fallbacks []byte
	if fields.Fallbacks.OK() {
		if body, fields, fallbacks, err = stripFallbacks(body, fields); err != nil {
			return nil, errBadRequest("invalid_json", err.Error())
		}
	}
	model, ok := jsonmember.StringValue(body, fields.Model)
	if !ok || len(model) == 0 {
		return nil, errBadRequest("missing_model", `the request body has no "model": name one of GET /v1/models`)
	}
	return &request{r: r, body: body, fields: fields, model: string(model), stream: jsonmember.IsTrue(body, fields.Stream),
		fallbacks: fallbacks, api: apiOf(r.URL.Path)}, nil
}

// readForm reads a multipart body's routing fields.
func readForm(r *http.Request, body []byte, boundary string) (*request, *Error) {
	f, gerr := scanForm(body, boundary)
	if gerr != nil {
		return nil, gerr
	}
	if !f.Model.OK() {
		return nil, errBadRequest("missing_model", `the multipart body has no "model" field: name one of GET /v1/models`)
	}
	return &request{r: r, body: body, model: string(body[f.Model.Start:f.Model.End]), stream: f.Stream,
		form: &f, api: apiOf(r.URL.Path)}, nil
}

// scanForm finds a multipart body's routing fields; a malformed body or a
// field given twice is a 400.
func scanForm(body []byte, boundary string) (multipart.Fields, *Error) {
	f, err := multipart.Scan(body, boundary)
	var twice *multipart.AmbiguousError
	switch {
	case errors.As(err, &twice):
		return f, errBadRequest("ambiguous_member", err.Error())
	case err != nil:
		return f, errBadRequest("invalid_multipart", err.Error())
	}
	return f, nil
}

var errTooLarge = errors.New("body too large")

// readBody reads at most limit bytes; one more is errTooLarge. The buffer
// grows as bytes arrive: a claimed Content-Length is trusted for a first
// allocation only up to firstRead, so connections that announce a large body
// and send slowly hold only what they sent (300 of them, 4 KiB each).
func readBody(rc io.Reader, length, limit int64) ([]byte, error) {
	const firstRead = 4 << 10
	if length >= 0 && length <= firstRead {
		buf := make([]byte, length)
		if _, err := io.ReadFull(rc, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, firstRead)
	for {
		if int64(len(buf)) > limit {
			return nil, errTooLarge
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > limit {
				return nil, errTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

func (g *Gateway) tooLarge() *Error {
	return &Error{http.StatusRequestEntityTooLarge, typeInvalidRequest, "request_too_large",
		"the request body is larger than the gateway's max_body of " + strconv.FormatInt(g.maxBody, 10) + " bytes"}
}

func (g *Gateway) unknownModel(model string) *Error {
	return &Error{http.StatusNotFound, typeInvalidRequest, "model_not_found",
		fmt.Sprintf("the model %q is not served here; served models: %s", model, strings.Join(g.modelNames(), ", "))}
}

// modelNames lists every model name and alias, then the pools, in config
// order.
func (g *Gateway) modelNames() []string {
	return append(g.engineModels(), g.poolIDs(nil)...)
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
