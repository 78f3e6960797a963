package caddyfile

import (
	"encoding/json"
	"errors"
	"os"
	"strings"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/dustin/go-humanize"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// The llm_gateway block: its options, and the checks across its blocks
// (named keys, fallback names) once every block is read.

func parseDirective(d *cf.Dispenser, ui **statuspage.Config, hist **history.Config) (hconfig.Config, error) {
	var cfg hconfig.Config
	d.Next() // the directive's name
	if d.NextArg() {
		return cfg, d.ArgErr()
	}
	var uiAt, identityAt pos
	engineAt := map[string]pos{}      // where each engine and pool block starts,
	poolAt := map[string]pos{}        // for the errors of the validation below
	optionAt := map[string]settings{} // where each engine's options are
	// the lines of a provider's engine in an engine without a provider
	// line, for the provider it inherits (provider.go)
	providerLinesOf := map[string][]cf.Segment{}
	var defaultsSet settings
	keyAt := map[string]pos{}
	set := settings{}
	var keysAt *pos   // the first keys or key line
	var tokenAt []pos // where each of cfg.Keys is given
	var defaultTransport json.RawMessage
	var defaultsAt *pos
	budgetAt := map[string]pos{} // each memory_budget line, by device set ("" without devices)
	priceAt := map[string]pos{}  // each price line, by the model it prices
	teamAt := map[string]pos{}   // each team block, by name
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
				tokenAt = append(tokenAt, here(d))
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
			tokenAt = append(tokenAt, at)
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
		case "budget_webhook":
			if cfg.BudgetWebhook != nil {
				return cfg, d.Errf("budget_webhook is given twice")
			}
			w, err := parseBudgetWebhook(d) // budgetwebhook.go
			if err != nil {
				return cfg, err
			}
			cfg.BudgetWebhook = &w
			continue
		case "issued_keys":
			if cfg.IssuedKeys != nil {
				return cfg, d.Errf("issued_keys is given twice")
			}
			ik, err := parseIssuedKeys(d)
			if err != nil {
				return cfg, err
			}
			cfg.IssuedKeys = &ik
			continue
		case "identity":
			if cfg.Identity != nil {
				return cfg, d.Errf("identity is given twice")
			}
			identityAt = here(d)
			id, err := parseIdentity(d)
			if err != nil {
				return cfg, err
			}
			cfg.Identity = &id
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
		case "team":
			at := here(d)
			tm, err := parseTeam(d)
			if err != nil {
				return cfg, err
			}
			if first, ok := teamAt[tm.Name]; ok {
				return cfg, at.errf("team %s is defined twice (first at %s)", tm.Name, first)
			}
			teamAt[tm.Name] = at
			cfg.Teams = append(cfg.Teams, tm)
			continue
		case "price":
			at := here(d)
			pr, err := parsePrice(d)
			if err != nil {
				return cfg, err
			}
			if first, ok := priceAt[pr.Model]; ok {
				return cfg, at.errf("price %s is given twice (first at %s)", pr.Model, first)
			}
			priceAt[pr.Model] = at
			cfg.Prices = append(cfg.Prices, pr)
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
			ec, eset, lines, err := parseEngine(d)
			if err != nil {
				return cfg, err
			}
			if len(lines) > 0 {
				providerLinesOf[ec.Name] = lines
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
		case "max_body_in_flight":
			var s string
			if !d.AllArgs(&s) {
				return cfg, d.ArgErr()
			}
			n, err := humanize.ParseBytes(s)
			if err != nil || n == 0 || n > hconfig.MaxMaxBody {
				return cfg, d.Errf("bad max_body_in_flight %q: want a size such as 256MiB", s)
			}
			cfg.MaxBodyInFlight = int64(n)
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
		case "translate":
			b, err := parseOnOff(d)
			if err != nil {
				return cfg, err
			}
			cfg.Translate = &b
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
	for i, ec := range cfg.Engines {
		if lines := providerLinesOf[ec.Name]; lines != nil {
			if err := inheritProvider(&cfg.Engines[i], cfg.Defaults, lines); err != nil {
				return cfg, err
			}
		}
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
	if err := checkTokensOnce(cfg.Keys, tokenAt); err != nil {
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
			if ce.Identity {
				return cfg, identityAt.errf("%v", err)
			}
			if at, ok := priceAt[ce.Price]; ok && ce.Price != "" {
				return cfg, at.errf("%v", err)
			}
			if at, ok := teamAt[ce.Team]; ok && ce.Team != "" {
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
	n, ok := ParseMemorySize(args[0])
	if !ok {
		return b, d.Errf("memory_budget takes a size such as 20GiB (units are binary: 20GB is 20GiB, as on a GPU), not %q", args[0])
	}
	b.Budget = n
	if len(args) > 2 {
		var err error
		if b.Devices, err = engines.ParseDevices(args[2:]...); err != nil {
			return b, d.Errf("memory_budget: %v", err)
		}
	}
	if d.NextBlock(d.Nesting()) {
		return b, d.Errf("memory_budget takes no block")
	}
	return b, nil
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
// with no word of why.
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
