// Package engines owns one upstream's life: where it is, whether it is ready,
// and, for an engine with a command, its process: start on demand, readiness
// probing, leases, idle drain and exclusive groups.
package engines

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// PortPlaceholder in Cmd, Env and To is replaced by a free loopback port
// picked each time the engine starts. (Not {port}: the Caddyfile adapter turns
// that into {http.request.port} before a directive ever sees it.)
const PortPlaceholder = "{engine.port}"

// PIDPlaceholder in StopCmd is replaced by the pid of the engine's process
// (the leader of its process group) when the engine is stopped.
const PIDPlaceholder = "{engine.pid}"

// NamePlaceholder in Cmd, Env, Dir, StopCmd and To is the engine's name
// (llama-swap's ${MODEL_ID}), so that one `defaults` cmd or snippet serves
// every engine.
const NamePlaceholder = "{engine.name}"

// The values of Evict.
const (
	EvictIdle  = "idle"
	EvictNever = "never"
)

// ReadyNone as the Ready path turns the readiness probe off (llama-swap's
// `checkEndpoint: none`): a started engine is ready as soon as its process
// runs, for a server that has no path answering 2xx once it has loaded.
const ReadyNone = "none"

// foreignPlaceholder matches what other tools write for a value filled in
// at start: llama-swap's ${PORT} and ${MODEL_ID}, a shell's ${NAME}.
var foreignPlaceholder = regexp.MustCompile(`\$\{[^}]*\}?`)

// CheckPlaceholders refuses, in an option that takes {engine.port} (named
// option, for the error), the placeholders that nothing here fills in and
// that would reach the engine as written: llama-swap's ${PORT} validates
// today and fails at the first request with "invalid port" (issue 28), and
// {port} is the request's port in a Caddyfile (the adapter turns it into
// {http.request.port}), never the engine's.
func CheckPlaceholders(option string, values ...string) error {
	for _, v := range values {
		if m := foreignPlaceholder.FindString(v); m != "" {
			switch m {
			case "${PORT}":
				return fmt.Errorf("%s: %s is llama-swap's placeholder and nothing fills it in here: write %s (a free port picked at each start)", option, m, PortPlaceholder)
			case "${MODEL_ID}":
				return fmt.Errorf("%s: %s is llama-swap's placeholder and nothing fills it in here: write %s (the engine's name)", option, m, NamePlaceholder)
			}
			return fmt.Errorf("%s: %s is not filled in here: write %s for the engine's port, %s for its name, {env.NAME} for an environment variable (in a shell script, $NAME without braces)",
				option, m, PortPlaceholder, NamePlaceholder)
		}
		for _, p := range []string{"{port}", "{http.request.port}"} {
			if strings.Contains(v, p) {
				return fmt.Errorf("%s: %s is the port of the request to Caddy, not the engine's: write %s (a free port picked at each start)", option, p, PortPlaceholder)
			}
		}
	}
	return nil
}

