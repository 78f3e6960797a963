// Package caddyfile parses the llm_gateway directive into the config types of
// the handler and engines packages. It only parses: nothing here touches
// runtime state, so `caddy adapt` and `caddy validate` are side-effect free.
package caddyfile

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	"github.com/dustin/go-humanize"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// Parse sets up the handler from Caddyfile tokens. Syntax:
//
//	llm_gateway {
//		keys <token...>                 # accepted bearer tokens; placeholders such as {env.GATEWAY_KEYS} allowed
//		key <name> <token> [{           # a token named for logs and metrics, with rules:
//			models <name...>            # the models and pools it may use; default all
//			rate <limit...>             # requests per window: 60/m, 1000/d (s, m, h, d, mo)
//			tokens <limit...>           # prompt+completion tokens per window: 200k/d, 5M/mo
//			over_budget refuse|fallback <model>  # once a token budget is spent; default refuse
//			reserve <n>                 # tokens a request naming no max_tokens reserves; default 1024
//			priority <n>                # higher goes first in engines' queues and the scheduler; default 0
//			operator                    # may use the status page's API (never with rules)
//		}]
//		store redis <host:port> [{      # counters shared by several gateways (default: embedded)
//			password <p>
//			db <n>
//			prefix <p>
//			timeout <duration>          # what a request waits for Redis; default 100ms
//		}]
//		max_body <size>                 # default 32MiB
//		body_timeout <duration>         # how long a body may take to arrive (408 after); default 2m
//		wake on|off                     # may a request start a stopped engine; default on
//		keepalive <duration>            # SSE comment interval while a stream waits; default 3s
//		body_fallbacks on|off           # may a body name "fallbacks"; default on
//		annotate_response on|off        # extra_fields in non-streaming JSON answers; default off
//		list_aliases on|off             # /v1/models lists every models name; default off (the first)
//		max_fallbacks <n>               # items a body's "fallbacks" may name; default 4
//		max_attempts <n>                # upstream calls one request may cause, of every kind; default 8
//		memory_budget <size> [devices <ids>]  # what engines with memory share; repeatable, once per device set (0, 1,2)
//		max_wait <duration>             # a start's wait for room before busy engines are drained, or it is refused; default 30s
//		priority_grace <duration>       # an idle engine a higher priority used is not stopped for a lower one within it (or before max_wait); 0 off; default 30s
//		transport http { … }            # default transport of engines without their own (see engine)
//		extra_paths <path...>|off       # POST paths outside /v1/ routed by the body's model;
//		                                # default llama-server's /completion /embedding /rerank /infill /tokenize …
//		passthrough on|off [{           # /upstream/<model>/<path> reaches the model's engine; default on
//			methods <method...>         # the methods it serves; default GET HEAD POST
//			budgets on|off              # keys with a token budget may use it; default off
//		}]
//		defaults {                      # engine options for every engine that does not set them
//			idle_timeout 10m            # (any engine option but models and model_name)
//		}
//		ui <path> {                     # the status page on this site, behind the keys (needs keys)
//			recent <n>                  # recent requests kept and shown; default 200
//		}
//		history [off] [{                # the requests' stories, kept for the admin API and the page
//			keep <n>                    # requests kept; default 100000
//			max_age <duration>          # default 7d
//			memory                      # in memory only; default: the embedded file of the key counters
//		}]
//
//		pool <name> {                   # "model": "<name>" (a pool named auto: also "model": "auto")
//			member <engine>[/<model>]   # repeatable
//			sticky header <name> | sticky body user|prompt_cache_key
//			failover <attempts> [<duration>]  # default: every member, 60s
//			breaker <failures> [<cool-down>]  # per member; default 5 30s
//		}
//
//		engine <name> {
//			to <url>                    # required; http(s)://host[:port][/base]; {engine.port} with cmd
//			models <name...>            # required; names and aliases clients ask for
//			model_name <name>           # what the engine calls the model (body rewritten)
//			unlisted [on|off]           # not in /v1/models, served all the same; default off
//			api openai|anthropic|embeddings ...  # the API families it speaks; default openai anthropic
//			api_key <key> [<header>]    # the engine's own key; default header Authorization: Bearer
//			cmd <program> <args...>     # the gateway starts the engine on demand
//			dir <path>
//			env <KEY=VALUE|KEY VALUE>   # repeatable
//			ready <path>|none           # readiness probe, default /health; none: ready once running
//			health_interval <duration>  # remote engines: active health checks; default 0 (off)
//			health_path <path>          # default: the ready path; any 2xx passes
//			health_timeout <duration>   # default 5s
//			health_passes <n>           # checks in a row to be up again; default 1
//			health_fails <n>            # checks in a row to be down; default 1
//			models_from [<path>]        # a node reporting each model's state (default path /v1/models)
//			wake on|off                 # overrides the handler's
//			group <name>                # engines of one group never run together
//			memory <size>               # what it holds while it runs, against memory_budget
//			devices <ids>               # the GPUs it runs on (0, 1,2): its set's memory_budget; CUDA_VISIBLE_DEVICES
//			min_loaded <duration>       # not stopped for room this long after serving; default 0
//			evict idle|never            # may the scheduler stop it for room; default idle
//			start_timeout <duration>    # default 5m
//			idle_timeout <duration>     # default 0 (never stop for idleness)
//			stop_timeout <duration>     # default 10s
//			stop_cmd <program> <args...>  # instead of SIGTERM; {engine.pid} {engine.port}
//			preload [on|off]            # start when the config runs; default off
//			max_concurrent <n>          # requests in flight at once; default 0 (no limit)
//			queue <n> [<timeout>]       # requests that may wait beyond it, in order; default 0 60s
//			dial_timeout <duration>     # default 10s
//			transport http {            # Caddy's HTTP transport, as in reverse_proxy:
//				tls_trusted_ca_certs <pem...>  # tls, tls_client_auth, tls_server_name,
//				versions h2c 2               # keepalive, proxy, … (its dial_timeout wins)
//			}
//			header_timeout <duration>   # default 5m
//			request_timeout <duration>  # default 0 (no bound)
//			first_token_timeout <d>     # default 0 (off): first content event of a stream
//			stream_idle_timeout <d>     # default 60s: gap between events
//			fallback <engine>           # slow start, open breaker, failure go there
//			fallback_after <duration>   # default 10s
//			fallback_model <name>       # what the fallback calls the model
//			context_fallback <engine>[/<model>]  # where context-too-long 400s go
//			retries <n>                 # default 1: same engine, transient failures
//			retry_after_max <duration>  # default 5s
//			hangup_grace <duration>     # default: dial_timeout; a hang-up after longer silence is a timeout
//			breaker <failures> [<cool-down>]  # default 5 30s
//			resume on|off               # default off: continue a cut stream on the fallback
//			prefill on|off              # default off: this engine continues an assistant message placed last
//			loading_status on|off       # default off: a chat stream waiting for the start sees it as reasoning
//			set <path> <json>           # repeatable: give a body member a value (temperature 0.6, a.b true)
//			strip <path...>             # repeatable: remove body members
//		}
//	}
//
// Every mistake is an error carrying the Caddyfile's file:line.
func Parse(d *cf.Dispenser) (hconfig.Config, error) {
	cfg, _, err := ParseWithUI(d)
	return cfg, err
}

