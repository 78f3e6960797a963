package handler

import (
	"net/http"
	"strconv"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The failure policy, whole, in one table: what one attempt's outcome means
// for the request (retry here, move on, stop) and for the breakers (which
// one, and which way). The loop (loop.go) walks a plan by these verdicts;
// nothing else decides. docs/failover.md's "How a request fails over" mirrors it.

// outcome is what happened to one attempt, as the attempt saw it (attempt.go
// and wait.go assign it); judge says what it means.
type outcome int

const (
	outcomeGood        outcome = iota // an answer to commit
	outcomeConnect                    // could not connect (refused, unreachable, TLS)
	outcomeDNS                        // the engine's host did not resolve
	outcomeClosed                     // connected, then hung up before an answer
	outcomeTimeout                    // a time budget ran out before any content
	outcomeStatus                     // the engine answered an error status
	outcomeStreamError                // the stream's first event was an error
	outcomeStart                      // the engine could not be started
	outcomeNotRunning                 // stopped, and the gateway may not start it
	outcomeOpen                       // a breaker keeps requests away from it
	outcomeSlow                       // still starting after fallback_after: switched
	outcomeBusy                       // max_concurrent reached: its queue full, or the wait ran out
	outcomeCanceled                   // the client went away
	// the request has a member the engine's API cannot carry through
	// translation (translate.go): nothing was sent
	outcomeUntranslatable
	// the engine answered 200 in a shape its API's translation cannot
	// read (translate.go)
	outcomeBadAnswer
	// a provider's credentials could not be had (providers.go): nothing
	// was sent
	outcomeAuth
	// the request names media by a reference the provider's engine may
	// not be sent (media.go): nothing was sent
	outcomeMedia
	// the engine's error answer is about the request, not the engine: a
	// member or tools it does not take, a grammar it cannot compile, a
	// prompt longer than its context (requestfault.go)
	outcomeRequestFault
)

// scope is whose health a failure speaks of.
type scope int

const (
	scopeNone   scope = iota
	scopeEngine       // the host: connect, DNS, TLS, a hang-up before headers
	scopeModel        // one model of the host: 429, 5xx, a silent answer
)

// effect is what a verdict does to the breaker of its scope.
type effect int

const (
	effectNone    effect = iota // nothing was allowed through, or nothing learnt
	effectSuccess               // the upstream answered: close
	effectFailure               // count a failure
	effectAbandon               // allowed, but told nothing (a trial goes back)
)

// verdict is the table's answer for one attempt.
type verdict struct {
	attempt  bool   // an upstream request was made: counts as an attempt
	answered bool   // the upstream answered over HTTP: its host is reachable
	effect   effect // on the breaker of scope; the other scope hears success or nothing
	scope    scope
	retry    bool // the same candidate may be tried again (after a back-off)
	moveOn   bool // the next candidate may be tried
	reason   string
}

// judgement is what judge needs to know of an attempt.
type judgement struct {
	outcome    outcome
	status     int           // the upstream's status, for outcomeStatus
	retryAfter time.Duration // its Retry-After, if any
	silence    time.Duration // how long the upstream was silent before it hung up
}

// policy is an engine's part of the table.
type policy struct {
	retryAfterMax time.Duration // a longer Retry-After moves on at once
	hangupGrace   time.Duration // a hang-up after longer silence is a timeout
}

// judge is the verdict table.
//
//	outcome              attempt  breaker (scope)    retry here           moves on
//	good                 yes      success (both)     -                    -
//	connect, dns         yes      failure (engine)   no                   yes
//	closed, instant      yes      failure (engine)   yes                  yes
//	closed after silence yes      failure (model)    no                   yes   (as a timeout)
//	timeout              yes      failure (model)    no                   yes
//	stream error event   yes      failure (model)    no                   yes
//	status 400, 422      yes      success (model)    no                   no    (context fallback aside)
//	status 401 403 404   yes      abandon (model)    no                   yes
//	status 408           yes      abandon (model)    no                   yes
//	status 429           yes      failure (model)    if Retry-After ≤ max yes
//	status 500 502-504   yes      failure (model)    if Retry-After ≤ max yes
//	status 529           yes      failure (model)    if Retry-After ≤ max yes   (Anthropic's overloaded)
//	other status         yes      abandon (model)    no                   no
//	start failed         no       -                  no                   yes
//	not running, slow    no       -                  no                   yes
//	breaker open         no       -                  no                   yes
//	busy (max_concurrent) no      -                  no                   yes   (429 engine_busy if nothing answers)
//	client went away     no       abandon            no                   no
//	untranslatable       no       -                  no                   yes   (400 naming the member if nothing answers)
//	bad answer           yes      failure (model)    no                   yes   (a 200 translation cannot read)
//	no credentials       no       -                  no                   yes   (a provider's SigV4 or ADC chain failed)
//	media by reference   no       -                  no                   yes   (400 media_not_allowed if nothing answers)
//	request fault        yes      success (model)    no                   no    (context length: to context_fallback; a 400 in the client's shape)
//
// After commit nothing switches: a cut answer counts a failure against the
// engine (the connection broke) or the model (it went silent), see cutFailure.
//
// "success (both)": any HTTP answer proves the host reachable, so a status
// verdict also closes the engine's breaker; the model's breaker hears what
// the table says. A timeout tells nothing of the host: its breaker is left
// as it was.
func judge(j judgement, p policy) verdict {
	switch j.outcome {
	case outcomeGood:
		return verdict{attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "ok"}
	case outcomeConnect:
		return verdict{attempt: true, effect: effectFailure, scope: scopeEngine, moveOn: true, reason: "connect"}
	case outcomeDNS:
		return verdict{attempt: true, effect: effectFailure, scope: scopeEngine, moveOn: true, reason: "dns"}
	case outcomeClosed:
		if p.hangupGrace > 0 && j.silence > p.hangupGrace {
			// a hang-up after long silence is an upstream that gave up
			// on an answer: waiting for it again only doubles the wait
			return verdict{attempt: true, effect: effectFailure, scope: scopeModel, moveOn: true, reason: "closed"}
		}
		return verdict{attempt: true, effect: effectFailure, scope: scopeEngine, retry: true, moveOn: true, reason: "closed"}
	case outcomeTimeout:
		return verdict{attempt: true, effect: effectFailure, scope: scopeModel, moveOn: true, reason: "timeout"}
	case outcomeStreamError:
		return verdict{attempt: true, answered: true, effect: effectFailure, scope: scopeModel, moveOn: true, reason: "stream-error"}
	case outcomeStatus:
		return judgeStatus(j, p)
	case outcomeStart:
		return verdict{moveOn: true, reason: "start"}
	case outcomeNotRunning:
		return verdict{moveOn: true, reason: "stopped"}
	case outcomeSlow:
		return verdict{moveOn: true, reason: "slow"}
	case outcomeOpen:
		return verdict{moveOn: true, reason: "open"}
	case outcomeBusy:
		// the gateway's own limit, not the engine's health: like an
		// upstream 429 it moves on (to the fallback, the next member),
		// but nothing was sent, so no breaker hears of it
		return verdict{moveOn: true, reason: "busy"}
	case outcomeUntranslatable:
		// the request, not the engine: another candidate may read it
		return verdict{moveOn: true, reason: "untranslatable"}
	case outcomeAuth:
		return verdict{moveOn: true, reason: "credentials"}
	case outcomeMedia:
		// the request, not the engine: another candidate may be sent it
		return verdict{moveOn: true, reason: "media"}
	case outcomeBadAnswer:
		return verdict{attempt: true, answered: true, effect: effectFailure, scope: scopeModel, moveOn: true, reason: "bad-answer"}
	case outcomeRequestFault:
		// the engine answered, and refused the request: the model is
		// fine, and another engine is no cure for the request's fault
		return verdict{attempt: true, answered: true, effect: effectSuccess, scope: scopeModel, reason: "refused"}
	}
	return verdict{effect: effectAbandon, scope: scopeModel, reason: "canceled"}
}

// statusOverloaded is Anthropic's 529 overloaded_error: a 503 by another
// number.
const statusOverloaded = 529

func judgeStatus(j judgement, p policy) verdict {
	v := verdict{attempt: true, answered: true, scope: scopeModel, reason: strconv.Itoa(j.status)}
	switch j.status {
	case http.StatusBadRequest, http.StatusUnprocessableEntity:
		v.effect = effectSuccess // the model is fine; the request is not
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusNotFound, http.StatusRequestTimeout:
		v.effect, v.moveOn = effectAbandon, true
	case http.StatusTooManyRequests, http.StatusInternalServerError, http.StatusBadGateway,
		http.StatusServiceUnavailable, http.StatusGatewayTimeout, statusOverloaded:
		v.effect, v.moveOn = effectFailure, true
		v.retry = j.retryAfter <= p.retryAfterMax
	default:
		v.effect = effectAbandon
	}
	return v
}

// cutFailure counts a committed answer's cut against the breaker whose
// failure it is: a silent engine's model, or a broken connection's host.
func (c *candidate) cutFailure(model string, timedOut bool) {
	switch {
	case c.brk != nil:
		c.brk.Failure()
	case timedOut:
		c.rt.eng.ModelBreaker(model).Failure()
	default:
		c.rt.eng.Breaker().Failure()
	}
}

// breakerPass is what a candidate's breakers allowed for one attempt, so that
// the verdict is applied to exactly the breakers that let it through.
type breakerPass struct {
	engine, model           *engines.Breaker
	engineTrial, modelTrial bool
	eng                     *engines.Engine // told when its host answered (its reported state)
}

// admit asks whether an attempt may go out: the engine's health checks
// first, then its breaker (the host), then the model's. A pool member has
// one breaker of its own for both scopes.
func (c *candidate) admit(model string) (breakerPass, bool) {
	if !c.rt.eng.Healthy() {
		// down (failed its health checks): like an open breaker, the plan
		// moves on without an attempt
		return breakerPass{}, false
	}
	if c.brk != nil {
		ok, trial := c.brk.Allow()
		return breakerPass{model: c.brk, modelTrial: trial, eng: c.rt.eng}, ok
	}
	t := breakerPass{eng: c.rt.eng}
	eb := c.rt.eng.Breaker()
	ok, trial := eb.Allow()
	if !ok {
		return t, false
	}
	t.engine, t.engineTrial = eb, trial
	mb := c.rt.eng.ModelBreaker(model)
	if ok, trial = mb.Allow(); !ok {
		eb.Abandon(t.engineTrial)
		return t, false
	}
	t.model, t.modelTrial = mb, trial
	return t, true
}

// apply applies a verdict to the breakers that admitted the attempt.
func (t breakerPass) apply(v verdict) {
	if v.answered && t.eng != nil {
		t.eng.Heard(true)
	}
	if t.engine == nil && t.model == nil {
		return
	}
	if t.engine == nil {
		// a pool member: its one breaker hears every scope
		apply(t.model, t.modelTrial, v.effect)
		return
	}
	switch {
	case v.scope == scopeEngine:
		apply(t.engine, t.engineTrial, v.effect)
		t.model.Abandon(t.modelTrial)
	case v.answered:
		// the host answered: it is reachable, whatever its model said
		apply(t.engine, t.engineTrial, effectSuccess)
		apply(t.model, t.modelTrial, v.effect)
	default:
		apply(t.engine, t.engineTrial, effectAbandon)
		apply(t.model, t.modelTrial, v.effect)
	}
}

func apply(b *engines.Breaker, trial bool, e effect) {
	switch e {
	case effectSuccess:
		b.Success()
	case effectFailure:
		b.Failure()
	case effectAbandon, effectNone:
		b.Abandon(trial)
	}
}