// Config describes one engine: an upstream serving one or more models, which
// the gateway may also start and stop when it has a command.
type Config struct {
	// Name of the engine, unique in its handler. Shown in errors, logs,
	// the X-LLM-Engine response header and as owned_by in /v1/models.
	Name string `json:"name,omitempty"`

	// To is the engine's base URL (http or https), e.g.
	// "http://127.0.0.1:{engine.port}" or "https://api.openai.com". The
	// request path is appended to it. Required.
	To string `json:"to,omitempty"`

	// Models are the names clients may ask for. At least one is required.
	Models []string `json:"models,omitempty"`

	// ModelName is what the engine itself calls the model: the body's
	// "model" is rewritten to it. Default: the body is left alone.
	ModelName string `json:"model_name,omitempty"`

	// Unlisted keeps the engine's models out of /v1/models (llama-swap's
	// unlisted): they are served all the same, and GET /v1/models/<name>
	// answers for them. Default: false.
	Unlisted bool `json:"unlisted,omitempty"`

	// APIKey is sent to the engine instead of the caller's credentials
	// (which never leave the gateway). Placeholders such as {env.KEY} are
	// resolved at provision time. Default: no key is sent.
	APIKey string `json:"api_key,omitempty"`

	// APIs are the API families the engine speaks: "openai" (chat
	// completions, responses, embeddings, …), "anthropic" (the Messages
	// API, /v1/messages) and "embeddings" (an embedding model: only
	// OpenAI's /v1/embeddings and llama-server's /embedding(s), which
	// "openai" includes). A request of a family the engine does not speak
	// never reaches it, so a pool may mix an embedding engine with chat
	// engines (issue 28), and an engine's fallbacks must speak every
	// family the engine does. Default: openai and anthropic (llama.cpp's
	// server, ollama and vLLM answer both).
	APIs []string `json:"apis,omitempty"`

	// APIKeyHeader is the header that carries APIKey. Default:
	// "Authorization" with the value "Bearer <key>"; any other header
	// carries the bare key.
	APIKeyHeader string `json:"api_key_header,omitempty"`

	// Cmd is the command that runs the engine; without it the engine is
	// remote and never started by the gateway. Default: none.
	Cmd []string `json:"cmd,omitempty"`

	// Dir is the working directory of Cmd. Default: Caddy's.
	Dir string `json:"dir,omitempty"`

	// Env holds extra KEY=VALUE variables for Cmd, on top of Caddy's own
	// environment. Default: none.
	Env []string `json:"env,omitempty"`

	// Ready is the readiness path probed with GET; any 2xx is ready.
	// "none" turns the probe off: a started engine is ready once its
	// process runs, a remote one always. Default: /health.
	Ready string `json:"ready,omitempty"`

	// HealthInterval turns on active health checks of a remote engine (one
	// without Cmd): every interval, GET HealthPath. An engine that fails
	// HealthFails checks in a row is down (no request is sent to it, pools
	// skip it) until it passes HealthPasses in a row. Caddy's
	// reverse_proxy health_interval is the model. Default: 0 (off).
	HealthInterval caddy.Duration `json:"health_interval,omitempty"`

	// HealthPath is the path of the health check; any 2xx passes.
	// Default: the engine's Ready path.
	HealthPath string `json:"health_path,omitempty"`

	// HealthTimeout bounds one health check. Default: 5s.
	HealthTimeout caddy.Duration `json:"health_timeout,omitempty"`

	// HealthPasses is how many checks in a row a down engine must pass to
	// be up again. Default: 1.
	HealthPasses int `json:"health_passes,omitempty"`

	// HealthFails is how many checks in a row an engine must fail to be
	// down. Default: 1.
	HealthFails int `json:"health_fails,omitempty"`

	// ModelsFrom is the path of a remote engine's model list that reports
	// each model's state (status.value loaded, loading or unloaded, as
	// another llm_gateway, llama-swap and llama.cpp's router mode do):
	// pools prefer the node where the model is loaded, wait for one loading
	// it, and only then make a node load it; with wake off, never.
	// Usually /v1/models. Default: "" (the engine is running or not as a
	// whole).
	ModelsFrom string `json:"models_from,omitempty"`

	// Wake overrides the handler's wake policy for this engine: whether a
	// request may start it. Default: the handler's (on).
	Wake *bool `json:"wake,omitempty"`

	// StartTimeout bounds a start from spawning to ready. Default: 5m.
	StartTimeout caddy.Duration `json:"start_timeout,omitempty"`

	// IdleTimeout stops a started engine that has held no lease for this
	// long; 0 keeps it running. Default: 0 (never).
	IdleTimeout caddy.Duration `json:"idle_timeout,omitempty"`

	// StopTimeout is the time between SIGTERM to the engine's process
	// group and SIGKILL; with StopCmd, also the time the command has
	// before the signals follow. Default: 10s.
	StopTimeout caddy.Duration `json:"stop_timeout,omitempty"`

	// StopCmd stops the engine instead of SIGTERM (llama-swap's cmdStop),
	// e.g. ["docker", "stop", "qwen"] for an engine run with `docker run`:
	// {engine.pid} and {engine.port} in it are the running engine's. It
	// runs with the engine's Dir and Env, its output goes to the engine's
	// log. A command that fails is logged and SIGTERM follows at once; an
	// engine still running StopTimeout after the command began gets
	// SIGTERM, then SIGKILL after another StopTimeout. Default: none
	// (SIGTERM).
	StopCmd []string `json:"stop_cmd,omitempty"`

	// Preload starts the engine when the config that has it begins to
	// run, rather than at the first request for it; never while the
	// config is only provisioned (`caddy validate`). In a group, at most
	// one engine of a handler may preload, and a preload never evicts a
	// group peer that is already running or starting. A failed preload is
	// logged; the next request starts the engine as usual. Default: false.
	Preload bool `json:"preload,omitempty"`

	// MaxConcurrent is how many requests may be in flight on the engine at
	// once (holding a lease, or waiting for its start); 0 is no limit.
	// Further requests wait in the engine's queue, or go to its fallback
	// when the queue is full. Default: 0.
	MaxConcurrent int `json:"max_concurrent,omitempty"`

	// Queue is how many requests may wait, in order of arrival, for one of
	// the MaxConcurrent places; one more is refused (429 engine_busy, with
	// Retry-After) or goes to the fallback. Default: 0 (no waiting).
	Queue int `json:"queue,omitempty"`

	// QueueTimeout bounds one request's wait in the queue; a request that
	// waited this long is refused as one beyond the queue is. Default: 60s.
	QueueTimeout caddy.Duration `json:"queue_timeout,omitempty"`

	// Group makes engines exclusive: engines of one group never run at the
	// same time (one GPU): the scheduler's rule with a budget of one.
	// Default: none.
	Group string `json:"group,omitempty"`

	// Memory is what the engine holds while it runs (weights, cache), in
	// bytes, counted against the handler's memory_budget: a start is
	// admitted only if what is loaded plus it fits, else idle engines are
	// stopped to make room. The operator's number wins over any estimate.
	// Default: 0 (not counted).
	Memory int64 `json:"memory,omitempty"`

	// MinLoaded protects a warm engine: it is not stopped to make room for
	// another for this long after it last served. Default: 0.
	MinLoaded caddy.Duration `json:"min_loaded,omitempty"`

	// Evict is whether the scheduler may stop the engine to make room:
	// "idle" (once it has no requests in flight or queued) or "never"
	// (only its idle_timeout or an operator stops it). Default: idle.
	Evict string `json:"evict,omitempty"`

	// Devices are the GPUs the engine runs on, a device set that has a
	// memory_budget of its own (memory_budget <size> devices <ids>): its
	// memory counts against that set's budget only. Its process gets
	// CUDA_VISIBLE_DEVICES set to them unless Env sets it. Default: none
	// (the handler's memory_budget).
	Devices []int `json:"devices,omitempty"`

	// Swap is what the scheduler does to the engine when it makes room or
	// sleep_after passes (issue 26, sleep.go): "stop" ends its process;
	// "sleep" asks the engine to free its GPU and keep its weights in host
	// memory (vLLM's --enable-sleep-mode), and a request wakes it. A sleep
	// or a wake that fails falls back to a stop or a restart. Default: stop.
	Swap string `json:"swap,omitempty"`

	// Sleep are the engine's sleep endpoints, for swap sleep. Default:
	// vLLM's (POST /sleep?level=1, POST /wake_up, GET /is_sleeping).
	Sleep *SleepPaths `json:"sleep,omitempty"`

	// SleepAfter puts an idle engine with swap sleep to sleep once it has
	// held no lease for this long; idle_timeout, counted from the same last
	// use, then stops it. Default: 0 (only the scheduler puts it to sleep).
	SleepAfter caddy.Duration `json:"sleep_after,omitempty"`

	// Slots saves the KV cache slots of the engine's recent sessions to
	// disk before it is stopped or put to sleep, and restores a session's
	// slot when its next turn arrives (llama-server's --slot-save-path;
	// issue 26, slots.go). Default: none.
	Slots *SlotsConfig `json:"slots,omitempty"`

	// DialTimeout bounds connecting to the engine. Default: 10s.
	DialTimeout caddy.Duration `json:"dial_timeout,omitempty"`

	// Transport configures how requests reach the engine: Caddy's own
	// HTTP transport (the "http" module of reverse_proxy: TLS to an
	// internal CA, client certificates, tls_server_name, h2c, keep-alive
	// tuning, a proxy), written as reverse_proxy writes its "transport".
	// DialTimeout applies when it sets no dial_timeout of its own.
	// Default: Caddy's HTTP transport with its defaults.
	Transport json.RawMessage `json:"transport,omitempty" caddy:"namespace=http.reverse_proxy.transport inline_key=protocol"`

	// HeaderTimeout bounds the wait for response headers once the request
	// is sent. A non-streaming llama-server answers only when generation
	// ends, so the default is generous. Default: 5m.
	HeaderTimeout caddy.Duration `json:"header_timeout,omitempty"`

	// HangupGrace is how long an engine may be silent before a hang-up
	// (the connection closed before response headers) counts as a timeout
	// rather than a reset: no second try on this engine, the request moves
	// on at once. An instant hang-up is still retried. Default: the
	// dial_timeout.
	HangupGrace caddy.Duration `json:"hangup_grace,omitempty"`

	// RequestTimeout bounds one whole attempt, body included; 0 is no
	// bound, so a long generation is never cut by a default. Default: 0.
	RequestTimeout caddy.Duration `json:"request_timeout,omitempty"`

	// FirstTokenTimeout bounds the wait for the first content event of a
	// stream once its headers arrived; 0 is off. Default: 0.
	FirstTokenTimeout caddy.Duration `json:"first_token_timeout,omitempty"`

	// StreamIdleTimeout bounds the gap between two events of a stream.
	// Default: 60s.
	StreamIdleTimeout caddy.Duration `json:"stream_idle_timeout,omitempty"`

	// Fallback names another engine of the same handler that serves this
	// engine's requests while it is slow to start (FallbackAfter), while
	// its breaker is open, and after it failed. The fallback is never
	// started, leased or drained by the gateway. Default: none.
	Fallback string `json:"fallback,omitempty"`

	// FallbackAfter is how long a request waits for this engine to come
	// up before it may go to the fallback. Default: 10s.
	FallbackAfter caddy.Duration `json:"fallback_after,omitempty"`

	// FallbackModel is what the fallback calls the model: the body's model
	// is rewritten to it on the switch. Default: the body is left alone.
	FallbackModel string `json:"fallback_model,omitempty"`

	// ContextFallback is ENGINE or ENGINE/MODEL: where a 400 saying the
	// context is too long goes. Default: none (the 400 is returned).
	ContextFallback string `json:"context_fallback,omitempty"`

	// Retries is how many more times a transient failure (closed before
	// headers, 429, 500, 502, 503, 504) is tried on this engine, with
	// jittered exponential back-off. Default: 1.
	Retries *int `json:"retries,omitempty"`

	// RetryAfterMax is the longest Retry-After that is waited out; a
	// longer one goes to the fallback at once. Default: 5s.
	RetryAfterMax caddy.Duration `json:"retry_after_max,omitempty"`

	// Resume continues a stream that this engine cut or stalled after it
	// committed on the engine's fallback, which must have Prefill.
	// Default: false.
	Resume *bool `json:"resume,omitempty"`

	// Prefill says this engine continues an assistant message placed last
	// in a chat request (llama.cpp, vLLM and Anthropic-style APIs do), so
	// it can resume another engine's cut stream. Default: false.
	Prefill *bool `json:"prefill,omitempty"`

	// LoadingStatus sends a streaming chat request that waits for this
	// engine to start its progress as reasoning_content deltas ("loading
	// qwen… 12 s"), which chat UIs show in their thinking box. It alters
	// the content stream, so it is opt-in. Default: false.
	LoadingStatus *bool `json:"loading_status,omitempty"`

	// Set edits the JSON body sent to this engine, after the model
	// rewrite: each entry gives the member at Path (names joined by dots,
	// "chat_template_kwargs.enable_thinking") a JSON value, replacing it or
	// adding it. Default: none.
	Set []BodySetting `json:"set,omitempty"`

	// Strip removes members (paths as for Set) from the JSON body sent to
	// this engine: "temperature" for a reasoning model. Default: none.
	Strip []string `json:"strip,omitempty"`

	// Signals turns on reading the engine's own load in the background
	// (signals.go): "metrics" reads its Prometheus /metrics every
	// SignalsInterval (llama-server needs --metrics; vLLM always has it);
	// "off" does not. Pools then route by the engine's own queue too, and
	// the gateway's /metrics re-exposes the engine's as
	// llm_gateway_engine_*. Default: off.
	Signals string `json:"signals,omitempty"`

	// SignalsPath is the path of the engine's metrics. Default: /metrics.
	SignalsPath string `json:"signals_path,omitempty"`

	// SignalsSlotsPath is the path of llama-server's slot list (needs
	// --slots on builds where it is off), read with its /metrics to learn
	// how many slots it has and how many are busy; "off" reads only the
	// metrics. Only an engine whose metrics carry llama-server's names is
	// asked. Default: /slots.
	SignalsSlotsPath string `json:"signals_slots_path,omitempty"`

	// SignalsInterval is the time between two reads. Default: 1s.
	SignalsInterval caddy.Duration `json:"signals_interval,omitempty"`

	// SignalsStale is the age after which a read is ignored (the engine
	// stopped answering it): the pool then sees only the gateway's own
	// counts. Default: 2s.
	SignalsStale caddy.Duration `json:"signals_stale,omitempty"`

	// BreakerFailures is how many consecutive failures open the engine's
	// circuit breaker. Default: 5.
	BreakerFailures int `json:"breaker_failures,omitempty"`

	// BreakerCooldown is how long an open breaker keeps requests away
	// before one trial request is let through. Default: 30s.
	BreakerCooldown caddy.Duration `json:"breaker_cooldown,omitempty"`
}

