// Package engines owns one upstream's life: where it is, whether it is ready,
// and, for an engine with a command, its process: start on demand, readiness
// probing, leases, idle drain and exclusive groups.
package engines

import (
	"encoding/json"
	"net/http"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
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

	// About is the models' name, description and metadata for people
	// (about.go). Default: none.
	About *About `json:"about,omitempty"`

	// APIKey is sent to the engine instead of the caller's credentials
	// (which never leave the gateway). Placeholders such as {env.KEY} are
	// resolved at provision time. Default: no key is sent.
	APIKey string `json:"api_key,omitempty"`

	// APIs are the APIs the engine speaks natively: "chat" (Chat
	// Completions), "completions" (text completions), "responses" (OpenAI's
	// Responses), "anthropic" or "messages" (Anthropic's Messages, with
	// count_tokens), "embeddings" (OpenAI's /v1/embeddings and
	// llama-server's /embedding(s)), and "openai": chat, completions,
	// responses, embeddings and every other OpenAI route (audio, images,
	// rerank, …). A request of an API the engine does not speak reaches it
	// only through translation (Translate) between Chat Completions,
	// Responses and Messages; never otherwise, so a pool may mix an
	// embedding engine with chat engines. Default: every API (llama.cpp's
	// server, ollama and vLLM answer all of them); a hosted
	// OpenAI-compatible provider that answers only Chat Completions says
	// `api chat`.
	APIs []string `json:"apis,omitempty"`

	// APIKeyHeader is the header that carries APIKey. Default:
	// "Authorization" with the value "Bearer <key>"; any other header
	// carries the bare key.
	APIKeyHeader string `json:"api_key_header,omitempty"`

	// ProviderRaw is the cloud provider the engine is: a Caddy guest module
	// in the namespace http.handlers.llm_gateway.providers, named by its
	// "name" member, with its own options beside it ({"name": "bedrock",
	// "region": "us-east-1"}; docs/providers.md). It sets the engine's API,
	// its default `to`, the paths of its requests (which name the model for
	// Bedrock, Gemini and Vertex, and the deployment for Azure), its
	// credentials (api_key in the provider's header; else SigV4 from AWS's
	// default chain for Bedrock, Application Default Credentials for Vertex)
	// and what /upstream/ may pass it. Default: none (an engine that speaks
	// OpenAI's or Anthropic's API at `to`).
	ProviderRaw json.RawMessage `json:"provider,omitempty" caddy:"namespace=http.handlers.llm_gateway.providers inline_key=name"`

	// Passthrough names what /upstream/<model>/ passes to a provider's
	// engine (or one whose API names the model in its path: converse,
	// gemini), where nothing passes by default: its credentials open the
	// provider's whole API. Each item is one of the provider's routes
	// (generateContent, countTokens, converse, count-tokens, messages,
	// chat/completions, …: its package's Routes), sent to the path the
	// provider builds for the model the caller's key may use; or a path
	// starting with '/' (a prefix when it ends in '*'), passed as written,
	// for keys without rules only. An engine without a provider passes its
	// own pages (web UI, /props, /metrics) and needs none. Default: none.
	Passthrough []string `json:"passthrough,omitempty"`

	// Routes are the paths under /v1/ the engine serves beyond its APIs'
	// own routes (api.Routes: chat/completions, messages, embeddings,
	// audio, images, rerank, …), each a path (/v1/batches) or a prefix
	// ending in '*' (/v1/fine_tuning/*). A path no API lists is a 404
	// unless an engine's routes line names it, and then it reaches only
	// the engines that name it, for keys without rules: the routes of a
	// whole account (files, batches, fine-tuning, message batches) are
	// bounded by no model a key may use. A named route is routed by the
	// body's model, as every /v1/ route is. Default: none.
	Routes []string `json:"routes,omitempty"`

	// MaxOutputTokens is the most tokens the engine generates for one
	// answer, as it is set up (llama-server's --n-predict, a model's own
	// output limit): a request of a key with a token budget that names no
	// limit reserves it, where it would otherwise reserve what is left of
	// the budget (handler/answerbound.go). It is a declaration: the gateway
	// sends it nowhere. Default: 0 (none declared).
	MaxOutputTokens int64 `json:"max_output_tokens,omitempty"`

	// AllowMedia names the media references, beside https: and data:
	// URLs, that a provider's engine may be sent: URL schemes (gs, http,
	// s3, …) and file_id (the provider's file ids: Anthropic's
	// source.file_id, OpenAI's file_id). A provider fetches a reference
	// with the operator's credentials, so a gs:// URI or a file id reads
	// the operator's bucket or files: by default a request naming one is
	// refused (400 media_not_allowed). Default: none.
	AllowMedia []string `json:"allow_media,omitempty"`

	// Translate lets a request of an API the engine does not speak (Chat
	// Completions, Responses or Messages) reach it through translation
	// into one it does. Set on the handler (`translate`) or per engine.
	// Default: on. A request always goes natively, byte for byte, to an
	// engine that speaks its API: translation only ever turns what would
	// be a 404 into an answer.
	Translate *bool `json:"translate,omitempty"`

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
	// once (holding a lease, or waiting for its start). Further requests
	// wait in the engine's queue, or go to its fallback when the queue is
	// full. Default: 0, which is DefaultMaxConcurrent without a queue.
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
	// sleep_after passes (sleep.go): "stop" ends its process;
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
	// slots.go). Default: none.
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

	// Hedge starts the fallback beside a request to this engine that has
	// had no content after Hedge.After (hedge.go); with it, a slow start is
	// such a hedge too, at the same delay. Default: off.
	Hedge *Hedge `json:"hedge,omitempty"`

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
	// metrics. It is read whether or not the metrics parse or are on at
	// all (a fresh llama-server's do not parse before its first decode);
	// an engine whose metrics carry another engine's names is not asked.
	// Default: /slots.
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

	// Provider is ProviderRaw loaded: the caddy module loads it when it
	// provisions the handler, the Caddyfile adapter when it reads the
	// `provider` line. Engines that inherit it from `defaults` share one.
	Provider providers.Provider `json:"-"`
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

// Speaks reports whether the engine speaks API a natively.
func (c *Config) Speaks(a api.API) bool {
	if len(c.APIs) == 0 {
		return a != api.Converse && a != api.Gemini // a provider's engine says so
	}
	for _, name := range c.APIs {
		apis, _ := api.Named(name)
		for _, b := range apis {
			if a == b {
				return true
			}
		}
	}
	return false
}

// Translates reports whether requests may reach the engine through
// translation (Translate, default on).
func (c *Config) Translates() bool { return c.Translate == nil || *c.Translate }

// Reads says how the engine reads a request of API a: in a itself when it
// speaks it, else in the first API of api.Preference it speaks when a is a
// conversation and the engine allows translation; ok is false when it
// cannot read the request at all.
func (c *Config) Reads(a api.API) (in api.API, ok bool) { return c.reads(a, c.Speaks) }

// reads is Reads with the APIs speaks says the engine speaks (the
// engine's process may have been learned to speak fewer: spoken.go).
func (c *Config) reads(a api.API, speaks func(api.API) bool) (in api.API, ok bool) {
	if speaks(a) {
		return a, true
	}
	if !a.Conversation() || !c.Translates() {
		return 0, false
	}
	for _, t := range api.Preference {
		if speaks(t) {
			return t, true
		}
	}
	return 0, false
}

// BodySetting is one `set <path> <json>` filter.
type BodySetting struct {
	Path  string          `json:"path"`
	Value json.RawMessage `json:"value"`
}

// Resumes reports whether resume is on.
func (c *Config) Resumes() bool { return c.Resume != nil && *c.Resume }

// Prefills reports whether prefill is on.
func (c *Config) Prefills() bool { return c.Prefill != nil && *c.Prefill }

// ShowsLoading reports whether loading_status is on.
func (c *Config) ShowsLoading() bool { return c.LoadingStatus != nil && *c.LoadingStatus }

// Managed reports whether the gateway runs this engine's process.
func (c *Config) Managed() bool { return len(c.Cmd) > 0 }

// Checked reports whether the engine has active health checks.
func (c *Config) Checked() bool { return c.HealthInterval > 0 && !c.Managed() }

// SleepPaths are an engine's sleep endpoints (swap sleep).
type SleepPaths struct {
	// SleepPath is POSTed to put the engine to sleep; a 2xx is asleep.
	// It may carry a query. Default: /sleep?level=1.
	SleepPath string `json:"sleep_path,omitempty"`
	// WakePath is POSTed to wake it; a 2xx, then its ready path, is
	// awake. Default: /wake_up.
	WakePath string `json:"wake_path,omitempty"`
	// SleepingPath is asked (GET) after a sleep and after a wake: a JSON
	// object whose is_sleeping member says whether the engine sleeps; an
	// engine that says otherwise failed. "none" asks nothing. Default:
	// /is_sleeping.
	SleepingPath string `json:"sleeping_path,omitempty"`
}

// SlotsConfig is `slots save` of an engine.
type SlotsConfig struct {
	// Dir is the engine's slot directory (llama-server's
	// --slot-save-path), where the gateway removes the files of sessions
	// beyond MaxSessions. Required.
	Dir string `json:"dir"`
	// Parallel is how many slots the engine has (llama-server's
	// --parallel). Default: 1.
	Parallel int `json:"parallel,omitempty"`
	// MaxSessions bounds the sessions with a saved slot; saving one more
	// removes the oldest's file. Default: 64.
	MaxSessions int `json:"max_sessions,omitempty"`
	// SavePath and RestorePath are POSTed {"filename": …} to save and
	// restore slot {id}. Default: llama-server's.
	SavePath    string `json:"save_path,omitempty"`
	RestorePath string `json:"restore_path,omitempty"`
	// Timeout bounds each save and restore call: llama-server has been
	// seen to write the file and never answer, and a swap waited on it for
	// its whole stop_timeout. A call that takes longer is given up (its
	// session's prompt is processed again), so a hung call delays a swap or
	// a request by this at most; after 3 such calls in a row the engine's
	// slot calls stop until it restarts (each hung call holds one of its few
	// HTTP threads). Default: 3s.
	Timeout caddy.Duration `json:"timeout,omitempty"`
}

// Sleeps reports whether the engine is put to sleep rather than stopped.
func (c *Config) Sleeps() bool { return c.Swap == SwapSleep }

// SavesSlots reports whether the engine saves its sessions' slots.
func (c *Config) SavesSlots() bool { return c.Slots != nil }

// The values of Swap.
const (
	SwapStop  = "stop"
	SwapSleep = "sleep"
)

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

// Signal options.
const (
	SignalsOff     = "off"
	SignalsMetrics = "metrics"

	DefaultSignalsPath      = "/metrics"
	DefaultSignalsInterval  = time.Second
	DefaultSignalsStale     = 2 * time.Second
	DefaultSignalsSlotsPath = "/slots"
)

// The default sleep endpoints: vLLM's.
const (
	DefaultSleepPath    = "/sleep?level=1"
	DefaultWakePath     = "/wake_up"
	DefaultSleepingPath = "/is_sleeping"
)

// The default slot endpoints: llama-server's. {id} is the slot's number.
const (
	DefaultSlotSavePath    = "/slots/{id}?action=save"
	DefaultSlotRestorePath = "/slots/{id}?action=restore"
	DefaultSlotSessions    = 64
	DefaultSlotTimeout     = 3 * time.Second
)

// DefaultMaxConcurrent is an engine's max_concurrent when its config names
// none: a cap no engine's batch reaches (llama-server's and vLLM's run
// tens to a few hundred sequences at once) that still bounds a flood, as
// every resource a caller can make the gateway spend has a cap with a
// default. Without it, requests held while a cold engine started, or piled
// on one engine by a keyless burst, were bounded by nothing but the bodies'
// max_body_in_flight. The 1025th request in flight is refused at once, 429
// engine_busy, or goes to the engine's fallback; a cloud provider's engine
// that serves more at once says so with max_concurrent.
//
// Below it, the engine is what it was without a limit: it reports no limit
// (Status), the scheduler reads its load and capacity as it did (Occupancy),
// and queue needs an explicit max_concurrent.
const DefaultMaxConcurrent = 1024

// concurrency is the engine's max_concurrent, or the default.
func (c Config) concurrency() int {
	if c.MaxConcurrent > 0 {
		return c.MaxConcurrent
	}
	return DefaultMaxConcurrent
}
