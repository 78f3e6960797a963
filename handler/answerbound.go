package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// What an answer may cost when its request names no limit (issue 51). A
// request of a key with a token budget reserves its prompt and the most
// its answer may be; one that named no max_tokens reserved the key's
// reserve (1,024), and 50 concurrent ones whose answers were 5,000 tokens
// used 95,095 of a 20,000 budget. Now it reserves what may really be
// generated for it:
//
//	the request                                  reserves for its answer
//	embeddings, count_tokens                     nothing: they answer no tokens
//	a key with its own reserve                   that: the operator's estimate
//	every engine it may reach is bounded         the largest bound:
//	                                               max_output_tokens, declared on the engine,
//	                                               else the limit the gateway itself sends
//	                                               (translate.DefaultMaxTokens toward Messages)
//	else                                         every budget whole, so it runs alone
//	                                             (quota.AdmitAlone): admitted when nothing else
//	                                             is in flight and minAnswer per choice is left,
//	                                             so a burst passes the budget by one answer
//	                                             less minAnswer at most
//
// A negative limit (max_tokens -1, which llama-server reads as n_predict:
// no end) is refused for such a key with the 400 of n_predict -1
// (readCounts, reserve).

// minAnswer is the least an answer nothing bounds is expected to cost (what
// such a request reserved before it ran alone): it is admitted only while
// that much of every budget is left for each of its choices.
const minAnswer = 1024

// answerBound is what req's answer may cost when it names no limit; bounded
// is false when nothing bounds it, and n is then minAnswer.
func (g *Gateway) answerBound(req *request) (n int64, bounded bool) {
	switch {
	case req.op == opEmbeddings || req.op == opCountTokens || req.op == opAnthropicOther:
		return 0, true
	case req.key.Reserve() > 0:
		return req.key.Reserve(), true
	case req.op == opPassthrough && len(req.body) == 0:
		return 0, true // an engine's page: nothing asks it to generate
	}
	most := int64(0)
	for _, cfg := range g.reachable(req) {
		n, ok := outputBound(cfg, req.op)
		if !ok {
			return minAnswer, false
		}
		most = max(most, n)
	}
	if most == 0 {
		return minAnswer, false // no engine reads it: refused later, nothing to bound
	}
	return most, true
}

// outputBound is the most one answer of the engine to a request of op may
// be: the engine's declared max_output_tokens, else the limit the gateway
// sends when it translates the request into Messages; ok is false when
// nothing bounds it. An engine that cannot read op is never tried: 0.
func outputBound(cfg *engines.Config, op operation) (int64, bool) {
	in, reads := op.reads(cfg)
	switch {
	case !reads:
		return 0, true
	case cfg.MaxOutputTokens > 0:
		return cfg.MaxOutputTokens, true
	case in == api.Messages && op.api() != api.Messages:
		return translate.DefaultMaxTokens, true
	}
	return 0, false
}

// reachable are the configs of every engine req's plan may reach: its
// model's engine (or pool's members, or the engine it names) with their
// fallbacks and context fallbacks, and its body's fallbacks. A body
// fallback that does not resolve is refused before anything is sent.
func (g *Gateway) reachable(req *request) []*engines.Config {
	var out []*engines.Config
	add := func(rt *route) {
		for _, r := range [...]*route{rt, rt.fallback, rt.contextFallback} {
			if r != nil {
				out = append(out, &r.cfg)
			}
		}
	}
	switch p, rt := g.pools[req.model], g.byModel[req.model]; {
	case p != nil && p.dyn != nil:
		out = append(out, &p.dyn.tmpl)
		if p.dyn.fallback != nil {
			add(p.dyn.fallback)
		}
	case p != nil:
		for _, m := range p.all() {
			add(m.rt)
		}
	case rt != nil:
		add(rt)
	default:
		if c, ok := g.named(req.model, req.key); ok {
			add(c.rt)
		}
	}
	if req.fallbacks != nil {
		cs, _ := g.bodyFallbacks(req.fallbacks, req.key)
		for _, c := range cs {
			add(c.rt)
		}
	}
	return out
}