// Defaults.
const (
	DefaultReady         = "/health"
	DefaultStartTimeout  = 5 * time.Minute
	DefaultStopTimeout   = 10 * time.Second
	DefaultDialTimeout   = 10 * time.Second
	DefaultHeaderTimeout = 5 * time.Minute
	DefaultStreamIdle    = 60 * time.Second
	DefaultFallbackAfter = 10 * time.Second
	DefaultRetries       = 1
	DefaultRetryAfterMax = 5 * time.Second
	DefaultBreakerFails  = 5
	DefaultBreakerCool   = 30 * time.Second
	DefaultHealthTimeout = 5 * time.Second
	DefaultHealthPasses  = 1
	DefaultHealthFails   = 1
	DefaultQueueTimeout  = 60 * time.Second
)

// WithDefaults returns c with every unset field set to its default, and
// {engine.name} filled in: every engine's config passes here after it has
// inherited the handler's defaults, so a `defaults` cmd names each engine.
func (c Config) WithDefaults() Config {
	c = c.withName()
	if c.Ready == "" {
		c.Ready = DefaultReady
	}
	if c.HealthInterval > 0 {
		if c.HealthPath == "" && c.Ready != ReadyNone {
			c.HealthPath = c.Ready
		}
		if c.HealthTimeout == 0 {
			c.HealthTimeout = caddy.Duration(DefaultHealthTimeout)
		}
		if c.HealthPasses == 0 {
			c.HealthPasses = DefaultHealthPasses
		}
		if c.HealthFails == 0 {
			c.HealthFails = DefaultHealthFails
		}
	}
	if c.Queue > 0 && c.QueueTimeout == 0 {
		c.QueueTimeout = caddy.Duration(DefaultQueueTimeout)
	}
	if c.StartTimeout == 0 {
		c.StartTimeout = caddy.Duration(DefaultStartTimeout)
	}
	if c.StopTimeout == 0 {
		c.StopTimeout = caddy.Duration(DefaultStopTimeout)
	}
	if c.DialTimeout == 0 {
		c.DialTimeout = caddy.Duration(DefaultDialTimeout)
	}
	if c.HeaderTimeout == 0 {
		c.HeaderTimeout = caddy.Duration(DefaultHeaderTimeout)
	}
	if c.HangupGrace == 0 {
		c.HangupGrace = c.DialTimeout
	}
	if c.StreamIdleTimeout == 0 {
		c.StreamIdleTimeout = caddy.Duration(DefaultStreamIdle)
	}
	if c.FallbackAfter == 0 {
		c.FallbackAfter = caddy.Duration(DefaultFallbackAfter)
	}
	if c.Retries == nil {
		n := DefaultRetries
		c.Retries = &n
	}
	if c.RetryAfterMax == 0 {
		c.RetryAfterMax = caddy.Duration(DefaultRetryAfterMax)
	}
	if c.BreakerFailures == 0 {
		c.BreakerFailures = DefaultBreakerFails
	}
	if c.BreakerCooldown == 0 {
		c.BreakerCooldown = caddy.Duration(DefaultBreakerCool)
	}
	c = c.withSwapDefaults()
	return c.withSignalDefaults()
}

