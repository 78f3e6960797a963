// Package handler is one request's path through the gateway: read the body,
// pick a plan of candidates, attempt them in order, stream the answer, and
// make an OpenAI-shaped error when there is none.
package handler

import (
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/providers"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"strings"
)

// StatusClientClosed is the status recorded for a request whose client went
// away before an answer (nginx's and Caddy's access logs say 499 too).
const StatusClientClosed = 499

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
	provider        providers.Provider  // a cloud provider's wire (providers.go); nil for none
	firsts          firstTokens         // its times to first content, for hedge_after auto (hedge.go)
	hedges          hedgeBudget         // its hedges, against hedge_budget (hedge.go)
}

// Gateway serves requests for one handler instance. It holds no engine
// itself: engines are given to it (the caddy module keeps them across
// reloads).
type Gateway struct {
	log         *zap.Logger
	who         keys.Who // who is asking: the config's keys, the issued ones (issued.go)
	maxBody     int64
	bodies      *bodyBudget // max_body_in_flight (inflight.go)
	bodyTimeout time.Duration
	keepAlive   time.Duration
	webhook     *budgetWebhook    // budget_webhook (budgetwebhook.go); nil without one
	dropped     atomic.Int64      // malformed events dropped
	routes      []*route          // in config order
	byModel     map[string]*route // every model name and alias
	byName      map[string]*route // every engine
	pools       map[string]*pool  // by name, and "auto" for the default pool
	poolList    []*pool
	annotate    bool
	// traceContent: Result keeps the prompt and the answer (tracecontent.go)
	traceContent bool
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
	book               *price.Book           // the models' prices (spend.go)
	teams              map[string]*keys.Team // the config's teams, by name (budget.go)

	// faults keeps the request faults' warnings to one a minute per
	// engine and kind (requestfault.go)
	faults faultLog

	// Hooks are set by the caddy module, before serving, to count events.
	Hooks Hooks
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
	Priority   int       // the request's: its key's, lowered by X-LLM-Priority
	Fallback   string    // the fallback that answered, if one did
	Status     int       // the status the client got
	Start      time.Time // when the gateway took the request
	TTFB       time.Duration
	Duration   time.Duration
	Usage      api.Usage // tokens, when the answer reported them
	HasUsage   bool
	Known      bool   // ModelAsked names a model or pool of this gateway
	Handled    bool   // the gateway served the request (a path under /v1/)
	Refused    string // the caller's key rules refused it: "rate" or "tokens"
	Code       string // the code of an error the gateway answered itself ("model_not_found"), for its story
	Tries      []Try  // the request's story: each upstream attempt (story.go)
	Pool       string // the pool that chose the member, if one did
	PoolChoice string // why it chose its first member: session, affinity, load, rotation (pool.go)
	// Prompt and Answer are kept with trace_content on (tracecontent.go):
	// the request's messages (or prompt, input) as JSON, the answer's text.
	Prompt []byte
	Answer string
	// API is the API the client spoke (chat, messages, responses,
	// completions, embeddings, openai for OpenAI's other routes);
	// EngineAPI the one the answering engine was spoken to in, another
	// of the three conversations when the request went through
	// translation (translate.go).
	API, EngineAPI string
	// HedgeUsage is what the attempts that lost a race are charged
	// (race.go): what each reported, else its prompt (as Input).
	HedgeUsage api.Usage
	// Estimated is what the caller's key's token budget was charged for an
	// answer that reported no usage (a stream cut before its usage, an
	// engine that does not count): the tokens the request reserved; 0
	// when the usage was charged, or the key has no token budget.
	Estimated int64
	// Cut says why an answer that had begun did not end whole, "" when it
	// did: "closed" (the engine's connection broke), the time budget that
	// ran out (stream_idle_timeout, request_timeout), "client" (the client
	// went away), "going_away" (the server is exiting). Relayed is the
	// bytes of the answer the client had been sent then.
	Cut     string
	Relayed int64
	// Cost is what the request cost, in nano-dollars (spend.go): its
	// answer's usage at the price of the engine that answered and the
	// model it was sent, and HedgeCost, what the hedge's losers cost.
	Cost, HedgeCost price.Amount

	op operation // what the request is (operation.go): the shape of refusals
	// body is what the request's body holds of max_body_in_flight
	// (inflight.go), given back when it ends
	body  bodyHold
	key   *keys.Rules // the caller's key's rules, nil for none
	route string      // a path beyond the APIs' own that an engine names (v1routes.go)
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
	// Untranslated: a request member engine's API cannot carry was
	// dropped on the way there (translate.go); member is its path
	// without indexes.
	Untranslated func(engine, member string)
	// Hedge: a hedged request ended; engine is the candidate the first
	// hedge started beside, winner "first", "hedge" or "none".
	Hedge func(engine, winner string)
	// RequestFault: engine refused a request for what it asked (a member,
	// tools, a grammar, its length: requestfault.go); kind is one of
	// tools, tool_schema, param, context_length, grammar.
	RequestFault func(engine, kind string)
}

// refuse answers with an error of the gateway's own.
func (res *Result) refuse(w http.ResponseWriter, e *apierror.Error) {
	e.WriteAs(w, res.op.api())
	res.Status, res.Code = e.Status, e.Code
	if e.Code == "model_not_allowed" {
		res.Refused = "model" // however the key's list was met: model, fallbacks, /upstream/
	}
}

// now is the gateway's clock's time, read at each call: breakers made in New
// follow a clock set later by SetClock.
func (g *Gateway) now() time.Time { return g.clock.Now() }

type listing struct {
	mu      sync.Mutex
	last    *fleet
	running chan struct{} // closed when the fan-out in progress ends
	// woken: "engine\x00model" → when this gateway sent a request for a
	// model its node reported unloaded; until a listing taken after that
	// says otherwise, the node is loading it (the gateway's own news is
	// fresher than the node's last answer)
	woken map[string]time.Time
}

// Try is one upstream attempt of a request.
type Try struct {
	Engine  string        // the candidate's engine
	Model   string        // the model it was sent
	Address string        // the engine's host:port, once it was leased
	Start   time.Time     // when the attempt began (before any wait)
	End     time.Time     // its verdict; for the answer, the answer's last byte
	Waited  time.Duration // waiting for the engine: its start or a queue place
	Status  int           // the upstream's status, 0 without one
	Reason  string        // the verdict: ok, connect, 503, timeout, slow, busy…
	Scope   string        // whose health a failure speaks of: engine, model or ""
	Resume  bool          // it continued a stream cut on the try before
	Hedge   bool          // it started beside an older attempt that had no content yet
	LostFor time.Duration // a hedge's loser (Reason "lost"): how long it ran after the win
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

// CloseWebhook stops the budget webhook's sender: the config is being let
// go of (budgetwebhook.go).
func (g *Gateway) CloseWebhook() { g.webhook.close() }