// ParseWithUI is Parse that also returns the `ui` subdirective, which is the
// caddy module's (the status page), not the handler's; nil without one.
func ParseWithUI(d *cf.Dispenser) (hconfig.Config, *statuspage.Config, error) {
	m, err := ParseModule(d)
	return m.Config, m.UI, err
}

// Module is what the llm_gateway directive sets: the handler's config and
// the caddy module's own parts beside it.
type Module struct {
	Config hconfig.Config
	// UI is the `ui` subdirective (the status page); nil without one.
	UI *statuspage.Config
	// History is the `history` subdirective (the requests kept); nil
	// without one.
	History *history.Config
}

// ParseModule is Parse with the caddy module's parts.
func ParseModule(d *cf.Dispenser) (Module, error) {
	var m Module
	var err error
	m.Config, err = parseDirective(d, &m.UI, &m.History)
	return m, err
}

func parseDirective(d *cf.Dispenser, ui **statuspage.Config, hist **history.Config) (hconfig.Config, error) {
	var cfg hconfig.Config
	d.Next() // the directive's name
	if d.NextArg() {
		return cfg, d.ArgErr()
	}
	var uiAt pos
	engineAt := map[string]pos{}      // where each engine and pool block starts,
	poolAt := map[string]pos{}        // for the errors of the validation below
	optionAt := map[string]settings{} // where each engine's options are
	var defaultsSet settings
	keyAt := map[string]pos{}
	set := settings{}
	var keysAt *pos // the first keys or key line
	var defaultTransport json.RawMessage
	var defaultsAt *pos
	budgetAt := map[string]pos{} // each memory_budget line, by device set ("" without devices)
	for d.NextBlock(0) {
		if (d.Val() == "keys" || d.Val() == "key") && keysAt == nil {
			at := here(d)
			keysAt = &at
		}
		switch sub := d.Val(); sub {
		case "keys":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return cfg, d.ArgErr()
			}
			for _, a := range args {
				if err := hconfig.CheckKey(hconfig.Key{Value: a}); err != nil {
					return cfg, d.Errf("%v", err)
				}
				cfg.Keys = append(cfg.Keys, hconfig.Key{Value: a})
			}
			continue
		case "key":
			at := here(d)
			k, err := parseKey(d)
			if _, ok := keyAt[k.Name]; !ok {
				keyAt[k.Name] = at
			}
			if err != nil {
				return cfg, err
			}
			cfg.Keys = append(cfg.Keys, k)
			continue
		case "store":
			if cfg.Store != nil {
				return cfg, d.Errf("store is given twice")
			}
			st, err := parseStore(d)
			if err != nil {
				return cfg, err
			}
			cfg.Store = &st
			continue
		case "ui":
			if *ui != nil {
				return cfg, d.Errf("ui is given twice (first at %s)", uiAt)
			}
			uiAt = here(d)
			u, err := parseUI(d)
			if err != nil {
				return cfg, err
			}
			*ui = &u
			continue
		case "history":
			if *hist != nil {
				return cfg, d.Errf("history is given twice")
			}
			h, err := parseHistory(d)
			if err != nil {
				return cfg, err
			}
			*hist = &h
			continue
		case "pool":
			at := here(d)
			pc, err := parsePool(d)
			if err != nil {
				return cfg, err
			}
			if first, ok := poolAt[pc.Name]; ok {
				return cfg, at.errf("pool %s is defined twice (first at %s)", pc.Name, first)
			}
			poolAt[pc.Name] = at
			cfg.Pools = append(cfg.Pools, pc)
			continue
		case "defaults":
			if defaultsAt != nil {
				return cfg, d.Errf("defaults is given twice (first at %s)", *defaultsAt)
			}
			at := here(d)
			defaultsAt = &at
			dc, dset, err := parseDefaults(d)
			if err != nil {
				return cfg, err
			}
			defaultsSet = dset
			cfg.Defaults = &dc
			continue
		case "memory_budget":
			at := here(d)
			b, err := parseMemoryBudget(d)
			if err != nil {
				return cfg, err
			}
			set := engines.DeviceSet(b.Devices)
			if first, ok := budgetAt[set]; ok {
				what := "memory_budget"
				if set != "" {
					what += " of devices " + set
				}
				return cfg, at.errf("%s is given twice (first at %s)", what, first)
			}
			budgetAt[set] = at
			if set == "" {
				cfg.MemoryBudget = b.Budget
			} else {
				cfg.MemoryBudgets = append(cfg.MemoryBudgets, b)
			}
			continue
		case "engine":
			at := here(d)
			ec, eset, err := parseEngine(d)
			if err != nil {
				return cfg, err
			}
			if first, ok := engineAt[ec.Name]; ok {
				return cfg, at.errf("engine %s is defined twice (first at %s)", ec.Name, first)
			}
			engineAt[ec.Name] = at
			optionAt[ec.Name] = eset
			cfg.Engines = append(cfg.Engines, ec)
			continue
		}
		if err := set.once(d); err != nil {
			return cfg, err
		}
		switch d.Val() {
		case "max_wait":
			if err := durationArg(d, &cfg.MaxWait); err != nil {
				return cfg, err
			}
		case "priority_grace":
			var grace caddy.Duration
			if err := durationArg(d, &grace); err != nil {
				return cfg, err
			}
			cfg.PriorityGrace = &grace
		case "max_body":
			var s string
			if !d.AllArgs(&s) {
				return cfg, d.ArgErr()
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 {
				return cfg, d.Errf("bad max_body %q: want a size such as 32MiB", s)
			}
			cfg.MaxBody = int64(n)
		case "body_timeout":
			if err := durationArg(d, &cfg.BodyTimeout); err != nil {
				return cfg, err
			}
		case "wake":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.Wake = &b
		case "keepalive":
			if err := durationArg(d, &cfg.KeepAlive); err != nil {
				return cfg, err
			}
		case "body_fallbacks":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.BodyFallbacks = &b
		case "annotate_response":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.AnnotateResponse = b
		case "trace_content":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.TraceContent = b
		case "list_aliases":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.ListAliases = b
		case "max_fallbacks":
			if err := countArg(d, &cfg.MaxFallbacks, 1); err != nil {
				return cfg, err
			}
		case "max_attempts":
			if err := countArg(d, &cfg.MaxAttempts, 1); err != nil {
				return cfg, err
			}
		case "transport":
			t, err := parseTransport(d)
			if err != nil {
				return cfg, err
			}
			defaultTransport = t
		case "extra_paths":
			args := d.RemainingArgs()
			if len(args) == 0 {
				return cfg, d.Errf("extra_paths takes paths (/rerank /infill …) or off")
			}
			paths := []string{}
			if len(args) > 1 || args[0] != "off" {
				paths = args
			}
			for _, p := range paths {
				if err := hconfig.CheckExtraPath(p); err != nil {
					return cfg, d.Errf("%v", err)
				}
			}
			cfg.ExtraPaths = &paths
		case "passthrough":
			if err := parsePassthrough(d, &cfg); err != nil {
				return cfg, err
			}
		default:
			return cfg, unknownSubdirective(d, "llm_gateway", "", handlerOptions)
		}
	}
	if len(cfg.Engines) == 0 {
		return cfg, d.Err("llm_gateway needs at least one engine block")
	}
	if defaultTransport != nil && cfg.Defaults != nil && cfg.Defaults.Transport != nil {
		return cfg, defaultsAt.errf("transport is given both in defaults and for the whole handler: keep one")
	}
	for i := range cfg.Engines {
		if cfg.Engines[i].Transport == nil {
			cfg.Engines[i].Transport = defaultTransport
		}
	}
	if keysAt != nil && noKeyResolves(cfg.Keys) {
		// the handler would refuse to load rather than open the gateway
		// to everyone; say which variable and where
		var values []string
		for _, k := range cfg.Keys {
			values = append(values, k.Value)
		}
		return cfg, keysAt.errf("the gateway's keys resolve to no token: %s (or remove keys and key to run without gateway auth)", describeEmpty(EmptyEnv(values...)))
	}
	if err := checkNamedKeys(cfg.Keys, keyAt); err != nil {
		return cfg, err
	}
	if *ui != nil && len((*ui).Keys) == 0 && len(hconfig.OperatorTokens(cfg.Keys)) == 0 {
		return cfg, uiAt.errf("ui needs operator keys: ui %s { keys … }, or a key marked operator; a key with rules is never an operator (without keys, use the page on Caddy's admin endpoint, /llm_gateway/ui/)", (*ui).Path)
	}
	if err := checkFallbackNames(cfg, optionAt, defaultsSet); err != nil {
		return cfg, err
	}
	// memory budgets and device sets (Provision runs the same): an error
	// points at the engine, or at the set's memory_budget line
	if err := engines.CheckMemory(cfg.MemoryBudget, cfg.MemoryBudgets, cfg.WithDefaults().Engines); err != nil {
		var me *engines.MemoryError
		if errors.As(err, &me) {
			if at, ok := engineAt[me.Engine]; ok && me.Engine != "" {
				return cfg, at.errf("%v", err)
			}
			if at, ok := budgetAt[me.Devices]; ok {
				return cfg, at.errf("%v", err)
			}
		}
		return cfg, d.Errf("%v", err)
	}
	// the one validation of the whole config (Provision runs the same on
	// the resolved config): its errors name the engine or pool they are
	// about, which is where they point
	if err := cfg.Validate(); err != nil {
		var ce *hconfig.ConfigError
		if errors.As(err, &ce) {
			if at, ok := engineAt[ce.Engine]; ok && ce.Engine != "" {
				return cfg, at.errf("%v", err)
			}
			if at, ok := poolAt[ce.Pool]; ok && ce.Pool != "" {
				return cfg, at.errf("%v", err)
			}
			if at, ok := keyAt[ce.Key]; ok && ce.Key != "" {
				return cfg, at.errf("%v", err)
			}
		}
		return cfg, d.Errf("%v", err)
	}
	return cfg, nil
}