// withName returns c with {engine.name} replaced by its name in the options
// that take {engine.port}, in copies of its slices (which it may share with
// the defaults it inherited).
func (c Config) withName() Config {
	if c.Name == "" {
		return c
	}
	return c.Rewrite(func(s string) string { return strings.ReplaceAll(s, NamePlaceholder, c.Name) })
}

// Rewrite returns c with f applied to the options that may hold
// placeholders ({engine.name}, {engine.port}, Caddy's {env.*}): To, Dir,
// Cmd, Env and StopCmd, in copies of its slices (which it may share with
// the defaults it inherited). The caddy module resolves Caddy's
// placeholders with it.
func (c Config) Rewrite(f func(string) string) Config {
	each := func(in []string) []string {
		if in == nil {
			return nil
		}
		out := make([]string, len(in))
		for i, s := range in {
			out[i] = f(s)
		}
		return out
	}
	c.To, c.Dir = f(c.To), f(c.Dir)
	c.Cmd, c.Env, c.StopCmd = each(c.Cmd), each(c.Env), each(c.StopCmd)
	if c.Slots != nil {
		s := *c.Slots
		s.Dir = f(s.Dir) // the engine's --slot-save-path, written the same way
		c.Slots = &s
	}
	return c
}

// Repeated is the first name that names lists twice, or "".
func Repeated(names []string) string {
	seen := make(map[string]bool, len(names))
	for _, n := range names {
		if seen[n] {
			return n
		}
		seen[n] = true
	}
	return ""
}

