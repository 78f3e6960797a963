// Package caddymodule is the Caddy glue of llm_gateway: module and directive
// registration, provisioning (placeholders, transports, the usage pool that
// keeps engines alive across reloads), the admin API and the demo engine
// subcommand.
package caddymodule

import (
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/api"
	gwcaddyfile "github.com/llmgateway/caddy-llm-gateway/caddyfile"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

func init() {
	caddy.RegisterModule(new(Gateway))
	httpcaddyfile.RegisterHandlerDirective("llm_gateway", parseCaddyfile)
	// no `order` line needed in users' Caddyfiles
	httpcaddyfile.RegisterDirectiveOrder("llm_gateway", httpcaddyfile.Before, "reverse_proxy")
}

// Provision resolves placeholders, validates the config and builds (or
// finds, across a reload) each engine's runtime. It never starts a process:
// `caddy validate` runs it. The module's Validate does nothing: the config
// can only be checked once its placeholders are resolved, its provider
// modules loaded and its defaults filled in, which Provision does
// (buildGateway), and Caddy runs Provision wherever it would run Validate.
func (g *Gateway) Provision(ctx caddy.Context) error {
	g.logger = ctx.Logger()
	g.ctx = ctx
	initMetrics(ctx.GetMetricsRegistry())
	setEvents(ctx)
	repl := caddy.NewReplacer()
	cfg := g.Config

	cfg.Keys = nil
	for _, k := range g.Keys {
		k.Value = repl.ReplaceKnown(k.Value, "")
		cfg.Keys = append(cfg.Keys, k)
	}
	if len(g.Keys) > 0 && len(hconfig.SplitKeys(cfg.Keys)) == 0 {
		// fail closed: configured keys that resolve to nothing (an unset
		// environment variable) must not open the gateway to everyone
		var values []string
		for _, k := range g.Keys {
			values = append(values, k.Value)
		}
		if empty := gwcaddyfile.EmptyEnv(values...); len(empty) > 0 {
			return fmt.Errorf("llm_gateway: keys are configured but resolve to no token: set %s in Caddy's environment", strings.Join(empty, ", "))
		}
		return fmt.Errorf("llm_gateway: keys are configured but resolve to no token")
	}
	warnIfOpen(ctx, g.logger, len(g.Keys) > 0 || g.IssuedKeys != nil || g.Identity != nil)
	g.maskKeysInEngineOutput(cfg.Keys, repl)

	var preload []*engines.Engine
	gw, cfg, err := buildGateway(ctx, repl, cfg, g.logger, func(ec engines.Config) (*engines.Engine, error) {
		e, key, err := loadEngine(ctx, ec)
		if err != nil {
			return nil, err
		}
		// kept as they come, so that Cleanup lets go of them when a later
		// step fails
		g.engines = append(g.engines, e)
		g.poolKey = append(g.poolKey, key)
		if ec.Preload {
			preload = append(preload, e)
		}
		return e, nil
	})
	if err != nil {
		return fmt.Errorf("llm_gateway: %v", err)
	}
	warnAboutCommands(g.logger, cfg.Engines)
	warnUnpriced(g.logger, gw) // spend.go
	// the box's budget is process-wide, as the GPU is: the last config's wins
	engines.SetMemoryBudgets(cfg.MemoryBudget, cfg.MemoryBudgets, time.Duration(cfg.MaxWait))
	engines.SetPriorityGrace(cfg.Grace())
	if err := preloadAtStart(ctx, preload); err != nil {
		return fmt.Errorf("llm_gateway: %v", err)
	}
	gw.Hooks = hooks
	g.gw = gw
	if cfg.HasLimits() {
		if g.limiter, err = openLimiter(cfg, repl, g.logger); err != nil {
			return fmt.Errorf("llm_gateway: %v", err)
		}
		gw.SetLimiter(g.limiter)
	}
	if cfg.IssuedKeys != nil {
		if g.issued, err = openIssued(cfg, repl, g.logger); err != nil {
			return fmt.Errorf("llm_gateway: %v", err)
		}
		giveIssued(gw, g.issued, g.logger)
		registerIssued(g.issued, g.logger)
	}
	if err := g.provisionUI(cfg.Keys, repl); err != nil {
		return fmt.Errorf("llm_gateway: %v", err)
	}
	registerHistoryMetrics(ctx.GetMetricsRegistry())
	if g.history, err = openHistory(g.History, g.logger); err != nil {
		return fmt.Errorf("llm_gateway: %v", err)
	}
	if g.history != nil {
		registerHistory(g.history)
	}
	registerForAdmin(g.engines)
	registerGateway(gw)
	if err := g.followSources(ctx, cfg); err != nil {
		return fmt.Errorf("llm_gateway: %v", err)
	}
	return nil
}

// Validate does nothing: Provision validates the config once, resolved,
// with its provider modules loaded and its defaults filled in
// (buildGateway). Without it, Caddy would call the embedded
// hconfig.Config's Validate after Provision, on the config as written: a
// second validation of another config, which knows no provider module.
func (*Gateway) Validate() error { return nil }

// buildGateway is the one provisioning pipeline of a handler, which
// Provision and `llm-probe --config` both run: placeholders in the engines
// resolved, their provider modules loaded (providers.go), every default
// filled in, the whole config validated once (nothing
// after it validates again), a runtime for each engine from makeEngine, and
// the handler over them. It returns the config as the handler got it.
// makeEngine gets an engine's definition with its defaults; the caller keeps
// what it made, to let go of it also when a later step fails.
func buildGateway(ctx caddy.Context, repl *caddy.Replacer, cfg hconfig.Config, log *zap.Logger, makeEngine func(engines.Config) (*engines.Engine, error)) (*handler.Gateway, hconfig.Config, error) {
	resolved := make([]engines.Config, len(cfg.Engines))
	for i, ec := range cfg.Engines {
		resolved[i] = resolveEngine(repl, ec)
	}
	cfg.Engines = resolved
	if cfg.Defaults != nil {
		d := resolveEngine(repl, *cfg.Defaults)
		cfg.Defaults = &d
	}
	cfg, err := loadProviders(ctx, cfg)
	if err != nil {
		return nil, cfg, err
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, cfg, err
	}
	es := make([]*engines.Engine, 0, len(cfg.Engines))
	for _, ec := range cfg.Engines {
		if cfg.Templates()[ec.Name] {
			continue // a dynamic pool's template: its members are made as they are found
		}
		e, err := makeEngine(ec)
		if err != nil {
			return nil, cfg, fmt.Errorf("engine %s: %v", ec.Name, err)
		}
		es = append(es, e)
	}
	gw, err := handler.New(cfg, es, log)
	if err == nil && gatewayClock != nil {
		gw.SetClock(gatewayClock)
	}
	return gw, cfg, err
}

// gatewayClock, when set, is the clock of the gateways built from then on
// instead of the wall clock: a test sets it before it loads a config, to
// age what a gateway keeps (the fleet's listings) without waiting.
var gatewayClock clock.Clock

// provisionUI makes the site's status page. Its page is served to anyone
// (it holds no data); its API only to operators: the ui's own keys, else
// the handler's operator keys (hconfig.OperatorTokens). A key with rules is
// never one.
func (g *Gateway) provisionUI(keys []hconfig.Key, repl *caddy.Replacer) error {
	if g.UI == nil {
		return nil
	}
	if err := g.UI.Validate(); err != nil {
		return err
	}
	var tokens []string
	for _, v := range g.UI.Keys {
		k := hconfig.Key{Value: repl.ReplaceKnown(v, "")}
		if err := hconfig.CheckKey(k); err != nil {
			return fmt.Errorf("ui keys: %v", err)
		}
		for _, tok := range hconfig.SplitKeys([]hconfig.Key{k}) {
			tokens = append(tokens, tok.Value)
		}
	}
	if len(g.UI.Keys) == 0 {
		tokens = hconfig.OperatorTokens(keys)
	}
	if len(tokens) == 0 {
		return fmt.Errorf("ui needs operator keys: ui %s { keys … }, or a key marked operator (a key with rules is never an operator; without keys, use the page on Caddy's admin endpoint, /llm_gateway/ui/)", g.UI.Path)
	}
	board.SetRecent(g.UI.RecentOrDefault())
	g.ui = &statuspage.Server{Prefix: g.UI.Path, Keys: statuspage.NewKeys(tokens), Board: board, Source: liveSource{}}
	return nil
}

// maskKeysInEngineOutput has every engine mask this config's key tokens
// (its keys' and its page's) in the output it keeps and logs, before any
// engine starts: an engine that logs a request's headers prints a caller's
// token bare, where no key-like pattern finds it.
// Cleanup drops them, and the next config registers its own.
func (g *Gateway) maskKeysInEngineOutput(keys []hconfig.Key, repl *caddy.Replacer) {
	all := slices.Clone(keys)
	if g.UI != nil {
		for _, v := range g.UI.Keys {
			all = append(all, hconfig.Key{Value: repl.ReplaceKnown(v, "")})
		}
	}
	var tokens []string
	for _, k := range hconfig.SplitKeys(all) {
		tokens = append(tokens, k.Value)
	}
	engines.RegisterSecrets(g, tokens)
}

// resolveEngine replaces known placeholders ({env.*}, …) in the fields that
// may hold them; {engine.port} is not known to Caddy and stays for the
// engine to fill in at each start.
func resolveEngine(repl *caddy.Replacer, ec engines.Config) engines.Config {
	r := func(s string) string {
		return strings.ReplaceAll(repl.ReplaceKnown(s, ""), ExecutablePlaceholder, executable())
	}
	ec = ec.Rewrite(r)
	// the key is no option of Rewrite's ({engine.name} is not for it), but
	// it may well be {env.OPENAI_API_KEY}
	ec.APIKey = r(ec.APIKey)
	return ec
}

// ExecutablePlaceholder in an engine's cmd, env or dir is the path of the
// running Caddy binary, so that an engine can be the binary itself (the
// quickstart runs `{gateway.executable} llm-demo-engine`).
const ExecutablePlaceholder = "{gateway.executable}"

func executable() string {
	p, err := os.Executable()
	if err != nil {
		return os.Args[0]
	}
	return p
}

// Cleanup lets go of this config's engines; an engine that the next config
// still uses keeps running, the others are drained and stopped.
func (g *Gateway) Cleanup() error {
	g.followers.stop()
	if g.gw != nil {
		g.gw.CloseMembers()
		g.gw.CloseWebhook()
	}
	unregisterForAdmin(g.engines)
	engines.UnregisterSecrets(g)
	if g.limiter != nil {
		_ = g.limiter.Close() // the counters live on in the next config's handle, or in the store
	}
	if g.issued != nil {
		unregisterIssued(g.issued)
		_ = g.issued.Close() // the keys live on in the next config's handle, or in the store
	}
	if g.ui != nil {
		g.ui.Close() // its pages reconnect to the next config's, which checks their key again
	}
	if g.history != nil {
		unregisterHistory(g.history)
		_ = g.history.Close() // the records live on in the next config's handle, or in the file
	}
	if g.gw != nil {
		unregisterGateway(g.gw)
	}
	for _, key := range g.poolKey {
		_, _ = enginePool.Delete(key)
	}
	return nil
}

// ServeHTTP implements caddyhttp.MiddlewareHandler.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	var res handler.Result
	// deferred, so that an aborted response (a stream cut after commit)
	// is counted and logged too
	g.watchShutdown(r) // goingaway.go
	if g.ui != nil && g.ui.Owns(r.URL.Path) {
		servePage(g.ui, w, r) // pageshutdown.go
		return nil
	}
	defer func() {
		if res.Handled {
			observeRequest(&res)
			g.noteServed(&res)
			g.chargeIssued(&res)
			setPlaceholders(r, &res)
			recordRequest(r, &res)
			now := time.Now()
			traceStory(r, &res, now)
			if g.history != nil {
				keepStory(g.history, w, r, &res, now)
			}
		}
	}()
	if !g.gw.ServeHTTP(w, g.withIdentity(r), &res) {
		return next.ServeHTTP(w, r)
	}
	return nil
}

