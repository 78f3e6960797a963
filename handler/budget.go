package handler

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Budgets in money and teams (docs/keys.md): a key's `spend 1/d` is counted in
// US dollars at its models' prices (spend.go), reserved while a request is
// in flight as its tokens are, and settled with what the request cost; a
// team's limits are shared by its keys, each request counted against its
// key's and its team's. The hook is admitBudgets, which the door's reserve
// (admission.go) asks in place of the key's token admission:
//
//	the key's rates        refused: 429 rate_limit_exceeded, the team not asked
//	the key's budgets      tokens, then money; refused: its over_budget fallback, else 429
//	                       (the team not asked: a fallback's answer is the key's to count)
//	the team's rates       refused: 429 rate_limit_exceeded naming the team
//	the team's budgets     refused: the key's over_budget, else the team's, else 429 naming the team
//
// What a request reserves in money is what its token reservation would
// cost at the dearest price of any engine it may reach (its model's, its
// fallbacks', a pool's members', its body fallbacks'): its prompt at the
// input price (or cache write price, if dearer), the rest (its most
// answer, under the same rules as its tokens, issue 51's included) at the
// output price (or reasoning price, if dearer). An answer then costs
// at most that, so a burst overshoots a money budget by what answers cost
// beyond their reservations, which is nothing but for an answer whose
// usage exceeds what its request allowed.

// HasTeam reports whether the config has a team of that name (an issued
// key's team line is checked with it).
func (g *Gateway) HasTeam(name string) bool { return g.teams[name] != nil }

// teamRules are the teams' limits by their counted names, for the admin
// API and resets (KeyRules).
func (g *Gateway) teamRules(out map[string]quota.Rules) {
	for _, t := range g.teams {
		out[t.Counted] = t.Limits
	}
}

// teamOf is the key's team, nil for none.
func (g *Gateway) teamOf(kr *keys.Rules) *keys.Team {
	if kr == nil || kr.Team == "" {
		return nil
	}
	return g.teams[kr.Team]
}

// budgeted reports whether a request of the key reserves anything of a
// budget (its own tokens or money, or its team's): its estimate is then
// worked out.
func (g *Gateway) budgeted(kr *keys.Rules) bool {
	has := func(r quota.Rules) bool { return len(r.Tokens) > 0 || len(r.Spend) > 0 }
	t := g.teamOf(kr)
	return has(kr.Limits) || t != nil && has(t.Limits)
}

// whose says whose limits refused a request: the key's, or its team's.
type whose struct {
	label      string // "key alice", "team eng"
	rules      quota.Rules
	overBudget string // the model its over_budget sends the request to
}

// admitBudgets admits req against its key's limits, then its team's (the
// table above), with what it may cost in tokens (req.estimate) and in
// money. The ticket is the key's joined to its team's; the decision is the
// one that refused, else the key's with the tighter headroom of the two.
func (g *Gateway) admitBudgets(kr *keys.Rules, req *request, alone bool) (*quota.Ticket, quota.Decision, whose) {
	tm := g.teamOf(kr)
	est := quota.Cost{Tokens: req.estimate}
	if len(kr.Limits.Spend) > 0 || tm != nil && len(tm.Limits.Spend) > 0 {
		est.Money = int64(g.moneyEstimate(req))
	}
	by := whose{label: "key " + kr.Name, rules: kr.Limits, overBudget: kr.OverBudget}
	t, d := g.limiter.AdmitCost(kr.Name, kr.Limits, est, alone)
	if tm == nil || !d.OK {
		return t, d, by
	}
	tt, td := g.limiter.AdmitCost(tm.Counted, tm.Limits, est, alone)
	if !td.OK {
		over := kr.OverBudget
		if over == "" {
			over = tm.OverBudget
		}
		by = whose{label: "team " + tm.Name, rules: tm.Limits, overBudget: over}
		if td.Reason == quota.ReasonRate {
			t.Cancel() // refused: the key's reservation goes back
			return nil, td, by
		}
		return quota.Join(t, tt), tighter(td, d), by
	}
	return quota.Join(t, tt), tighter(d, td), by
}

// tighter is d with, of each kind, the headroom of d and e that has less
// left: the headers say what the caller may still use, key and team alike.
func tighter(d, e quota.Decision) quota.Decision {
	pick := func(a, b quota.Headroom) quota.Headroom {
		if a.Limit == 0 || b.Limit != 0 && b.Remaining < a.Remaining {
			return b
		}
		return a
	}
	d.Requests, d.Tokens, d.Spend = pick(d.Requests, e.Requests), pick(d.Tokens, e.Tokens), pick(d.Spend, e.Spend)
	return d
}