// parseMemoryBudget parses `memory_budget <size> [devices <ids>]`: the
// handler's budget, or one device set's (a box with several GPUs).
func parseMemoryBudget(d *cf.Dispenser) (engines.DeviceBudget, error) {
	var b engines.DeviceBudget
	args := d.RemainingArgs()
	if len(args) == 0 || len(args) == 2 || len(args) > 2 && args[1] != "devices" {
		return b, d.Errf("memory_budget takes a size, and for a device set devices and their ids: memory_budget 24GiB [devices 0,1]")
	}
	n, err := humanize.ParseBytes(args[0])
	if err != nil || n == 0 {
		return b, d.Errf("memory_budget takes a size such as 20GiB, not %q", args[0])
	}
	b.Budget = int64(n)
	if len(args) > 2 {
		if b.Devices, err = engines.ParseDevices(args[2:]...); err != nil {
			return b, d.Errf("memory_budget: %v", err)
		}
	}
	if d.NextBlock(d.Nesting()) {
		return b, d.Errf("memory_budget takes no block")
	}
	return b, nil
}

// parseKey parses `key <name> <token> [{ models … rate … tokens …
// over_budget refuse|fallback <model> }]`.
func parseKey(d *cf.Dispenser) (hconfig.Key, error) {
	var k hconfig.Key
	args := d.RemainingArgs()
	if len(args) != 2 {
		return k, d.Errf("key takes a name and a token: key <name> <token> [{ … }]")
	}
	if err := hconfig.CheckKey(hconfig.Key{Value: args[1]}); err != nil {
		return k, d.Errf("key %s: %v", args[0], err)
	}
	k.Name, k.Value = args[0], args[1]
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "rate" && sub != "tokens" {
			if err := set.once(d); err != nil {
				return k, err
			}
		}
		switch sub {
		case "models":
			k.Models = d.RemainingArgs()
			if len(k.Models) == 0 {
				return k, d.ArgErr()
			}
		case "rate", "tokens":
			specs := d.RemainingArgs()
			if len(specs) == 0 {
				return k, d.Errf("%s takes limits such as 60/m or 200k/d", sub)
			}
			for _, spec := range specs {
				l, err := quota.ParseLimit(spec)
				if err != nil {
					return k, d.Errf("key %s: %s: %v", k.Name, sub, err)
				}
				if sub == "rate" {
					k.Rate = append(k.Rate, l)
				} else {
					k.Tokens = append(k.Tokens, l)
				}
			}
		case "reserve":
			var v string
			if err := oneArg(d, &v); err != nil {
				return k, err
			}
			n, err := quota.ParseCount(v)
			if err != nil || n < 1 {
				return k, d.Errf("key %s: reserve takes a token count such as 1024 or 4k, not %q", k.Name, v)
			}
			k.Reserve = n
		case "priority":
			var v string
			if err := oneArg(d, &v); err != nil {
				return k, err
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return k, d.Errf("key %s: priority takes a whole number (higher goes first), not %q", k.Name, v)
			}
			k.Priority = n
		case "operator":
			if d.NextArg() {
				return k, d.ArgErr()
			}
			k.Operator = true
		case "over_budget":
			args := d.RemainingArgs()
			switch {
			case len(args) == 1 && args[0] == "refuse":
			case len(args) == 2 && args[0] == "fallback":
				k.OverBudgetFallback = args[1]
			default:
				return k, d.Errf("over_budget takes refuse or fallback <model>")
			}
		default:
			return k, unknownSubdirective(d, "key", "key "+k.Name, keyOptions)
		}
	}
	return k, nil
}