// ProbesReady reports whether the engine has a readiness probe (not
// `ready none`).
func (c *Config) ProbesReady() bool { return c.Ready != ReadyNone }

// SetKey puts the engine's own key in h, as the engine wants it: the
// Authorization bearer, or the bare key in the header it names.
func (c *Config) SetKey(h http.Header) {
	if c.APIKey == "" {
		return
	}
	if c.APIKeyHeader == "" || strings.EqualFold(c.APIKeyHeader, "Authorization") {
		h.Set("Authorization", "Bearer "+c.APIKey)
		return
	}
	h.Set(c.APIKeyHeader, c.APIKey)
}

// Speaks reports whether the engine speaks an API family ("openai",
// "anthropic", "embeddings"): an embeddings request is OpenAI's too.
func (c *Config) Speaks(family string) bool {
	if len(c.APIs) == 0 {
		return true
	}
	for _, a := range c.APIs {
		if a == family || (family == "embeddings" && a == "openai") {
			return true
		}
	}
	return false
}

// BodySetting is one `set <path> <json>` filter.
type BodySetting struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// checkFilterPath refuses a filter path the gateway itself reads: a body
// whose model or stream the engine sees differently from the gateway would
// route one way and answer another.
func checkFilterPath(p string) error {
	segs := strings.Split(p, ".")
	for _, s := range segs {
		if s == "" {
			return fmt.Errorf("bad path %q: names joined by dots, none empty", p)
		}
	}
	switch strings.ToLower(segs[0]) {
	case "model", "stream", "fallbacks":
		return fmt.Errorf("%q is the gateway's to read, not a filter's to change (model_name renames the model)", segs[0])
	}
	return nil
}

