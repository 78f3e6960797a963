package handler

import (
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Keys with limits: a key's allowed models, rate and token budget, checked
// and reserved before a request is served, charged when its answer ends.

// Keys that carry rules: the models a key may use, its request rates and its
// token budgets, and the cheaper model its requests go to once a budget is
// spent. The counting is the quota package's (its Limiter outlives configs
// and persists or shares the counters); here is what a request meets:
//
//   - a model the key may not use: 403 model_not_allowed, naming the ones it
//     may (body fallbacks included: a key cannot reach a model through them);
//   - over a rate limit: 429 rate_limit_exceeded with Retry-After;
//   - over a token budget: 429 insufficient_quota with Retry-After, or, with
//     over_budget fallback <model>, the request is served by that model
//     (X-LLM-Fallback names the engine that answered);
//   - every answer to a key with limits carries OpenAI's x-ratelimit-*
//     headers, so SDKs and agents back off on their own.
//
// The gateway's own refusals never move to engine fallbacks or body
// fallbacks: those are for upstream failures.
//
// Tokens are taken from the answer's usage when it ends. A streamed chat or
// text completion of a key with a token budget is sent with
// stream_options.include_usage, and the usage chunk the client did not ask
// for is not passed on. While a request is in flight, an estimate from its
// size is reserved, so a burst cannot overshoot a budget by much.

// SetLimiter gives the gateway the counters of its keys' rules; without one
// (no key has limits) only the model rules apply. Call before serving.
func (g *Gateway) SetLimiter(l *quota.Limiter) { g.limiter = l }

// KeyRules returns each named key's limits, the config's and the issued
// ones', and those of the identities with limits that asked, for the admin
// API.
func (g *Gateway) KeyRules() map[string]quota.Rules {
	out := map[string]quota.Rules{}
	var all []*keys.Rules
	if g.who.Ring != nil {
		all = g.who.Ring.Rules
	}
	if g.who.Issued != nil {
		all = append(all, g.who.Issued.All()...)
	}
	all = append(all, g.who.Identities.Seen()...)
	for _, kr := range all {
		if kr.Name != "" && !kr.Limits.Empty() {
			if _, ok := out[kr.Name]; !ok { // the config's key wins a name
				out[kr.Name] = kr.Limits
			}
		}
	}
	g.teamRules(out) // budget.go: team:<name>, as counted
	return out
}

// KeyUsage is the usage of every named key with limits, for the admin API.
func (g *Gateway) KeyUsage() []quota.KeyUsage {
	if g.limiter == nil {
		return nil
	}
	return g.limiter.All(g.KeyRules())
}

// ResetKey clears a key's counters; it reports whether the key has limits
// here.
func (g *Gateway) ResetKey(name string) (bool, error) {
	_, ok := g.KeyRules()[name]
	// an identity this config has not seen yet may have counters of an
	// earlier one: its name says what it is
	ok = ok || g.who.Identities != nil && strings.HasPrefix(name, config.IdentityPrefix)
	if !ok || g.limiter == nil {
		return false, nil
	}
	return true, g.limiter.Reset(name)
}

// estimateTokens is what a request may use, reserved while it is in flight
// so that a burst cannot overshoot a budget: its prompt at about four bytes
// a token, plus the most it may answer, the largest of max_tokens,
// max_completion_tokens (Chat Completions) and max_output_tokens
// (Responses; Anthropic's is max_tokens), or, when it names none, what the
// engines it may reach may generate (answerBound, answerbound.go), for each
// of the n (or best_of) choices an engine makes; alone when nothing bounds
// that, and the request must then run alone (quota.AdmitAlone). The
// numbers are read as lax engines read them, when the body is (readCounts,
// bodyrules.go). An upload (a multipart form: audio, images) is not text:
// its file says nothing of the tokens it costs, so it reserves one.
func (g *Gateway) estimateTokens(req *request) (estimate int64, alone bool) {
	if !req.json() {
		return 1, false
	}
	prompt := promptTokens(req)
	answer, bounded := max(req.most, 0), true
	if answer == 0 {
		answer, bounded = g.answerBound(req)
		answer = min(answer, 1<<40) // as LaxInt caps a limit
	}
	// LaxInt caps a limit at 2^40; 2^20 choices keep the product in an int64
	return prompt + answer*min(max(req.choices, 1), 1<<20), !bounded
}

// reservation is what req reserves of a token budget, or would for a key
// with one: its prompt and its whole estimate, which an answer that
// reports no usage is charged, in tokens and in money (spend.go).
func (g *Gateway) reservation(req *request) reservation {
	total := req.estimate
	if total == 0 { // no token budget asked for it at the door
		total, _ = g.estimateTokens(req)
	}
	return reservation{prompt: promptTokens(req), total: total}
}

// promptTokens is a request's prompt at about four bytes a token (an
// upload reserves one: its file says nothing of what it costs).
func promptTokens(req *request) int64 {
	if !req.json() {
		return 1
	}
	return int64(len(req.body)/4 + 1)
}

// askUsage makes a streamed chat or text completion report its usage (for a
// key with a token budget): stream_options.include_usage is set, and when
// the client had not asked for it, the usage chunk is kept from it.
func (req *request) askUsage() {
	if !req.stream || !req.json() || !req.op.asksUsage() {
		return
	}
	if so, ok := jsonmember.LastMember(req.body, jsonmember.SkipSpace(req.body, 0), "stream_options"); ok && req.body[so.Value.Start] == '{' {
		if iu, ok := jsonmember.LastMember(req.body, so.Value.Start, "include_usage"); ok && string(req.body[iu.Value.Start:iu.Value.End]) == "true" {
			return // the client asked: it gets the chunk
		}
	}
	body := jsonmember.ApplyFilters(req.body, []jsonmember.Filter{{Path: []string{"stream_options", "include_usage"}, Value: []byte("true")}})
	fields, err := jsonmember.ScanRequest(body)
	if err != nil {
		return
	}
	req.body, req.fields, req.hideUsage = body, fields, true
}