// parseStore parses `store redis <host:port> [{ password … db … prefix …
// timeout … }]`.
func parseStore(d *cf.Dispenser) (hconfig.StoreConfig, error) {
	var st hconfig.StoreConfig
	args := d.RemainingArgs()
	if len(args) != 2 || args[0] != "redis" {
		return st, d.Errf("store takes redis <host:port>: the counters of the keys' limits, shared by several gateways")
	}
	st.Redis = args[1]
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return st, err
		}
		switch d.Val() {
		case "password":
			if err := oneArg(d, &st.Password); err != nil {
				return st, err
			}
		case "db":
			if err := countArg(d, &st.DB, 0); err != nil {
				return st, err
			}
		case "prefix":
			if err := oneArg(d, &st.Prefix); err != nil {
				return st, err
			}
		case "timeout":
			if err := durationArg(d, &st.Timeout); err != nil {
				return st, err
			}
		default:
			return st, unknownSubdirective(d, "store", "", storeOptions)
		}
	}
	return st, nil
}

// pos is a place in a Caddyfile.
type pos struct {
	file string
	line int
}

// parseUI parses `ui <path> [{ keys <token...>; recent <n> }]`.
func parseUI(d *cf.Dispenser) (statuspage.Config, error) {
	var u statuspage.Config
	var err error
	if u.Path, err = blockArg(d, "ui needs a path: ui /llm"); err != nil {
		return u, err
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch sub := d.Val(); sub {
		case "keys":
			u.Keys = d.RemainingArgs()
			if len(u.Keys) == 0 {
				return u, d.Errf("ui keys takes the operators' tokens: keys {env.LLM_OPERATOR_KEY}")
			}
		case "recent":
			if err := countArg(d, &u.Recent, 1); err != nil {
				return u, err
			}
		default:
			return u, unknownSubdirective(d, "ui", "", uiOptions)
		}
	}
	if err := u.Validate(); err != nil {
		return u, d.Errf("%v", err)
	}
	return u, nil
}