// ValidateFilters checks the set and strip filters.
func (c Config) ValidateFilters() error {
	where := "defaults"
	if c.Name != "" {
		where = "engine " + c.Name
	}
	for _, s := range c.Set {
		if err := checkFilterPath(s.Path); err != nil {
			return fmt.Errorf("%s: set: %v", where, err)
		}
		if !json.Valid(s.Value) {
			return fmt.Errorf("%s: set %s: the value %q is not JSON (a string is written in quotes: `\"low\"`)", where, s.Path, s.Value)
		}
	}
	for _, p := range c.Strip {
		if err := checkFilterPath(p); err != nil {
			return fmt.Errorf("%s: strip: %v", where, err)
		}
	}
	return nil
}

// Resumes reports whether resume is on.
func (c *Config) Resumes() bool { return c.Resume != nil && *c.Resume }

// Prefills reports whether prefill is on.
func (c *Config) Prefills() bool { return c.Prefill != nil && *c.Prefill }

// ShowsLoading reports whether loading_status is on.
func (c *Config) ShowsLoading() bool { return c.LoadingStatus != nil && *c.LoadingStatus }

// Managed reports whether the gateway runs this engine's process.
func (c *Config) Managed() bool { return len(c.Cmd) > 0 }

// Validate checks one engine's definition on its own; cross-engine rules
// (unique names and models) are the handler's.
func (c Config) Validate() error {
	if c.Name == "" {
		return fmt.Errorf("an engine needs a name")
	}
	if strings.ContainsAny(c.Name, "/ \t") {
		return fmt.Errorf("engine %s: a name may not contain '/' or spaces", c.Name)
	}
	if c.To == "" {
		return fmt.Errorf("engine %s: missing 'to' (the engine's base URL)", c.Name)
	}
	if c.Memory < 0 || c.MinLoaded < 0 {
		return fmt.Errorf("engine %s: memory and min_loaded may not be negative", c.Name)
	}
	if c.Evict != "" && c.Evict != EvictIdle && c.Evict != EvictNever {
		return fmt.Errorf("engine %s: evict takes idle or never, not %q", c.Name, c.Evict)
	}
	if (c.Memory > 0 || c.MinLoaded > 0 || c.Evict != "" || len(c.Devices) > 0) && !c.Managed() {
		return fmt.Errorf("engine %s: memory, min_loaded, evict and devices are for an engine the gateway starts (with cmd)", c.Name)
	}
	if len(c.Devices) > 0 {
		if _, err := ParseDevices(DeviceSet(c.Devices)); err != nil {
			return fmt.Errorf("engine %s: devices are device ids from 0, each once", c.Name)
		}
	}
	if c.Managed() && !canStartProcesses {
		return errNoLocalEngines(c.Name)
	}
	if err := c.validateSignals(); err != nil {
		return err
	}
	if err := c.validateSwap(); err != nil {
		return err
	}
	for _, o := range []struct {
		name   string
		values []string
	}{{"to", []string{c.To}}, {"cmd", c.Cmd}, {"stop_cmd", c.StopCmd}} {
		if err := CheckPlaceholders(o.name, o.values...); err != nil {
			return fmt.Errorf("engine %s: %v", c.Name, err)
		}
	}
	// a placeholder such as {env.CPU_ENGINE} is checked once resolved, at
	// provision; {engine.port} stands for a port here
	if to := strings.ReplaceAll(c.To, PortPlaceholder, "1"); !strings.Contains(to, "{") {
		u, err := url.Parse(to)
		if err != nil {
			return fmt.Errorf("engine %s: bad 'to' URL: %v", c.Name, err)
		}
		if u.Scheme != "http" && u.Scheme != "https" {
			return fmt.Errorf("engine %s: 'to' must be an http:// or https:// URL, not %q", c.Name, c.To)
		}
		if u.Host == "" {
			return fmt.Errorf("engine %s: 'to' has no host: %q", c.Name, c.To)
		}
	}
	if len(c.Models) == 0 {
		return fmt.Errorf("engine %s: missing 'models' (the names clients ask for)", c.Name)
	}
	if m := Repeated(c.Models); m != "" {
		return fmt.Errorf("engine %s: model %s is listed twice in its models", c.Name, m)
	}
	if err := c.ValidateFilters(); err != nil {
		return err
	}
	if c.ModelsFrom != "" && (c.Managed() || !strings.HasPrefix(c.ModelsFrom, "/")) {
		return fmt.Errorf("engine %s: models_from takes a path starting with '/' and is for remote engines (no cmd): the gateway knows its own engines' state", c.Name)
	}
	for _, a := range c.APIs {
		if a != "openai" && a != "anthropic" && a != "embeddings" {
			return fmt.Errorf("engine %s: api takes openai, anthropic and/or embeddings, not %q", c.Name, a)
		}
	}
	usesPort := strings.Contains(c.To, PortPlaceholder) || strings.Contains(strings.Join(c.Cmd, " "), PortPlaceholder)
	if usesPort && !c.Managed() {
		return fmt.Errorf("engine %s: %s needs 'cmd': only an engine the gateway starts gets a picked port", c.Name, PortPlaceholder)
	}
	if !strings.HasPrefix(c.Ready, "/") && c.Ready != "" && c.Ready != ReadyNone {
		return fmt.Errorf("engine %s: 'ready' must be a path starting with '/', or none", c.Name)
	}
	if err := c.validateHealth(); err != nil {
		return err
	}
	if c.Retries != nil && *c.Retries < 0 {
		return fmt.Errorf("engine %s: retries may not be negative", c.Name)
	}
	if c.BreakerFailures < 0 {
		return fmt.Errorf("engine %s: breaker failures may not be negative", c.Name)
	}
	if err := c.validateLifeOptions(); err != nil {
		return err
	}
	if err := c.validateTransport(); err != nil {
		return err
	}
	for _, kv := range c.Env {
		if k, _, ok := strings.Cut(kv, "="); !ok || k == "" {
			return fmt.Errorf("engine %s: env %q is not KEY=VALUE", c.Name, kv)
		}
	}
	for _, d := range []struct {
		name string
		v    caddy.Duration
	}{
		{"start_timeout", c.StartTimeout}, {"idle_timeout", c.IdleTimeout}, {"stop_timeout", c.StopTimeout},
		{"dial_timeout", c.DialTimeout}, {"header_timeout", c.HeaderTimeout}, {"hangup_grace", c.HangupGrace}, {"request_timeout", c.RequestTimeout},
		{"first_token_timeout", c.FirstTokenTimeout}, {"stream_idle_timeout", c.StreamIdleTimeout},
		{"fallback_after", c.FallbackAfter}, {"retry_after_max", c.RetryAfterMax}, {"breaker cool-down", c.BreakerCooldown},
		{"queue timeout", c.QueueTimeout},
	} {
		if d.v < 0 {
			return fmt.Errorf("engine %s: %s may not be negative", c.Name, d.name)
		}
	}
	return nil
}

