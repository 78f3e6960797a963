package handler

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The door (docs/door.md, docs/keys.md#what-each-route-checks). Every request on every route passes the
// same steps, in this order; a route may add a check, never skip one:
//
//	step     what it decides                                      where
//	who      the caller's key (the config's or an issued one):    keys.Who.Check, in ServeHTTP
//	         401 without a valid one
//	body     read once, bounded by max_body and body_timeout,     readBodyOnce, scanJSON,
//	         by the route's parser, with one set of spelling      scanForm (request.go),
//	         rules and numbers read as lax engines read them      bodyrules.go
//	         (refused when ambiguous)
//	may      what the key may do on this route: the models its    keyRules.allows, the route's
//	         body, path and fallbacks name, and every candidate   own checks; mayReach
//	         the plan reaches; the route's methods                 (reach.go) per candidate
//	reserve  the key's rates (one request) and token budgets      reserve
//	         (its most tokens, while it is in flight)
//	charge   when the answer ended: its usage, else what it       charge
//	         reserved for an answer that reported none
//
// What each route adds, and docs/keys.md's "What each route checks" table
// mirrors:
//
//	/v1/… POST, extra_paths  who: the path one of the APIs' routes (api.Routes),
//	                         else one an engine's routes line names and a key
//	                         without rules (mayRoute, v1routes.go), else 404;
//	                         body: one JSON object with a model; a form on the
//	                         form routes (takesForm) and only there; may: the
//	                         model, the body fallbacks, every candidate;
//	                         reserve: its most tokens times its choices;
//	                         charge: the usage, else the reservation
//	/v1/messages/count_tokens  as the other /v1/ POSTs, but reserve: rates
//	                         only, no tokens; charge: nothing
//	/v1/models GET           no body; may: lists only the key's models;
//	                         reserve: rates only
//	/upstream/<model>/…      may: the path's model, a JSON (looksJSON) or
//	                         multipart body's model (the same engine's), the method
//	                         (GET, HEAD, POST unless widened), a key with a
//	                         token budget only with passthrough budgets on,
//	                         slots and id_slot an operator's key only; on a
//	                         provider's engine only what its passthrough
//	                         line names (passroute.go);
//	                         the engine's filters apply to a JSON body;
//	                         charge: the usage an answer reports
//	status page API          who: an operator key only (statuspage,
//	                         caddymodule); a key with rules is never one

// reserve applies the caller's key rules to a request: may (its model) and
// reserve (rates, tokens). It returns the request to serve (the
// over_budget fallback's once a budget is spent) and the quota ticket to charge
// when the answer ends, or the gateway's refusal.
func (g *Gateway) reserve(w http.ResponseWriter, req *request, res *Result) (*request, *quota.Ticket, *apierror.Error) {
	kr := req.key
	if kr == nil {
		return req, nil, nil
	}
	if !kr.Allows(req.model) && !g.mayName(kr, req.model) {
		return nil, nil, kr.NotAllowed(req.model)
	}
	if gerr := mayPinSlot(kr, req); gerr != nil {
		return nil, nil, gerr
	}
	if g.limiter == nil || kr.Limits.Empty() && kr.Team == "" {
		return req, nil, nil
	}
	if req.op == opCountTokens {
		// a count is free: the key's rates, no tokens (counttokens.go)
		return req, nil, g.reserveRate(w, kr, res)
	}
	budgeted := g.budgeted(kr) // budget.go: its tokens or money, or its team's
	if req.unbounded && budgeted {
		return nil, nil, apierror.BadRequest("unbounded_answer", fmt.Sprintf(
			"key %s has a budget, and this request asks for an answer no limit bounds (a negative max_tokens or n_predict, or ignore_eos without max_tokens): name a max_tokens", kr.Name))
	}
	var alone bool // answerbound.go: nothing bounds its answer
	if budgeted {
		req.estimate, alone = g.estimateTokens(req)
	}
	t, d, by := g.admitBudgets(kr, req, alone) // budget.go: the key's limits, then its team's
	req.rateHeaders, req.spendLeft = keys.RateHeaders(d), d.Spend
	for k, v := range req.rateHeaders {
		w.Header()[k] = v
	}
	if !d.OK {
		switch {
		case overBudget(d) && by.overBudget != "" && by.overBudget != req.model && !req.passthrough:
			over, err := req.switchModel(by.overBudget)
			if err != nil {
				t.Cancel()
				return nil, nil, err
			}
			over.overBudget = true
			over.fallbacks = nil // what is over budget reaches the cheaper model alone
			return over, t, nil
		case overBudget(d):
			t.Cancel()
			return nil, nil, by.spent(w, d, res)
		case by.label != "key "+kr.Name:
			return nil, nil, by.overRate(w, d, res)
		default:
			return nil, nil, g.overRate(w, kr, d, res)
		}
	}
	return req, t, nil
}

// charge counts what a request used against its key: the answer's usage,
// or, for an answer that reported none, the estimate; nothing for a request
// that got no answer. It prices the request first (spend.go), whatever its
// key.
func (g *Gateway) charge(w http.ResponseWriter, t *quota.Ticket, req *request, res *Result) {
	g.price(res, g.reservation(req)) // spend.go
	g.annotateCost(w, res)
	if t == nil {
		return
	}
	switch money := int64(res.Cost); { // its money: what it cost (spend.go)
	case res.HasUsage:
		t.DoneCost(quota.Cost{Tokens: int64(res.Usage.Total() + res.HedgeUsage.Total()), Money: money})
	case res.Status >= 200 && res.Status < 300:
		res.Estimated = req.estimate
		t.DoneCost(quota.Cost{Tokens: req.estimate + int64(res.HedgeUsage.Total()), Money: money})
	default:
		res.HedgeUsage = api.Usage{} // nothing is charged for a request that got no answer
		t.Cancel()
		return
	}
	g.tellThresholds(req.key) // budget.go
}

// reserveRate counts a request without a body to answer (GET /v1/models)
// against the key's rates: there are no tokens to reserve.
func (g *Gateway) reserveRate(w http.ResponseWriter, kr *keys.Rules, res *Result) *apierror.Error {
	if kr == nil || g.limiter == nil {
		return nil
	}
	if len(kr.Limits.Rate) == 0 {
		return g.reserveTeamRate(w, kr, res) // budget.go
	}
	_, d := g.limiter.Admit(kr.Name, quota.Rules{Rate: kr.Limits.Rate}, 0)
	for k, v := range keys.RateHeaders(d) {
		w.Header()[k] = v
	}
	if d.OK {
		return g.reserveTeamRate(w, kr, res) // budget.go
	}
	return g.overRate(w, kr, d, res)
}

// overRate is the refusal of a request over its key's rate limit.
func (g *Gateway) overRate(w http.ResponseWriter, kr *keys.Rules, d quota.Decision, res *Result) *apierror.Error {
	res.Refused = "rate"
	w.Header().Set("Retry-After", strconv.FormatInt(int64(max(1, d.RetryAfter.Seconds())), 10))
	return &apierror.Error{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded", Message: fmt.Sprintf("key %s is over its rate limit (%s); try again in %s", kr.Name, keys.LimitsOf(kr.Limits.Rate), d.RetryAfter)}
}

// PriorityHeader lets a request lower its key's priority (a batch job
// sharing an interactive key), never raise it.
const PriorityHeader = "X-LLM-Priority"

// withPriority puts the request's priority and key in its context, for the
// engine's queue and the scheduler (engines.WithPriority): the key's,
// lowered by the request's X-LLM-Priority; and in res, for the engine's
// last use (the caddy module's Served).
func withPriority(req *request, res *Result) {
	level, name := 0, ""
	if kr := req.key; kr != nil {
		level, name = kr.Priority, kr.Name
	}
	if h := req.r.Header.Get(PriorityHeader); h != "" {
		if n, err := strconv.Atoi(strings.TrimSpace(h)); err == nil && n < level {
			level = n
		}
	}
	res.Priority = level
	if level == 0 && name == "" {
		return // the default: nothing to carry
	}
	req.r = req.r.WithContext(engines.WithPriority(req.r.Context(), level, name))
}