func here(d *cf.Dispenser) pos { return pos{d.File(), d.Line()} }

func (p pos) String() string { return fmt.Sprintf("%s:%d", p.file, p.line) }

// errf is an error at p, worded as the dispenser's own.
func (p pos) errf(format string, args ...any) error {
	return fmt.Errorf("%s, at %s", fmt.Sprintf(format, args...), p)
}

// settings remembers where each single-value subdirective of a block was
// set: a second one is a mistake (the first would be silently lost), named
// with both lines.
type settings map[string]pos

func (s settings) once(d *cf.Dispenser) error {
	name := d.Val()
	if first, ok := s[name]; ok {
		return d.Errf("%s is set twice in this block (first at %s)", name, first)
	}
	s[name] = here(d)
	return nil
}

func parsePool(d *cf.Dispenser) (hconfig.PoolConfig, error) {
	var pc hconfig.PoolConfig
	var err error
	if pc.Name, err = blockArg(d, "pool needs a name: pool <name> { member … }"); err != nil {
		return pc, err
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if sub := d.Val(); sub != "member" {
			if err := set.once(d); err != nil {
				return pc, err
			}
		}
		switch sub := d.Val(); sub {
		case "member":
			var m string
			if err := oneArg(d, &m); err != nil {
				return pc, err
			}
			pc.Members = append(pc.Members, m)
		case "sticky":
			args := d.RemainingArgs()
			if len(args) != 2 || (args[0] != "header" && args[0] != "body") {
				return pc, d.Errf("sticky takes header <name> or body user|prompt_cache_key")
			}
			if args[0] == "header" {
				pc.StickyHeader = args[1]
			} else if args[1] != "user" && args[1] != "prompt_cache_key" {
				return pc, d.Errf("sticky body takes user or prompt_cache_key, not %q", args[1])
			} else {
				pc.StickyBody = args[1]
			}
		case "failover":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return pc, d.Errf("failover takes an attempt count and optionally a time: failover 3 60s")
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return pc, d.Errf("failover takes an attempt count of 1 or more, not %q", args[0])
			}
			pc.FailoverAttempts = n
			if len(args) == 2 {
				v, err := caddy.ParseDuration(args[1])
				if err != nil || v <= 0 {
					return pc, d.Errf("bad failover time %q", args[1])
				}
				pc.FailoverTime = caddy.Duration(v)
			}
		case "breaker":
			n, cool, err := parseBreaker(d)
			if err != nil {
				return pc, err
			}
			pc.BreakerFailures, pc.BreakerCooldown = n, cool
		case "balance":
			if pc.Balance, err = parseBalance(d); err != nil {
				return pc, err
			}
		default:
			return pc, unknownSubdirective(d, "pool", "pool "+pc.Name, poolOptions)
		}
	}
	if len(pc.Members) == 0 {
		return pc, d.Errf("pool %s has no members", pc.Name)
	}
	return pc, nil
}

// parseBreaker parses `breaker <failures> [<cool-down>]`.
func parseBreaker(d *cf.Dispenser) (int, caddy.Duration, error) {
	return countAndDuration(d, "failure count", "cool-down", "breaker 5 30s")
}

// parseEngine parses `engine <name> { … }`, and returns where each
// single-value option was set.
func parseEngine(d *cf.Dispenser) (engines.Config, settings, error) {
	var ec engines.Config
	var err error
	if ec.Name, err = blockArg(d, "engine needs a name: engine <name> { … }"); err != nil {
		return ec, nil, err
	}
	set, err := parseEngineOptions(d, &ec, "engine "+ec.Name)
	return ec, set, err
}

// parseDefaults parses `defaults { … }`: engine options for every engine
// that does not set them.
func parseDefaults(d *cf.Dispenser) (engines.Config, settings, error) {
	var ec engines.Config
	if d.NextArg() {
		return ec, nil, d.ArgErr()
	}
	set, err := parseEngineOptions(d, &ec, "defaults")
	return ec, set, err
}

