package config

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/providers/anthropic"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// engine is a valid engine serving models, at a port of its own.
func engine(name string, models ...string) engines.Config {
	return engines.Config{Name: name, To: "http://127.0.0.1:1", Models: models}
}

// managed is a valid engine the gateway starts.
func managed(name string, models ...string) engines.Config {
	e := engine(name, models...)
	e.Cmd = []string{"llama-server", "--port", "1"}
	return e
}

// valid is a config that passes Validate: two engines, a pool of both,
// and a key with rules over them. Each row of the table breaks one thing.
func valid() Config {
	return Config{
		Engines: []engines.Config{engine("a", "m1", "m1-alias"), engine("b", "m2")},
		Pools:   []PoolConfig{{Name: "both", Members: []string{"a", "b/m2"}}},
		Keys: []Key{
			{Name: "team", Value: "team-key-0123456789", Models: []string{"m1", "both"}},
			{Value: "admin-key-0123456789"},
		},
	}
}

func limitsOf(t *testing.T, specs ...string) []quota.Limit {
	t.Helper()
	var out []quota.Limit
	for _, s := range specs {
		l, err := quota.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

func TestTheBaseConfigIsValid(t *testing.T) {
	t.Parallel()
	if err := valid().Validate(); err != nil {
		t.Fatal(err)
	}
}

// TestValidateRefuses has a row per refusal Validate makes: what breaks
// the config, a word of the message, and the engine, pool or key a
// *ConfigError names (so that the Caddyfile adapter points at its line).
func TestValidateRefuses(t *testing.T) {
	t.Parallel()
	dur := func(d time.Duration) *caddy.Duration { c := caddy.Duration(d); return &c }
	for _, tc := range []struct {
		name              string
		edit              func(t *testing.T, c *Config)
		want              string
		engine, pool, key string
	}{
		// the handler's limits
		{name: "negative max_body", edit: func(_ *testing.T, c *Config) { c.MaxBody = -1 }, want: "may not be negative"},
		{name: "negative max_fallbacks", edit: func(_ *testing.T, c *Config) { c.MaxFallbacks = -1 }, want: "may not be negative"},
		{name: "negative max_attempts", edit: func(_ *testing.T, c *Config) { c.MaxAttempts = -1 }, want: "may not be negative"},
		{name: "max_body_in_flight under max_body", edit: func(_ *testing.T, c *Config) { c.MaxBody, c.MaxBodyInFlight = 64<<20, 40<<20 }, want: "could never be read"},
		{name: "a route outside /v1/", edit: func(_ *testing.T, c *Config) { c.Engines[0].Routes = []string{"/admin"} }, want: "not a clean path under /v1/", engine: "a"},
		{name: "a route with a wildcard inside", edit: func(_ *testing.T, c *Config) { c.Engines[0].Routes = []string{"/v1/*/jobs"} }, want: "not a clean path under /v1/", engine: "a"},
		{name: "a route that climbs", edit: func(_ *testing.T, c *Config) { c.Engines[0].Routes = []string{"/v1/../admin"} }, want: "not a clean path under /v1/", engine: "a"},
		{name: "an API's own route", edit: func(_ *testing.T, c *Config) { c.Engines[0].Routes = []string{"/v1/chat/completions"} }, want: "chat's own route", engine: "a"},
		{name: "negative max_body_in_flight", edit: func(_ *testing.T, c *Config) { c.MaxBodyInFlight = -1 }, want: "may not be negative"},

		// extra_paths
		{name: "a relative extra path", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"rerank"} }, want: "not a clean absolute path"},
		{name: "an extra path with a dot segment", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/a/../b"} }, want: "not a clean absolute path"},
		{name: "an extra path with an empty segment", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/a//b"} }, want: "not a clean absolute path"},
		{name: "an extra path that is /v1", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/v1"} }, want: "under /v1/"},
		{name: "an extra path under /v1/", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/v1/rerank"} }, want: "under /v1/"},
		{name: "an extra path that is the passthrough", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/upstream"} }, want: "the passthrough"},
		{name: "an extra path under the passthrough", edit: func(_ *testing.T, c *Config) { c.ExtraPaths = &[]string{"/upstream/m/props"} }, want: "the passthrough"},

		// engines
		{name: "no engine", edit: func(_ *testing.T, c *Config) { c.Engines, c.Pools, c.Keys = nil, nil, nil }, want: "at least one engine"},
		{name: "a defaults block with a name", edit: func(_ *testing.T, c *Config) { c.Defaults = &engines.Config{Name: "x"} }, want: "defaults may not set a name"},
		{name: "a defaults block with models", edit: func(_ *testing.T, c *Config) { c.Defaults = &engines.Config{Models: []string{"m"}} }, want: "defaults may not set models"},
		{name: "an engine that is invalid on its own", edit: func(_ *testing.T, c *Config) { c.Engines[1].To = "" }, want: "missing 'to'", engine: "b"},
		{name: "an invalid engine option from the defaults block", edit: func(_ *testing.T, c *Config) {
			c.Defaults = &engines.Config{Evict: "sometimes"}
		}, want: "evict", engine: "a"},
		{name: "an engine defined twice", edit: func(_ *testing.T, c *Config) { c.Engines = append(c.Engines, engine("a", "m3")) }, want: "defined twice", engine: "a"},
		{name: "a model served twice", edit: func(_ *testing.T, c *Config) { c.Engines = append(c.Engines, engine("c", "m2")) }, want: "served by both engine b and engine c", engine: "c"},

		// passthrough: a provider's routes, or clean paths
		{name: "passthrough on an engine without a provider", edit: func(_ *testing.T, c *Config) { c.Engines[0].Passthrough = []string{"/props"} }, want: "own pages pass already", engine: "a"},
		{name: "passthrough of a route the provider does not have", edit: func(_ *testing.T, c *Config) {
			c.Engines[0].Provider, c.Engines[0].Passthrough = new(gemini.Gemini), []string{"countTokens", "converse"}
		}, want: "no route of provider gemini: it has generateContent", engine: "a"},
		{name: "passthrough of a path with a dot segment", edit: func(_ *testing.T, c *Config) {
			c.Engines[0].Provider, c.Engines[0].Passthrough = new(anthropic.Anthropic), []string{"/v1/../x*"}
		}, want: "not a clean path", engine: "a"},
		{name: "passthrough of a path with a star inside", edit: func(_ *testing.T, c *Config) {
			c.Engines[0].Provider, c.Engines[0].Passthrough = new(anthropic.Anthropic), []string{"/v1/*/x"}
		}, want: "not a clean path", engine: "a"},
		{name: "a route named on an engine whose API names the model in the path", edit: func(_ *testing.T, c *Config) {
			c.Engines[0].APIs, c.Engines[0].Passthrough = []string{"gemini"}, []string{"countTokens"}
		}, want: "has no routes of its own", engine: "a"},

		// fallbacks
		{name: "a fallback that is no engine", edit: func(_ *testing.T, c *Config) { c.Engines[0].Fallback = "nowhere" }, want: "not an engine of this handler", engine: "a"},
		{name: "a fallback that is the engine itself", edit: func(_ *testing.T, c *Config) { c.Engines[0].Fallback = "a" }, want: "is the engine itself", engine: "a"},
		{name: "fallbacks that chain", edit: func(_ *testing.T, c *Config) {
			c.Engines = append(c.Engines, engine("c", "m3"))
			c.Engines[0].Fallback, c.Engines[1].Fallback = "b", "c"
		}, want: "fallbacks do not chain", engine: "a"},
		{name: "a fallback that speaks fewer APIs", edit: func(_ *testing.T, c *Config) {
			// chat only: translation reaches it from Responses and
			// Messages, never from completions or embeddings
			c.Engines[0].Fallback, c.Engines[1].APIs = "b", []string{"chat"}
		}, want: "does not speak every API", engine: "a"},
		{name: "a context_fallback that is no engine", edit: func(_ *testing.T, c *Config) { c.Engines[0].ContextFallback = "nowhere/m" }, want: "not an engine of this handler", engine: "a"},
		{name: "a context_fallback that is the engine itself", edit: func(_ *testing.T, c *Config) { c.Engines[0].ContextFallback = "a" }, want: "is the engine itself", engine: "a"},
		{name: "a context_fallback that speaks fewer APIs", edit: func(_ *testing.T, c *Config) {
			c.Engines[0].ContextFallback, c.Engines[1].APIs = "b/m2", []string{"chat"}
		}, want: "does not speak every API", engine: "a"},
		{name: "two engines of a group that both preload", edit: func(_ *testing.T, c *Config) {
			c.Engines[0], c.Engines[1] = managed("a", "m1", "m1-alias"), managed("b", "m2")
			for i := range c.Engines {
				c.Engines[i].Preload, c.Engines[i].Group = true, "gpu"
			}
		}, want: "both preload", engine: "b"},

		// the scheduler's memory
		{name: "a negative max_wait", edit: func(_ *testing.T, c *Config) { c.MaxWait = -1 }, want: "max_wait may not be negative"},
		{name: "a negative priority_grace", edit: func(_ *testing.T, c *Config) { c.PriorityGrace = dur(-time.Second) }, want: "priority_grace may not be negative"},
		{name: "a negative memory_budget", edit: func(_ *testing.T, c *Config) { c.MemoryBudget = -1 }, want: "memory_budget may not be negative"},
		{name: "an engine's memory without a budget", edit: func(_ *testing.T, c *Config) {
			c.Engines[0] = managed("a", "m1", "m1-alias")
			c.Engines[0].Memory = 1 << 30
		}, want: "memory", engine: "a"},

		// pools
		{name: "a pool without a name", edit: func(_ *testing.T, c *Config) { c.Pools[0].Name = "" }, want: "needs a name"},
		{name: "a pool without members", edit: func(_ *testing.T, c *Config) { c.Pools[0].Members = nil }, want: "has no members", pool: "both"},
		{name: "a member that is no engine", edit: func(_ *testing.T, c *Config) { c.Pools[0].Members = []string{"c"} }, want: "not an engine of this handler", pool: "both"},
		{name: "a member with an empty model", edit: func(_ *testing.T, c *Config) { c.Pools[0].Members = []string{"a/"} }, want: "use ENGINE or ENGINE/MODEL", pool: "both"},
		{name: "a member listed twice", edit: func(_ *testing.T, c *Config) { c.Pools[0].Members = []string{"a", "a"} }, want: "listed twice", pool: "both"},
		{name: "a sticky body field nobody reads", edit: func(_ *testing.T, c *Config) { c.Pools[0].StickyBody = "session" }, want: "sticky body", pool: "both"},
		{name: "negative failover attempts", edit: func(_ *testing.T, c *Config) { c.Pools[0].FailoverAttempts = -1 }, want: "may not be negative", pool: "both"},
		{name: "a negative failover time", edit: func(_ *testing.T, c *Config) { c.Pools[0].FailoverTime = -1 }, want: "may not be negative", pool: "both"},
		{name: "negative breaker failures", edit: func(_ *testing.T, c *Config) { c.Pools[0].BreakerFailures = -1 }, want: "may not be negative", pool: "both"},
		{name: "a negative breaker cooldown", edit: func(_ *testing.T, c *Config) { c.Pools[0].BreakerCooldown = -1 }, want: "may not be negative", pool: "both"},
		{name: "an unknown balance policy", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{Policy: "random"} }, want: "balance takes", pool: "both"},
		{name: "a cache threshold above 1", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{CacheThreshold: 1.5} }, want: "cache_threshold", pool: "both"},
		{name: "a negative cache threshold", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{CacheThreshold: -0.1} }, want: "cache_threshold", pool: "both"},
		{name: "a negative absolute threshold", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{AbsThreshold: -1} }, want: "balance_abs_threshold", pool: "both"},
		{name: "a relative threshold below 1", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{RelThreshold: 0.5} }, want: "balance_rel_threshold", pool: "both"},
		{name: "a block over 1MiB", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{Block: 1<<20 + 1} }, want: "block is up to 1MiB", pool: "both"},
		{name: "a negative block", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{Block: -1} }, want: "block is up to 1MiB", pool: "both"},
		{name: "an index over its bound", edit: func(_ *testing.T, c *Config) { c.Pools[0].Balance = &Balance{IndexSize: maxIndexSize + 1} }, want: "index_size", pool: "both"},
		{name: "a pool with the name of a model", edit: func(_ *testing.T, c *Config) { c.Pools[0].Name = "m2" }, want: "has the name of a model of engine b", pool: "m2"},
		{name: "a pool defined twice", edit: func(_ *testing.T, c *Config) { c.Pools = append(c.Pools, c.Pools[0]) }, want: "defined twice", pool: "both"},
		{name: "a model named as the default pool", edit: func(_ *testing.T, c *Config) {
			c.Engines[1].Models = []string{"auto"}
			c.Pools[0].Members = []string{"a"}
		}, want: "default pool's sentinel", engine: "b"},

		// keys
		{name: "a short key", edit: func(_ *testing.T, c *Config) { c.Keys[1].Value = "short" }, want: "characters long"},
		{name: "an empty key", edit: func(_ *testing.T, c *Config) { c.Keys[1].Value = "" }, want: "is empty"},
		{name: "a stray comma in a key list", edit: func(_ *testing.T, c *Config) { c.Keys[1].Value = "admin-key-0123456789," }, want: "is empty"},
		{name: "a short token in a key list", edit: func(_ *testing.T, c *Config) { c.Keys[1].Value = "admin-key-0123456789 short" }, want: "characters long"},
		{name: "an operator with rules", edit: func(_ *testing.T, c *Config) { c.Keys[0].Operator = true }, want: "marked operator and has rules", key: "team"},
		{name: "one token under two names", edit: func(_ *testing.T, c *Config) {
			c.Keys = append(c.Keys, Key{Name: "other", Value: "x-key-0123456789abc, team-key-0123456789"})
		}, want: "given twice", key: "other"},
		{name: "rules without a name", edit: func(_ *testing.T, c *Config) { c.Keys[1].Models = []string{"m1"} }, want: "needs a name"},
		{name: "a name given twice with other rules", edit: func(_ *testing.T, c *Config) {
			c.Keys = append(c.Keys, Key{Name: "team", Value: "team-key-abcdefghij", Models: []string{"m2"}})
		}, want: "given twice with different rules", key: "team"},
		{name: "a key model that is served nowhere", edit: func(_ *testing.T, c *Config) { c.Keys[0].Models = []string{"gpt-5"} }, want: "no model or pool of this gateway", key: "team"},
		{name: "the default pool without a pool", edit: func(_ *testing.T, c *Config) { c.Pools = nil; c.Keys[0].Models = []string{"auto"} }, want: "no model or pool of this gateway", key: "team"},
		{name: "a rate limit that quota refuses", edit: func(_ *testing.T, c *Config) { c.Keys[0].Rate = []quota.Limit{{N: 0}} }, want: "invalid limit", key: "team"},
		{name: "an over_budget fallback served nowhere", edit: func(t *testing.T, c *Config) {
			c.Keys[0].Tokens, c.Keys[0].OverBudgetFallback = limitsOf(t, "1k/d"), "gpt-5"
		}, want: "over_budget fallback \"gpt-5\" is no model", key: "team"},
		{name: "an over_budget fallback without a budget", edit: func(_ *testing.T, c *Config) { c.Keys[0].OverBudgetFallback = "m2" }, want: "needs a token or money budget", key: "team"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := valid()
			tc.edit(t, &c)
			err := c.Validate()
			if err == nil {
				t.Fatal("accepted")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v\nwant it to say %q", err, tc.want)
			}
			var ce *ConfigError
			if !errors.As(err, &ce) {
				if tc.engine != "" || tc.pool != "" || tc.key != "" {
					t.Fatalf("%v is no *ConfigError", err)
				}
				return
			}
			if ce.Engine != tc.engine || ce.Pool != tc.pool || ce.Key != tc.key {
				t.Fatalf("names engine %q, pool %q, key %q; want %q, %q, %q", ce.Engine, ce.Pool, ce.Key, tc.engine, tc.pool, tc.key)
			}
		})
	}
}