// validateLifeOptions checks stop_cmd, preload and the concurrency limit.
func (c Config) validateLifeOptions() error {
	if len(c.StopCmd) > 0 && !c.Managed() {
		return fmt.Errorf("engine %s: stop_cmd needs 'cmd': only an engine the gateway starts is stopped by it", c.Name)
	}
	if c.Preload && !c.Managed() {
		return fmt.Errorf("engine %s: preload needs 'cmd': a remote engine is not started by the gateway", c.Name)
	}
	if c.MaxConcurrent < 0 || c.Queue < 0 {
		return fmt.Errorf("engine %s: max_concurrent and queue may not be negative", c.Name)
	}
	if (c.Queue > 0 || c.QueueTimeout > 0) && c.MaxConcurrent == 0 {
		return fmt.Errorf("engine %s: queue needs max_concurrent: without a limit no request ever waits", c.Name)
	}
	return nil
}

// Checked reports whether the engine has active health checks.
func (c *Config) Checked() bool { return c.HealthInterval > 0 && !c.Managed() }

func (c Config) validateHealth() error {
	set := c.HealthInterval != 0 || c.HealthPath != "" || c.HealthTimeout != 0 || c.HealthPasses != 0 || c.HealthFails != 0
	if !set {
		return nil
	}
	if c.Managed() {
		// the gateway runs it: its readiness probe and crash detection
		// already know whether it is up
		return fmt.Errorf("engine %s: health checks are for remote engines; one with 'cmd' is watched through its process and 'ready' path", c.Name)
	}
	if c.HealthInterval <= 0 {
		return fmt.Errorf("engine %s: health checks need health_interval", c.Name)
	}
	if c.HealthPath == "" && c.Ready == ReadyNone {
		return fmt.Errorf("engine %s: health checks of an engine with 'ready none' need a health_path", c.Name)
	}
	if c.HealthPath != "" && !strings.HasPrefix(c.HealthPath, "/") {
		return fmt.Errorf("engine %s: 'health_path' must be a path starting with '/'", c.Name)
	}
	if c.HealthTimeout < 0 || c.HealthPasses < 0 || c.HealthFails < 0 {
		return fmt.Errorf("engine %s: health_timeout, health_passes and health_fails may not be negative", c.Name)
	}
	return nil
}

