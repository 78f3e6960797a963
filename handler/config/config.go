// Package config is the llm_gateway handler's configuration: its types,
// every default, and the one validation that runs before anything is
// built (parse → defaults → validate, once). The caddyfile package parses
// into it; handler builds from it.
package config

import (
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Defaults of the handler's limits.
const (
	DefaultMaxBody = 32 << 20
	// DefaultMaxBodyInFlight is max_body_in_flight's default, at least
	// twice max_body.
	DefaultMaxBodyInFlight = 256 << 20
	DefaultBodyTimeout     = 2 * time.Minute
	// MaxMaxBody bounds max_body: a body is held whole in memory, and the
	// reader's arithmetic stays far from an overflow.
	MaxMaxBody          = 1 << 40
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

	// MaxBodyInFlight bounds the bytes the request bodies held at once
	// take together: a body that would pass it is answered 503 with
	// Retry-After, before it is read when its Content-Length says so, else
	// at the chunk that passes it. max_body bounds each body; ten uploads
	// of 40 MiB held 300 MB at once (issue 51). Default: 256 MiB (eight
	// bodies of the default max_body, or thousands of prompts of 100 KB),
	// and at least twice max_body, so two of the largest bodies fit.
	MaxBodyInFlight int64 `json:"max_body_in_flight,omitempty"`

	// MaxBody is the largest request body in bytes; a larger one is
	// answered 413. Default: 32 MiB.
	MaxBody int64 `json:"max_body,omitempty"`

	// BodyTimeout is how long a request body may take to arrive, from the
	// moment the gateway starts reading it; a slower one is answered 408
	// and its connection closed. An upload of max_body at 2 Mbit/s takes
	// about 2 minutes. Default: 2m.
	BodyTimeout caddy.Duration `json:"body_timeout,omitempty"`

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

	// ListAliases lists every name of an engine's models line in
	// /v1/models. Off, an engine is listed once, by the first name the
	// caller's key may use, with the others as "aliases": a model picker
	// shows each model once, as llama-swap does by default
	// (includeAliasesInList: false), and an alias, there for clients that
	// hard-code a name, is still served. Default: false.
	ListAliases bool `json:"list_aliases,omitempty"`

	// AnnotateResponse adds "extra_fields" (provider, model, latency_ms,
	// fallback_index) to non-streaming JSON answers. Default: false.
	AnnotateResponse bool `json:"annotate_response,omitempty"`

	// BudgetWebhook POSTs each budget threshold crossing as JSON
	// (budgetwebhook.go). Default: none, the log line only.
	BudgetWebhook *BudgetWebhook `json:"budget_webhook,omitempty"`

	// TraceContent puts a request's prompt and answer text (at most 64 KiB
	// each) in its trace span, under Caddy's tracing: gen_ai.input.messages
	// and gen_ai.output.messages. Off by default: prompts are the callers'.
	TraceContent bool `json:"trace_content,omitempty"`

	// ExtraPaths are paths outside /v1/ that the gateway routes by the
	// body's model, as it routes /v1/: POST requests only (a GET there
	// goes on to the next handler). Default: llama-server's own endpoints,
	// DefaultExtraPaths; an empty list routes none.
	ExtraPaths *[]string `json:"extra_paths,omitempty"`

	// Passthrough serves /upstream/<model>/<path>, any method, from the
	// engine serving <model>: its web UI, /props, /slots, /metrics.
	// Default: true.
	Passthrough *bool `json:"passthrough,omitempty"`

	// PassthroughMethods are the methods /upstream/ serves; another gets
	// 405. Default: GET, HEAD and POST (an engine's pages and endpoints;
	// widen it for an engine whose own API needs more).
	PassthroughMethods []string `json:"passthrough_methods,omitempty"`

	// PassthroughBudgets lets a key with a token budget use /upstream/,
	// where the tokens of answers that report usage are counted (an
	// engine's own endpoints may answer without usage, which then costs
	// what the request reserved). Default: false (403 for such keys).
	PassthroughBudgets bool `json:"passthrough_budgets,omitempty"`

	// Store is where the counters of the keys' rate and token limits live.
	// Default: an embedded store under Caddy's data directory, which keeps
	// them across reloads and restarts of this instance.
	Store *StoreConfig `json:"store,omitempty"`

	// IssuedKeys accepts keys issued at run time through the admin API and
	// the status page, stored hashed beside the counters (issued.go).
	// Default: none (only the keys of the config).
	IssuedKeys *IssuedKeys `json:"issued_keys,omitempty"`

	// Identity applies rules to who another Caddy handler authenticated
	// (identity.go). Default: none (only keys).
	Identity *Identity `json:"identity,omitempty"`

	// Translate lets requests reach engines that do not speak their API
	// (Chat Completions, Responses, Messages) through translation; an
	// engine's own `translate` wins. Default: on.
	Translate *bool `json:"translate,omitempty"`

	// Defaults sets any engine option for every engine that leaves it
	// unset (llama-swap's globalTTL and more): `defaults { idle_timeout
	// 10m }`. Not a name, models or model_name. Default: none.
	Defaults *engines.Config `json:"defaults,omitempty"`

	// MemoryBudget is the memory the engines with a memory size share on
	// this box (a GPU's): the scheduler starts an engine only if it fits
	// beside what runs, stopping idle engines to make room.
	// Default: 0 (engines may not declare memory).
	MemoryBudget int64 `json:"memory_budget,omitempty"`

	// MemoryBudgets are the memory budgets of device sets, for a box with
	// several GPUs (memory_budget <size> devices <ids>): each set is
	// scheduled on its own, and an engine with devices counts its memory
	// against its set's only. Default: none (memory_budget alone).
	MemoryBudgets []engines.DeviceBudget `json:"memory_budgets,omitempty"`

	// MaxWait is how long a start waits for its turn before the scheduler
	// drains a busy engine for it, so that nothing starves. Default: 30s.
	MaxWait caddy.Duration `json:"max_wait,omitempty"`

	// PriorityGrace is how long an idle engine whose last use was of a
	// higher key priority is kept from being stopped for a lower-priority
	// start; a start that has waited max_wait stops it all the
	// same. 0 turns the protection off. Default: 30s.
	PriorityGrace *caddy.Duration `json:"priority_grace,omitempty"`

	// Engines are the upstreams, each serving one or more models.
	Engines []engines.Config `json:"engines,omitempty"`

	// Pools are model names served by whichever member is healthy; the
	// pool named "auto" (else the first) is what "model": "auto" asks for.
	Pools []PoolConfig `json:"pools,omitempty"`

	// Teams are groups of keys sharing budgets (team.go); a key joins one
	// with its team line. Default: none.
	Teams []Team `json:"teams,omitempty"`

	// Prices are what models cost, over or beside the built-in table of
	// the cloud providers' prices (price.go). Default: the table's price
	// of a cloud provider's model; nothing for a local engine's.
	Prices []Price `json:"prices,omitempty"`
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
	// Timeout bounds what a request waits for Redis: the rate limits'
	// check and the first read of a key's counters. Past it the request is
	// decided on this gateway's own counters and the store counts as
	// failing until a sync succeeds; a budget a loaded host misses lets
	// each gateway admit on its own. Background syncs get ten times as long
	// (at least 1s). Default: 100ms.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// ConfigError is a mistake in a config, with the engine or pool it is
// about, so that the Caddyfile adapter can point at that block's line.
type ConfigError struct {
	Engine string // the engine the error is about, if one
	Pool   string // the pool the error is about, if one
	Key    string // the key (by name) the error is about, if one
	// Identity: the error is about the identity block
	Identity bool
	// Price: the price line (by its model) the error is about, if one
	Price string
	// Team: the team (by name) the error is about, if one
	Team string
	Err  error
}

func (e *ConfigError) Error() string { return e.Err.Error() }

func (e *ConfigError) Unwrap() error { return e.Err }

func engineErr(name string, err error) error { return &ConfigError{Engine: name, Err: err} }

func poolErr(name string, format string, args ...any) error {
	return &ConfigError{Pool: name, Err: fmt.Errorf(format, args...)}
}

// WithDefaults returns c with every default filled in, in one place (issue
// 40): the `defaults` block's options, then each engine's own defaults (see
// engines.Config.WithDefaults), the handler's limits and switches, and each
// pool's failover and breaker. Filling a filled config changes nothing.
func (c Config) WithDefaults() Config {
	c = c.inherited()
	for i := range c.Engines {
		c.Engines[i] = c.Engines[i].WithDefaults()
	}
	on := true
	orDefault(&c.MaxBody, DefaultMaxBody)
	orDefault(&c.MaxBodyInFlight, max(DefaultMaxBodyInFlight, 2*c.MaxBody))
	orDefault(&c.BodyTimeout, caddy.Duration(DefaultBodyTimeout))
	orDefault(&c.MaxFallbacks, DefaultMaxFallbacks)
	orDefault(&c.MaxAttempts, DefaultMaxAttempts)
	if c.KeepAlive <= 0 {
		c.KeepAlive = caddy.Duration(DefaultKeepAlive)
	}
	for _, b := range []**bool{&c.Wake, &c.BodyFallbacks, &c.Passthrough} {
		if *b == nil {
			*b = &on
		}
	}
	if c.ExtraPaths == nil {
		paths := append([]string(nil), DefaultExtraPaths...)
		c.ExtraPaths = &paths
	}
	if len(c.PassthroughMethods) == 0 {
		c.PassthroughMethods = append([]string(nil), DefaultPassthroughMethods...)
	}
	c.Pools = append([]PoolConfig(nil), c.Pools...)
	for i := range c.Pools {
		c.Pools[i] = c.Pools[i].WithDefaults()
	}
	return c
}

// WithDefaults returns the pool with its failover and breaker defaults.
func (p PoolConfig) WithDefaults() PoolConfig {
	orDefault(&p.FailoverAttempts, max(len(p.Members), p.dynamicMembers()))
	orDefault(&p.FailoverTime, caddy.Duration(DefaultFailoverTime))
	orDefault(&p.BreakerCooldown, caddy.Duration(engines.DefaultBreakerCool))
	b := p.Balance.WithDefaults()
	p.Balance = &b
	return p
}

// orDefault sets *v to def when it is zero.
func orDefault[T comparable](v *T, def T) {
	var zero T
	if *v == zero {
		*v = def
	}
}

// DefaultPassthroughMethods are the methods /upstream/ serves by default.
var DefaultPassthroughMethods = []string{http.MethodGet, http.MethodHead, http.MethodPost}

// inherited returns c with its engines (a copy) given the defaults block's
// options they leave unset.
func (c Config) inherited() Config {
	c.Engines = append([]engines.Config(nil), c.Engines...)
	if c.Defaults != nil {
		for i := range c.Engines {
			c.Engines[i] = c.Engines[i].Inherit(*c.Defaults)
		}
	}
	if c.Translate != nil {
		for i := range c.Engines {
			if c.Engines[i].Translate == nil {
				c.Engines[i].Translate = c.Translate
			}
		}
	}
	return c
}

// Validate checks the whole config, once: each engine on its own, and the
// rules that span engines and pools (unique names, each model served once,
// fallbacks that exist and do not chain). An error about one engine or pool
// is a *ConfigError naming it.
func (c Config) Validate() error {
	if c.MaxBody < 0 || c.MaxBodyInFlight < 0 || c.MaxFallbacks < 0 || c.MaxAttempts < 0 || c.BodyTimeout < 0 {
		return fmt.Errorf("max_body, max_body_in_flight, body_timeout, max_fallbacks and max_attempts may not be negative")
	}
	if c.MaxBody > MaxMaxBody {
		return fmt.Errorf("max_body %d is over the most a body may hold here, 1TiB", c.MaxBody)
	}
	// max_body as it will be: its default when it is not set
	if maxBody := cmp.Or(c.MaxBody, DefaultMaxBody); c.MaxBodyInFlight != 0 && c.MaxBodyInFlight < maxBody {
		return fmt.Errorf("max_body_in_flight %d is less than max_body %d: a body of max_body could never be read", c.MaxBodyInFlight, maxBody)
	}
	if err := c.BudgetWebhook.validate(); err != nil { // budgetwebhook.go
		return err
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
		if err := checkRoutes(e); err != nil {
			return engineErr(e.Name, err)
		}
		if err := checkPassthrough(e); err != nil {
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
	if err := c.validateMemory(); err != nil {
		return err
	}
	for i, p := range c.Pools {
		if err := p.validate(names); err != nil {
			return &ConfigError{Pool: p.Name, Err: err}
		}
		if err := c.validateDynamic(p, byName); err != nil {
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
	if err := c.validatePrices(byName, models); err != nil {
		return err
	}
	if err := c.validateTeams(models); err != nil {
		return err
	}
	if err := checkKeys(c.Keys); err != nil {
		return err
	}
	if err := c.validateIssued(); err != nil {
		return err
	}
	if err := checkIdentityNames(c.Keys); err != nil {
		return err
	}
	if err := c.validateIdentity(models); err != nil {
		return &ConfigError{Identity: true, Err: err}
	}
	return c.validateKeyRules(models)
}

// CheckExtraPath refuses an extra path the gateway routes already, or one
// that is not a clean absolute path.
func CheckExtraPath(p string) error {
	switch {
	case !strings.HasPrefix(p, "/") || !CleanPath(p):
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
			return fmt.Errorf("engine %s: its fallback %s does not speak every API it does (api %s vs %s): a request could fall back to an engine that cannot read it", e.Name, e.Fallback, APIsOf(e.APIs), APIsOf(fb.APIs))
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
			return fmt.Errorf("engine %s: its context_fallback %s does not speak every API it does (api %s vs %s)", e.Name, name, APIsOf(e.APIs), APIsOf(byName[name].APIs))
		}
	}
	return nil
}

// speaksAll reports whether fb reads every API e speaks: natively, or
// through translation between Chat Completions, Responses and Messages.
func speaksAll(fb, e engines.Config) bool {
	for _, a := range api.Clients {
		if _, ok := fb.Reads(a); e.Speaks(a) && !ok {
			return false
		}
	}
	return true
}

// APIsOf names the APIs an engine with the api list apis speaks.
func APIsOf(apis []string) string {
	if len(apis) == 0 {
		return "openai anthropic"
	}
	return strings.Join(apis, " ")
}

// DefaultPool is the sentinel model that means the default pool: the pool
// named "auto", or else the first pool declared.
const DefaultPool = "auto"

// PoolConfig is a pool: a model name clients ask for ("auto" or the pool's
// own name) that is served by whichever member is healthy.
type PoolConfig struct {
	// Name is what clients put in "model". A pool named "auto" is the
	// default pool.
	Name string `json:"name"`

	// Members are ENGINE or ENGINE/MODEL: an engine of this handler and
	// the model to send it (default: its model_name, else its first
	// model). At least one.
	Members []string `json:"members"`

	// StickyHeader names a request header whose value is the session key.
	StickyHeader string `json:"sticky_header,omitempty"`

	// StickyBody names a top-level body field ("user" or
	// "prompt_cache_key") whose value is the session key; "user" is
	// metadata.user_id in an Anthropic Messages API request.
	StickyBody string `json:"sticky_body,omitempty"`

	// FailoverAttempts bounds the attempts of one request across members.
	// Default: the number of members.
	FailoverAttempts int `json:"failover_attempts,omitempty"`

	// FailoverTime bounds the time one request spends failing over.
	// Default: 60s.
	FailoverTime caddy.Duration `json:"failover_time,omitempty"`

	// BreakerFailures is how many consecutive failures open a member's
	// breaker. Default: 5.
	BreakerFailures int `json:"breaker_failures,omitempty"`

	// BreakerCooldown is how long an open member is skipped before one
	// trial request. Default: 30s.
	BreakerCooldown caddy.Duration `json:"breaker_cooldown,omitempty"`

	// Hedge starts the next member beside a request whose member has sent
	// no content after Hedge.After. Default: off.
	Hedge *engines.Hedge `json:"hedge,omitempty"`

	// WarmSpare, when 1 or more, lets a request that finds every ready
	// member saturated, or with WarmSpare requests waiting for a place
	// (itself included), start the first stopped member the gateway runs
	// (cmd) in the background, where its group and memory budget fit it
	// (handler/spare.go). Default: 0, off.
	WarmSpare int `json:"warm_spare,omitempty"`

	// Balance is how a member is chosen without a session key (balance.go).
	// Default: affinity, with its defaults.
	Balance *Balance `json:"balance,omitempty"`

	// Dynamic is a source of members found at run time, one of Caddy's
	// reverse_proxy upstream sources (srv, a, multi), and Template the
	// engine each found address becomes a member like (dynamic.go).
	// Default: none; the members are Members.
	Dynamic  json.RawMessage `json:"dynamic,omitempty" caddy:"namespace=http.reverse_proxy.upstreams inline_key=source"`
	Template string          `json:"template,omitempty"`

	// Prefer is "cheap" to try the members able to serve cheapest first,
	// by their price for the model they are sent (cheap.go). Default: "",
	// the balance policy alone.
	Prefer string `json:"prefer,omitempty"`
}

// DefaultFailoverTime is a pool's default failover time budget.
const DefaultFailoverTime = 60 * time.Second

// validate checks a pool against the handler's engine names.
func (p PoolConfig) validate(engineNames map[string]bool) error {
	if p.Name == "" {
		return fmt.Errorf("a pool needs a name")
	}
	if len(p.Members) == 0 && !p.IsDynamic() {
		return fmt.Errorf("pool %s has no members", p.Name)
	}
	seen := map[string]bool{}
	for _, m := range p.Members {
		name, model, hasModel := strings.Cut(m, "/")
		if !engineNames[name] {
			return fmt.Errorf("pool %s: member %s is not an engine of this handler", p.Name, m)
		}
		if hasModel && model == "" {
			return fmt.Errorf("pool %s: member %q: use ENGINE or ENGINE/MODEL", p.Name, m)
		}
		if seen[m] {
			return fmt.Errorf("pool %s: member %s is listed twice", p.Name, m)
		}
		seen[m] = true
	}
	switch p.StickyBody {
	case "", "user", "prompt_cache_key":
	default:
		return fmt.Errorf("pool %s: sticky body takes user or prompt_cache_key, not %q", p.Name, p.StickyBody)
	}
	if p.FailoverAttempts < 0 || p.FailoverTime < 0 || p.BreakerFailures < 0 || p.BreakerCooldown < 0 {
		return fmt.Errorf("pool %s: failover and breaker values may not be negative", p.Name)
	}
	if err := p.Hedge.Validate("pool " + p.Name); err != nil {
		return err
	}
	if err := p.Balance.validate(p.Name); err != nil {
		return err
	}
	if err := checkPrefer(p.Name, p.Prefer); err != nil { // cheap.go
		return err
	}
	return nil
}

// Grace is the priority_grace the scheduler applies: PriorityGrace, or
// engines.DefaultPriorityGrace when it is not set.
func (c Config) Grace() time.Duration {
	if c.PriorityGrace == nil {
		return engines.DefaultPriorityGrace
	}
	return time.Duration(*c.PriorityGrace)
}

// DefaultKeepAlive is the default interval of SSE keep-alive comments while a
// streaming request waits.
const DefaultKeepAlive = 3 * time.Second

// validateMemory refuses an engine with a memory size but no budget to
// count it against, and a start that can never fit.
func (c Config) validateMemory() error {
	if c.MaxWait < 0 {
		return fmt.Errorf("max_wait may not be negative")
	}
	if c.PriorityGrace != nil && *c.PriorityGrace < 0 {
		return fmt.Errorf("priority_grace may not be negative")
	}
	err := engines.CheckMemory(c.MemoryBudget, c.MemoryBudgets, c.Engines)
	var me *engines.MemoryError
	if errors.As(err, &me) && me.Engine != "" {
		return engineErr(me.Engine, err)
	}
	return err
}

// cleanPath reports whether a path has no dot or empty segments: the path
// is appended to an engine's base path, and /v1/../other must not reach a
// path of the engine's host the config does not name.
func CleanPath(p string) bool {
	for _, seg := range strings.Split(strings.TrimPrefix(p, "/"), "/") {
		if seg == "." || seg == ".." || seg == "" {
			return false
		}
	}
	return true
}

// UpstreamPrefix is where the passthrough paths start.
const UpstreamPrefix = "/upstream/"