// parseEngineOptions parses the block of an engine (or of defaults, where
// what names the engine is refused), named where for errors, and returns
// where each single-value option was set.
func parseEngineOptions(d *cf.Dispenser, ec *engines.Config, where string) (settings, error) {
	nesting := d.Nesting()
	set := settings{}
	for d.NextBlock(nesting) {
		if where == "defaults" {
			switch d.Val() {
			case "models", "model_name":
				return set, d.Errf("%s may not be in defaults: each engine serves its own models", d.Val())
			}
		}
		if sub := d.Val(); sub != "env" && sub != "set" && sub != "strip" {
			if err := set.once(d); err != nil {
				return set, err
			}
		}
		var err error
		switch sub := d.Val(); sub {
		case "to":
			err = oneArg(d, &ec.To)
			if err == nil {
				err = checkValues(d, "to", ec.To)
			}
		case "models":
			ec.Models = d.RemainingArgs()
			if len(ec.Models) == 0 {
				err = d.ArgErr()
			} else if m := engines.Repeated(ec.Models); m != "" {
				err = d.Errf("models: %s is listed twice", m)
			}
		case "model_name":
			err = oneArg(d, &ec.ModelName)
		case "unlisted":
			ec.Unlisted = true
			if d.CountRemainingArgs() > 0 {
				ec.Unlisted, err = parseOnOff(d)
			}
		case "api":
			ec.APIs = d.RemainingArgs()
			if len(ec.APIs) == 0 {
				err = d.ArgErr()
			}
		case "api_key":
			args := d.RemainingArgs()
			switch len(args) {
			case 1:
				ec.APIKey = args[0]
			case 2:
				ec.APIKey, ec.APIKeyHeader = args[0], args[1]
			default:
				err = d.Errf("api_key takes a key and optionally the header to send it in")
			}
		case "cmd":
			ec.Cmd = d.RemainingArgs()
			if len(ec.Cmd) == 0 {
				err = d.ArgErr()
			} else {
				err = checkValues(d, "cmd", ec.Cmd...)
			}
		case "dir":
			err = oneArg(d, &ec.Dir)
			if err == nil {
				err = requireEnv(d, "dir", ec.Dir)
			}
		case "env":
			args := d.RemainingArgs()
			switch {
			case len(args) == 1 && strings.Contains(args[0], "="):
				ec.Env = append(ec.Env, args[0])
			case len(args) == 2 && !strings.Contains(args[0], "="):
				ec.Env = append(ec.Env, args[0]+"="+args[1])
			default:
				err = d.Errf("env takes KEY=VALUE or KEY VALUE")
			}
		case "ready":
			err = oneArg(d, &ec.Ready)
			if err == nil && !strings.HasPrefix(ec.Ready, "/") && ec.Ready != engines.ReadyNone {
				err = d.Errf("ready takes a path starting with '/', or none, not %q", ec.Ready)
			}
		case "wake":
			var b bool
			b, err = parseOnOff(d)
			ec.Wake = &b
		case "group":
			err = oneArg(d, &ec.Group)
		case "memory":
			ec.Memory, err = sizeArg(d)
		case "devices":
			args := d.RemainingArgs()
			if ec.Devices, err = engines.ParseDevices(args...); err != nil {
				err = d.Errf("%v", err)
			}
		case "min_loaded":
			err = durationArg(d, &ec.MinLoaded)
		case "evict":
			err = oneArg(d, &ec.Evict)
			if err == nil && ec.Evict != engines.EvictIdle && ec.Evict != engines.EvictNever {
				err = d.Errf("evict takes idle or never, not %q", ec.Evict)
			}
		case "start_timeout":
			err = durationArg(d, &ec.StartTimeout)
		case "idle_timeout":
			err = durationArg(d, &ec.IdleTimeout)
		case "stop_timeout":
			err = durationArg(d, &ec.StopTimeout)
		case "stop_cmd":
			ec.StopCmd = d.RemainingArgs()
			if len(ec.StopCmd) == 0 {
				err = d.Errf("stop_cmd takes a program and its arguments: stop_cmd docker stop <name>")
			} else {
				err = checkValues(d, "stop_cmd", ec.StopCmd...)
			}
		case "preload":
			ec.Preload = true
			if d.CountRemainingArgs() > 0 {
				ec.Preload, err = parseOnOff(d)
			}
		case "max_concurrent":
			err = countArg(d, &ec.MaxConcurrent, 1)
		case "queue":
			ec.Queue, ec.QueueTimeout, err = parseQueue(d)
		case "dial_timeout":
			err = durationArg(d, &ec.DialTimeout)
		case "header_timeout":
			err = durationArg(d, &ec.HeaderTimeout)
		case "request_timeout":
			err = durationArg(d, &ec.RequestTimeout)
		case "first_token_timeout":
			err = durationArg(d, &ec.FirstTokenTimeout)
		case "stream_idle_timeout":
			err = durationArg(d, &ec.StreamIdleTimeout)
		case "fallback":
			err = oneArg(d, &ec.Fallback)
		case "fallback_after":
			err = durationArg(d, &ec.FallbackAfter)
		case "fallback_model":
			err = oneArg(d, &ec.FallbackModel)
		case "context_fallback":
			err = oneArg(d, &ec.ContextFallback)
		case "retries":
			var s string
			if err = oneArg(d, &s); err == nil {
				n, convErr := strconv.Atoi(s)
				if convErr != nil || n < 0 {
					err = d.Errf("retries takes a count of 0 or more, not %q", s)
				}
				ec.Retries = &n
			}
		case "resume":
			var b bool
			b, err = parseOnOff(d)
			ec.Resume = &b
		case "loading_status":
			var b bool
			b, err = parseOnOff(d)
			ec.LoadingStatus = &b
		case "prefill":
			var b bool
			b, err = parseOnOff(d)
			ec.Prefill = &b
		case "retry_after_max":
			err = durationArg(d, &ec.RetryAfterMax)
		case "hangup_grace":
			err = durationArg(d, &ec.HangupGrace)
		case "breaker":
			ec.BreakerFailures, ec.BreakerCooldown, err = parseBreaker(d)
		case "transport":
			ec.Transport, err = parseTransport(d)
		case "set":
			args := d.RemainingArgs()
			if len(args) != 2 {
				err = d.Errf("set takes a path and a JSON value: set temperature 0.6, set stop `[\"</s>\"]`")
				break
			}
			ec.Set = append(ec.Set, engines.BodySetting{Path: args[0], Value: json.RawMessage(args[1])})
			if ferr := ec.ValidateFilters(); ferr != nil {
				err = d.Errf("%v", ferr)
			}
		case "strip":
			args := d.RemainingArgs()
			if len(args) == 0 {
				err = d.ArgErr()
				break
			}
			ec.Strip = append(ec.Strip, args...)
			if ferr := ec.ValidateFilters(); ferr != nil {
				err = d.Errf("%v", ferr)
			}
		case "models_from":
			ec.ModelsFrom = "/v1/models"
			if d.NextArg() {
				ec.ModelsFrom = d.Val()
			}
			if d.NextArg() {
				err = d.ArgErr()
			} else if !strings.HasPrefix(ec.ModelsFrom, "/") {
				err = d.Errf("models_from takes a path starting with '/', not %q", ec.ModelsFrom)
			}
		case "health_interval":
			err = durationArg(d, &ec.HealthInterval)
		case "health_path":
			err = oneArg(d, &ec.HealthPath)
			if err == nil && !strings.HasPrefix(ec.HealthPath, "/") {
				err = d.Errf("health_path takes a path starting with '/', not %q", ec.HealthPath)
			}
		case "health_timeout":
			err = durationArg(d, &ec.HealthTimeout)
		case "health_passes":
			err = countArg(d, &ec.HealthPasses, 1)
		case "health_fails":
			err = countArg(d, &ec.HealthFails, 1)
		case "signals":
			err = oneArg(d, &ec.Signals)
			if err == nil && ec.Signals != engines.SignalsMetrics && ec.Signals != engines.SignalsOff {
				err = d.Errf("signals takes metrics or off, not %q", ec.Signals)
			}
		case "signals_path":
			err = oneArg(d, &ec.SignalsPath)
			if err == nil && !strings.HasPrefix(ec.SignalsPath, "/") {
				err = d.Errf("signals_path takes a path starting with '/', not %q", ec.SignalsPath)
			}
		case "signals_slots_path":
			err = oneArg(d, &ec.SignalsSlotsPath)
			if err == nil && ec.SignalsSlotsPath != engines.SignalsOff && !strings.HasPrefix(ec.SignalsSlotsPath, "/") {
				err = d.Errf("signals_slots_path takes a path starting with '/' or off, not %q", ec.SignalsSlotsPath)
			}
		case "signals_interval":
			err = durationArg(d, &ec.SignalsInterval)
		case "signals_stale":
			err = durationArg(d, &ec.SignalsStale)
		case "swap":
			err = parseSwap(d, ec)
		case "sleep_after":
			err = durationArg(d, &ec.SleepAfter)
		case "slots":
			ec.Slots, err = parseSlots(d)
		default:
			err = unknownSubdirective(d, "engine", where, engineOptions)
		}
		if err != nil {
			return set, err
		}
	}
	return set, nil
}