// A placeholder key is checked once it is resolved, at provision: before,
// neither its length nor its tokens are known.
func TestAPlaceholderKeyIsCheckedAtProvision(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Keys = append(c.Keys, Key{Value: "{env.KEYS}"}, Key{Name: "again", Value: "{env.KEYS}"})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

// The same name may be given twice with the same rules: a key list split
// over lines.
func TestANameGivenTwiceWithTheSameRulesIsOneKey(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Keys = append(c.Keys, Key{Name: "team", Value: "team-key-abcdefghij", Models: []string{"m1", "both"}})
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestCleanPath(t *testing.T) {
	t.Parallel()
	for p, want := range map[string]bool{
		"/v1/chat/completions": true, "/rerank": true, "/": false, "/a//b": false,
		"/a/./b": false, "/a/../b": false, "/a/": false, "/..": false,
	} {
		if got := CleanPath(p); got != want {
			t.Errorf("CleanPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestAPIsOfNamesTheDefaultFamilies(t *testing.T) {
	t.Parallel()
	if got := APIsOf(nil); got != "openai anthropic" {
		t.Errorf("no api list: %q", got)
	}
	if got := APIsOf([]string{"openai", "embeddings"}); got != "openai embeddings" {
		t.Errorf("%q", got)
	}
}

// TestWithDefaultsFillsEachEngine: the defaults block's options go to
// every engine that leaves them unset, then each engine gets its own
// defaults; the caller's engines are not written to.
func TestWithDefaultsFillsEachEngine(t *testing.T) {
	t.Parallel()
	c := valid()
	c.Defaults = &engines.Config{IdleTimeout: caddy.Duration(10 * time.Minute), Queue: 4}
	c.Engines[1].IdleTimeout = caddy.Duration(time.Minute)
	before := append([]engines.Config(nil), c.Engines...)
	got := c.WithDefaults()
	if !reflect.DeepEqual(c.Engines, before) {
		t.Fatal("WithDefaults wrote to the caller's engines")
	}
	if time.Duration(got.Engines[0].IdleTimeout) != 10*time.Minute || got.Engines[0].Queue != 4 {
		t.Errorf("engine a did not inherit the defaults block: %+v", got.Engines[0])
	}
	if time.Duration(got.Engines[1].IdleTimeout) != time.Minute || got.Engines[1].Queue != 4 {
		t.Errorf("engine b: its own idle_timeout is kept, the queue inherited: %+v", got.Engines[1])
	}
	for i, e := range got.Engines {
		if want := before[i].Inherit(*c.Defaults).WithDefaults(); !reflect.DeepEqual(e, want) {
			t.Errorf("engine %s: %+v\nwant the engine's own defaults %+v", e.Name, e, want)
		}
	}
}

// TestEachDefault asserts every default the config package fills or
// names: the handler's limits, a pool's failover and balance, a key's
// reserve and the scheduler's grace.
func TestEachDefault(t *testing.T) {
	t.Parallel()
	b := (*Balance)(nil).WithDefaults()
	for _, d := range []struct {
		name      string
		got, want any
	}{
		{"max_body", DefaultMaxBody, 32 << 20},
		{"max_body_in_flight", Config{}.WithDefaults().MaxBodyInFlight, int64(256 << 20)},
		{"max_body_in_flight, at least twice max_body", Config{MaxBody: 1 << 30}.WithDefaults().MaxBodyInFlight, int64(2 << 30)},
		{"body_timeout", DefaultBodyTimeout, 2 * time.Minute},
		{"max_fallbacks", DefaultMaxFallbacks, 4},
		{"max_attempts", DefaultMaxAttempts, 8},
		{"keepalive", DefaultKeepAlive, 3 * time.Second},
		{"a key's shortest length", MinKeyLength, 16},
		{"extra_paths", DefaultExtraPaths, []string{"/completion", "/completions", "/embedding", "/embeddings", "/rerank", "/reranking", "/infill", "/tokenize", "/detokenize", "/apply-template"}},
		{"a pool's failover_time", DefaultFailoverTime, 60 * time.Second},
		{"the default pool", DefaultPool, "auto"},
		{"priority_grace", Config{}.Grace(), engines.DefaultPriorityGrace},
		{"balance", b.Policy, BalanceAffinity},
		{"cache_threshold", b.CacheThreshold, 0.3},
		{"balance_rel_threshold", b.RelThreshold, 1.5},
		{"block", b.Block, 256},
		{"index_size", b.IndexSize, 65536},
		{"balance_abs_threshold, capacity unknown", b.AbsFor(0), 64},
		{"balance_abs_threshold, capacity known", b.AbsFor(12), 12},
	} {
		if !reflect.DeepEqual(d.got, d.want) {
			t.Errorf("%s: %v, want %v", d.name, d.got, d.want)
		}
	}
}

func TestDefaultsFillWhatEnginesLeaveUnset(t *testing.T) {
	t.Parallel()
	ten := caddy.Duration(10 * 60e9)
	cfg := Config{
		Defaults: &engines.Config{IdleTimeout: ten, Fallback: "cloud", Strip: []string{"temperature"}},
		Engines: []engines.Config{
			{Name: "a", To: "http://127.0.0.1:1", Models: []string{"a"}},
			{Name: "b", To: "http://127.0.0.1:2", Models: []string{"b"}, IdleTimeout: caddy.Duration(60e9), Strip: []string{"top_p"}},
			{Name: "cloud", To: "http://127.0.0.1:3", Models: []string{"c"}},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got := cfg.WithDefaults().Engines
	if got[0].IdleTimeout != ten || got[0].Fallback != "cloud" || got[0].Strip[0] != "temperature" {
		t.Fatalf("a: %+v", got[0])
	}
	if got[1].IdleTimeout != caddy.Duration(60e9) || got[1].Strip[0] != "top_p" || len(got[1].Strip) != 1 {
		t.Fatalf("b kept its own: %+v", got[1])
	}
	if got[2].Fallback != "" {
		t.Fatal("the default fallback was given to itself")
	}
	if cfg.Engines[0].IdleTimeout != 0 {
		t.Fatal("WithDefaults changed the config it was given")
	}
	bad := Config{Defaults: &engines.Config{Models: []string{"x"}}, Engines: cfg.Engines}
	if err := bad.Validate(); err == nil {
		t.Fatal("defaults with models accepted")
	}
}

func TestAFallbackBetweenAPIsNeedsTranslation(t *testing.T) {
	t.Parallel()
	cfg := Config{Engines: []engines.Config{
		{Name: "claude-local", To: "http://127.0.0.1:1", Models: []string{"a"}, Fallback: "gpt"},
		{Name: "gpt", To: "http://127.0.0.1:2", Models: []string{"b"}, APIs: []string{"openai"}},
	}}
	if err := cfg.Validate(); err != nil {
		t.Fatalf("an OpenAI fallback of an engine that speaks Messages too, through translation: %v", err)
	}
	cfg.Translate = new(bool)
	err := cfg.Validate()
	if err == nil || !strings.Contains(err.Error(), "engine claude-local") || !strings.Contains(err.Error(), "fallback gpt") {
		t.Fatalf("translate off: %v", err)
	}
}

// A priority_grace of 0 is set, not unset: it turns the protection off.
func TestAPriorityGraceOfZeroTurnsItOff(t *testing.T) {
	t.Parallel()
	zero := caddy.Duration(0)
	if got := (Config{PriorityGrace: &zero}).Grace(); got != 0 {
		t.Errorf("priority_grace 0: %v", got)
	}
}
