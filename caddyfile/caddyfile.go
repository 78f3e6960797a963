// Package caddyfile parses the llm_gateway directive into the config types of
// the handler and engines packages. It only parses: nothing here touches
// runtime state, so `caddy adapt` and `caddy validate` are side-effect free.
package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/history"
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
//			spend <dollars/window...>   # US dollars per window at the models' prices: 1/d, 50/mo
//			team <name>                 # the team whose budgets it shares
//			over_budget refuse|fallback <model>  # once a token or money budget is spent; default refuse
//			reserve <n>                 # tokens a request naming no max_tokens reserves; default: what its engines may generate
//			priority <n>                # higher goes first in engines' queues and the scheduler; default 0
//			operator                    # may use the status page's API (never with rules)
//		}]
//		issued_keys [{                  # keys issued at run time (admin API, status page), stored hashed with the counters
//			secret <secret>             # the hash's key; default: generated into the data directory (required with store redis)
//			max <n>                     # keys issued at once; default 1000
//		}]
//		identity <placeholder> [{       # who another handler authenticated: {http.auth.user.id}, a header forward_auth copies
//			groups <placeholder>        # the identity's groups, separated by commas (a JWT claim, an SSO proxy's header)
//			user <id> { <key rules> }   # rules of one identity (models, rate, tokens, … as a key block's)
//			group <name> { <key rules> }  # rules of a group's identities without a user block; the first that applies
//			default { <key rules> }     # rules of every other identity; default: refused (403)
//		}]
//		store redis <host:port> [{      # counters (and issued keys) shared by several gateways (default: embedded)
//			password <p>
//			db <n>
//			prefix <p>
//			timeout <duration>          # what a request waits for Redis; default 100ms
//		}]
//		max_body <size>                 # default 32MiB
//		max_body_in_flight <size>       # the bodies held at once, together (503 past it); default 256MiB, at least 2×max_body
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
//		team <name> {                   # budgets several keys share (each names it: team <name>)
//			rate <limit...>
//			tokens <limit...>
//			spend <dollars/window...>
//			over_budget refuse|fallback <model>  # a member key's own wins
//		}
//		price <model> input <$> output <$> [cache_read <$>] [cache_write <$>] [reasoning <$>]
//		                                # US dollars per million tokens; <model>: ENGINE/MODEL, a model or an engine;
//		                                # default: the built-in table's price of a provider's model, 0 for a local engine
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
//			display_name <text...>      # the models' name for people, in /v1/models (llama-swap's name)
//			description <text...>       # a sentence about them, in /v1/models
//			metadata <name> <value>     # repeatable; a JSON value or text, in /v1/models
//			unlisted [on|off]           # not in /v1/models, served all the same; default off
//			api openai|anthropic|embeddings ...  # the API families it speaks; default openai anthropic
//			api_key <key> [<header>]    # the engine's own key; default header Authorization: Bearer
//			provider <name> [{ … }]     # a cloud provider's module (docs/providers.md); its lines
//			                            # (region, project, …) in its block or beside it here
//			passthrough <route|path...> # what /upstream/ passes to a provider's engine (default nothing): its
//			                            # routes (countTokens, converse, …) for the key's model; paths (a
//			                            # prefix ends in *) as written, for keys without rules only
//			routes <path...>            # /v1/ paths it serves beyond its APIs' own (a prefix ends in *),
//			                            # for keys without rules only; default none (a 404)
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
//			max_output_tokens <n>       # the most one answer of it is (its own limit): what a request
//			                            # naming none reserves of a budget; default none (it then runs alone)
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