// moneyEstimate is what req may cost in money, reserved while it is in
// flight: its token reservation at the dearest price among the engines it
// may reach.
func (g *Gateway) moneyEstimate(req *request) price.Amount {
	names := []string{req.model}
	if _, m, ok := strings.Cut(req.model, "/"); ok {
		names = append(names, m)
	}
	var most price.Price
	for _, cfg := range g.reachable(req) {
		most = price.Max(most, g.book.Most(cfg.Name, names...))
	}
	// a prompt may all be written to a cache, an answer all reasoning: each
	// at the dearer of its prices, so that no answer costs more than it held
	prompt := promptTokens(req)
	return price.Add(price.Tokens(prompt, max(most.Input, most.CacheWrite)), price.Tokens(max(req.estimate-prompt, 0), max(most.Output, most.Reasoning)))
}

// overBudget reports whether a refusal is a budget's (tokens or money).
func overBudget(d quota.Decision) bool {
	return d.Reason == quota.ReasonTokens || d.Reason == quota.ReasonSpend
}

// spent is the refusal of a request over a budget (whose), with its
// Retry-After: held by the requests in flight, or spent until it renews.
func (by whose) spent(w http.ResponseWriter, d quota.Decision, res *Result) *apierror.Error {
	res.Refused = string(d.Reason)
	what, limits := "token budget", keys.LimitsOf(by.rules.Tokens)
	if d.Reason == quota.ReasonSpend {
		what, limits = "money budget", spendLimits(by.rules.Spend)
	}
	if d.Held {
		w.Header().Set("Retry-After", "1")
		return &apierror.Error{Status: http.StatusTooManyRequests, Type: string(d.Reason), Code: "rate_limit_exceeded", Message: fmt.Sprintf("%s's %s (%s) is held by its requests in flight (a request whose answer no limit bounds runs alone); try again when they end, or name a max_tokens", by.label, what, limits)}
	}
	w.Header().Set("Retry-After", strconv.FormatInt(int64(max(1, d.RetryAfter.Seconds())), 10))
	return &apierror.Error{Status: http.StatusTooManyRequests, Type: "insufficient_quota", Code: "insufficient_quota", Message: fmt.Sprintf("%s has spent its %s (%s); it renews in %s", by.label, what, limits, d.RetryAfter)}
}

// overRate is the refusal of a request over its team's rate limit (a
// key's own is the door's overRate).
func (by whose) overRate(w http.ResponseWriter, d quota.Decision, res *Result) *apierror.Error {
	res.Refused = "rate"
	w.Header().Set("Retry-After", strconv.FormatInt(int64(max(1, d.RetryAfter.Seconds())), 10))
	return &apierror.Error{Status: http.StatusTooManyRequests, Type: "requests", Code: "rate_limit_exceeded", Message: fmt.Sprintf("%s is over its rate limit (%s); try again in %s", by.label, keys.LimitsOf(by.rules.Rate), d.RetryAfter)}
}

// spendLimits writes money budgets as the Caddyfile does: $1/d, $50/mo.
func spendLimits(ls []quota.Limit) string {
	var s []string
	for _, l := range ls {
		s = append(s, "$"+quota.SpendLimit(l).String())
	}
	return strings.Join(s, ", ")
}

// reserveTeamRate counts a request without a body (GET /v1/models) against
// its team's rates, as the door counts it against its key's.
func (g *Gateway) reserveTeamRate(w http.ResponseWriter, kr *keys.Rules, res *Result) *apierror.Error {
	tm := g.teamOf(kr)
	if tm == nil || len(tm.Limits.Rate) == 0 {
		return nil
	}
	_, d := g.limiter.Admit(tm.Counted, quota.Rules{Rate: tm.Limits.Rate}, 0)
	if d.OK {
		return nil
	}
	return whose{label: "team " + tm.Name, rules: tm.Limits}.overRate(w, d, res)
}

// tellThresholds logs each budget threshold (50, 80, 100 %) the key's
// budgets and its team's have passed with the request just charged, once
// per window (quota.Crossings), and hands it to the budget webhook.
func (g *Gateway) tellThresholds(kr *keys.Rules) {
	if kr == nil || g.limiter == nil {
		return
	}
	tell := func(who, name string, rules quota.Rules) {
		for _, c := range g.limiter.Crossings(name, rules) {
			used, limit := strconv.FormatInt(c.Used, 10), c.Limit.String()
			if c.Kind == quota.Spend {
				used, limit = price.Amount(c.Used).String(), quota.SpendLimit(c.Limit).String()
			}
			log := g.log.Info
			if c.Percent >= 100 {
				log = g.log.Warn
			}
			log("a budget passed a threshold", zap.String(who, strings.TrimPrefix(name, config.TeamPrefix)), zap.String("kind", string(c.Kind)),
				zap.String("limit", limit), zap.Int("percent", c.Percent), zap.String("used", used), zap.Time("resets", c.Reset))
			g.webhook.send(who, strings.TrimPrefix(name, config.TeamPrefix), c, g.clock.Now()) // budgetwebhook.go
		}
	}
	if len(kr.Limits.Tokens) > 0 || len(kr.Limits.Spend) > 0 {
		tell("key", kr.Name, kr.Limits)
	}
	if tm := g.teamOf(kr); tm != nil {
		tell("team", tm.Counted, tm.Limits)
	}
}