// setPlaceholders makes {http.llm_gateway.*} answer, for the access log:
// one provider that reads them when asked, not ten entries set in the
// replacer's map (and a string or two formatted) for every request whether
// anything reads them or not (what a request costs beyond
// reverse_proxy).
func setPlaceholders(r *http.Request, res *handler.Result) {
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return
	}
	p := &placeholders{
		engine: res.Engine, model: res.ModelAsked, modelSent: res.ModelSent, attempts: res.Attempts,
		keyName: res.KeyName, fallback: res.Fallback, ttfb: res.TTFB, pool: res.Pool, poolChoice: res.PoolChoice,
		usage: res.Usage, hasUsage: res.HasUsage, api: res.API, engineAPI: res.EngineAPI,
		cost: res.Cost,
	}
	repl.Map(p.get)
}

// placeholders are a request's {http.llm_gateway.*} values.
type placeholders struct {
	engine, model, modelSent, keyName, fallback, pool, poolChoice string
	api, engineAPI                                                string
	attempts                                                      int
	ttfb                                                          time.Duration
	usage                                                         api.Usage
	hasUsage                                                      bool
	cost                                                          price.Amount
}

func (p *placeholders) get(key string) (any, bool) {
	name, ok := strings.CutPrefix(key, "http.llm_gateway.")
	if !ok {
		return nil, false
	}
	switch name {
	case "engine":
		return p.engine, true
	case "model":
		return p.model, true
	case "model_sent":
		return p.modelSent, true
	case "attempts":
		return strconv.Itoa(p.attempts), true
	case "key_name":
		return p.keyName, true
	case "fallback":
		return p.fallback, true
	case "ttfb_ms":
		return p.ttfb.Milliseconds(), true
	case "pool":
		return p.pool, true
	case "api": // the client's: chat, messages, responses, …
		return p.api, true
	case "engine_api": // the answering engine's, another when translated
		return p.engineAPI, true
	case "pool_choice": // session, affinity, load, rotation, cheap
		return p.poolChoice, true
	case "prompt_tokens":
		return p.usage.Input, p.hasUsage
	case "completion_tokens":
		return p.usage.Output, p.hasUsage
	case "cache_read_tokens": // of prompt_tokens, read from the engine's prompt cache
		return p.usage.CacheRead, p.hasUsage
	case "cache_write_tokens": // of prompt_tokens, written to it
		return p.usage.CacheWrite, p.hasUsage
	case "cost_usd": // what it cost at its model's price, in dollars (spend.go)
		return p.cost.String(), true
	}
	return nil, false
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens; the syntax is
// documented on caddyfile.Parse.
func (g *Gateway) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	m, err := gwcaddyfile.ParseModule(d)
	if err != nil {
		return err
	}
	g.Config, g.UI, g.History = m.Config, m.UI, m.History
	return nil
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	g := new(Gateway)
	err := g.UnmarshalCaddyfile(h.Dispenser)
	return g, err
}