// parseQueue parses `queue <n> [<timeout>]`.
func parseQueue(d *cf.Dispenser) (int, caddy.Duration, error) {
	return countAndDuration(d, "length", "timeout", "queue 8 30s")
}

// countAndDuration parses a subdirective of the shape `<name> <count>
// [<duration>]` (breaker, queue): a count of 1 or more and a positive
// duration, 0 when it is left out. count and duration say what the two are
// in its errors; example is a whole line that works.
func countAndDuration(d *cf.Dispenser, count, duration, example string) (int, caddy.Duration, error) {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) < 1 || len(args) > 2 {
		return 0, 0, d.Errf("%s takes a %s and optionally a %s: %s", name, count, duration, example)
	}
	n, err := strconv.Atoi(args[0])
	if err != nil || n < 1 {
		return 0, 0, d.Errf("%s takes a %s of 1 or more, not %q", name, count, args[0])
	}
	if len(args) == 1 {
		return n, 0, nil
	}
	v, err := caddy.ParseDuration(args[1])
	if err != nil || v <= 0 {
		return 0, 0, d.Errf("bad %s %s %q: want a duration such as 30s", name, duration, args[1])
	}
	return n, caddy.Duration(v), nil
}

// parseTransport parses `transport http { … }` by handing the block to Caddy's
// own HTTP transport module, so every option reverse_proxy's transport takes
// means the same here, and returns it as the JSON module object that
// reverse_proxy's "transport" field holds.
func parseTransport(d *cf.Dispenser) (json.RawMessage, error) {
	if !d.NextArg() {
		return nil, d.ArgErr()
	}
	if d.Val() != "http" {
		return nil, d.Errf("transport %q is not supported: use transport http { … } (Caddy's HTTP transport)", d.Val())
	}
	var t reverseproxy.HTTPTransport
	if err := t.UnmarshalCaddyfile(d.NewFromNextSegment()); err != nil {
		return nil, err
	}
	return caddyconfig.JSONModuleObject(&t, "protocol", "http", nil), nil
}

// countArg parses a subdirective's one whole-number argument, at least min.
func countArg(d *cf.Dispenser, dst *int, min int) error {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return d.ArgErr()
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < min {
		return d.Errf("%s takes a count of %d or more, not %q", name, min, s)
	}
	*dst = n
	return nil
}