// validateTransport checks that a transport is one the gateway provisions:
// Caddy's "http" transport module (the only one that carries requests to a
// URL the gateway names).
func (c Config) validateTransport() error {
	if len(c.Transport) == 0 {
		return nil
	}
	var t struct {
		Protocol string `json:"protocol"`
	}
	if err := json.Unmarshal(c.Transport, &t); err != nil {
		return fmt.Errorf("engine %s: bad transport: %v", c.Name, err)
	}
	if t.Protocol != "http" {
		return fmt.Errorf("engine %s: transport %q is not supported: use transport http { … }", c.Name, t.Protocol)
	}
	return nil
}

// errNoLocalEngines refuses a `cmd` engine on a platform where the gateway
// cannot stop a process tree (issue 18: Windows), naming the way out.
func errNoLocalEngines(name string) error {
	return fmt.Errorf("engine %s: 'cmd' (an engine the gateway starts) is not supported on %s: "+
		"start the model server yourself and give its address with 'to' (remote engines work on every platform)", name, runtime.GOOS)
}

// Inherit returns c with every option it leaves unset taken from d, the
// handler's `defaults` block. An engine's identity (name, models,
// model_name) is its own; a default fallback or context_fallback is not
// given to the engine it names (an engine is not its own fallback).
func (c Config) Inherit(d Config) Config {
	cv := reflect.ValueOf(&c).Elem()
	dv := reflect.ValueOf(d)
	for i := range cv.NumField() {
		switch cv.Type().Field(i).Name {
		case "Name", "Models", "ModelName":
			continue
		case "Fallback", "ContextFallback":
			if name, _, _ := strings.Cut(dv.Field(i).String(), "/"); name == c.Name {
				continue
			}
		}
		if f := cv.Field(i); f.IsZero() {
			f.Set(dv.Field(i))
		}
	}
	return c
}

// ValidateDefaults checks a `defaults` block: any engine option but the ones
// that make an engine what it is.
func (c Config) ValidateDefaults() error {
	switch {
	case c.Name != "":
		return fmt.Errorf("defaults may not set a name")
	case len(c.Models) > 0 || c.ModelName != "":
		return fmt.Errorf("defaults may not set models or model_name: each engine serves its own")
	}
	return nil
}