// blockArg reads the one argument that opens a block (`pool <name> {`);
// missing is the error when it is left out, with a line that works.
func blockArg(d *cf.Dispenser, missing string) (string, error) {
	if !d.NextArg() {
		return "", d.Err(missing)
	}
	v := d.Val()
	if d.NextArg() {
		return "", d.ArgErr()
	}
	return v, nil
}

// sizeArg reads one size such as 20GiB or 512MB.
func sizeArg(d *cf.Dispenser) (int64, error) {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return 0, d.ArgErr()
	}
	n, err := humanize.ParseBytes(v)
	if err != nil || n == 0 {
		return 0, d.Errf("%s takes a size such as 20GiB, not %q", name, v)
	}
	return int64(n), nil
}

func oneArg(d *cf.Dispenser, dst *string) error {
	if !d.AllArgs(dst) {
		return d.ArgErr()
	}
	return nil
}

func durationArg(d *cf.Dispenser, dst *caddy.Duration) error {
	name := d.Val()
	args := d.RemainingArgs()
	if len(args) != 1 {
		return d.Errf("%s takes one duration such as 5m or 90s, not %q", name, strings.Join(args, " "))
	}
	s := args[0]
	if f, err := strconv.ParseFloat(s, 64); err == nil && f != 0 {
		// llama-swap's ttl: 60 is seconds; here a bare number is a mistake
		return d.Errf("bad %s %q: a duration needs a unit, such as %ss or 5m", name, s, s)
	}
	v, err := caddy.ParseDuration(s)
	if err != nil {
		return d.Errf("bad %s %q: %v", name, s, err)
	}
	if v < 0 {
		return d.Errf("%s may not be negative", name)
	}
	*dst = caddy.Duration(v)
	return nil
}

// parsePassthrough parses `passthrough on|off [{ methods …; budgets on|off }]`.
func parsePassthrough(d *cf.Dispenser, cfg *hconfig.Config) error {
	var s string
	if !d.NextArg() {
		return d.ArgErr()
	}
	switch s = d.Val(); s {
	case "on", "off":
	default:
		return d.Errf("passthrough takes on or off, not %q", s)
	}
	if d.NextArg() {
		return d.ArgErr()
	}
	on := s == "on"
	cfg.Passthrough = &on
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		switch sub := d.Val(); sub {
		case "methods":
			cfg.PassthroughMethods = nil
			for _, m := range d.RemainingArgs() {
				if m != strings.ToUpper(m) || strings.ContainsAny(m, " /") {
					return d.Errf("passthrough methods: %q is not an HTTP method such as GET or POST", m)
				}
				cfg.PassthroughMethods = append(cfg.PassthroughMethods, m)
			}
			if len(cfg.PassthroughMethods) == 0 {
				return d.Errf("passthrough methods takes HTTP methods: methods GET HEAD POST")
			}
		case "budgets":
			b, err := parseOnOff(d)
			if err != nil {
				return err
			}
			cfg.PassthroughBudgets = b
		default:
			return unknownSubdirective(d, "passthrough", "", passthroughOptions)
		}
	}
	return nil
}

func parseOnOff(d *cf.Dispenser) (bool, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return false, d.ArgErr()
	}
	switch s {
	case "on", "true":
		return true, nil
	case "off", "false":
		return false, nil
	}
	return false, d.Errf("%s takes on or off, not %q", name, s)
}

// noKeyResolves reports whether every configured key is made of {env.*}
// placeholders of empty variables (and separators) only.
func noKeyResolves(keys []hconfig.Key) bool {
	for _, k := range keys {
		rest := envPlaceholder.ReplaceAllStringFunc(k.Value, func(ph string) string {
			return os.Getenv(envPlaceholder.FindStringSubmatch(ph)[1])
		})
		if strings.Trim(rest, ", \t") != "" {
			return false
		}
	}
	return true
}

// checkNamedKeys refuses a named key whose {env.*} placeholders name empty
// variables, at its line, naming the key and the variables: with other keys
// that resolve, the gateway would load and the key's callers be refused
// with no word of why (issue 28).
func checkNamedKeys(keys []hconfig.Key, keyAt map[string]pos) error {
	for _, k := range keys {
		if k.Name == "" {
			continue
		}
		if names := EmptyEnv(k.Value); len(names) > 0 {
			return keyAt[k.Name].errf("key %s: %s", k.Name, describeEmpty(names))
		}
	}
	return nil
}

// checkFallbackNames points a fallback or context_fallback that names no
// engine of the handler (or the engine itself) at its own line, where the
// handler's validation, which knows only the engine, would point at the
// engine block. A fallback given in defaults is checked at its line there.
func checkFallbackNames(cfg hconfig.Config, optionAt map[string]settings, defaultsSet settings) error {
	known := map[string]bool{}
	for _, e := range cfg.Engines {
		known[e.Name] = true
	}
	var d engines.Config
	if cfg.Defaults != nil {
		d = *cfg.Defaults
	}
	for _, e := range cfg.Engines {
		for _, o := range []struct{ option, own, inherited string }{
			{"fallback", e.Fallback, d.Fallback},
			{"context_fallback", e.ContextFallback, d.ContextFallback},
		} {
			value, at := o.own, optionAt[e.Name][o.option]
			if value == "" {
				value, at = o.inherited, defaultsSet[o.option]
			}
			name, _, _ := strings.Cut(value, "/")
			switch {
			case name == "":
			case name == e.Name && value == o.own:
				return at.errf("engine %s: its %s %s is the engine itself", e.Name, o.option, name)
			case !known[name]:
				return at.errf("engine %s: its %s %s is not an engine of this handler", e.Name, o.option, name)
			}
		}
	}
	return nil
}
