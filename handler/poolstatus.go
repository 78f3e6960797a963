package handler

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Pool status and the probe that sends a tiny request through each member.

// PoolStatus is a pool's state for the admin API.
type PoolStatus struct {
	Name    string         `json:"name"`
	Members []MemberStatus `json:"members"`
	// WarmSpare is why the pool last started a member as a warm spare
	// (warm_spare); empty when it never did.
	WarmSpare string `json:"warm_spare,omitempty"`
}

// Pools reports every pool and its members' breakers.
func (g *Gateway) Pools() []PoolStatus {
	out := make([]PoolStatus, 0, len(g.pools))
	for _, p := range g.poolList {
		ps := PoolStatus{Name: p.cfg.Name}
		for _, m := range p.all() {
			ps.Members = append(ps.Members, MemberStatus{Member: m.id, Engine: m.rt.cfg.Name, Model: m.model, Breaker: m.brk.State().String()})
		}
		ps.Members = append(ps.Members, p.dyn.waiting()...)
		if why := p.spareWhy.Load(); why != nil {
			ps.WarmSpare = *why
		}
		out = append(out, ps)
	}
	return out
}

// ProbeResult is one member's line of a probe table.
type ProbeResult struct {
	Member  string        `json:"member"`
	Model   string        `json:"model"`
	Status  int           `json:"status"`
	Latency time.Duration `json:"latency_ns"`
	Pass    bool          `json:"pass"`
	Reason  string        `json:"reason,omitempty"`
}

// HasPool reports whether the gateway has a pool of that name.
func (g *Gateway) HasPool(name string) bool { return g.pools[name] != nil }

// PoolNames lists the gateway's pools in config order.
func (g *Gateway) PoolNames() []string {
	names := make([]string, len(g.poolList))
	for i, p := range g.poolList {
		names[i] = p.cfg.Name
	}
	return names
}

// ProbePool sends a tiny completion through each member's own path (its
// engine's transport, key and model, starting it per the wake policy) and
// reports pass or fail for each. Probes count against no breaker.
func (g *Gateway) ProbePool(ctx context.Context, name string) ([]ProbeResult, error) {
	p := g.pools[name]
	if p == nil {
		return nil, fmt.Errorf("no pool named %q", name)
	}
	out := make([]ProbeResult, 0, len(p.all()))
	for _, m := range p.all() {
		out = append(out, g.probeMember(ctx, m))
	}
	return out, nil
}

func (g *Gateway) probeMember(ctx context.Context, m *poolMember) ProbeResult {
	body := []byte(`{"model":` + string(jsonmember.AppendString(nil, m.model)) + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
	res, _ := g.probeOnce(ctx, candidate{rt: m.rt, model: m.model, role: rolePool, acquire: true, label: m.id}, body)
	res.Member = m.id
	return res
}

// probeOnce sends body as a chat completion to c, on its own path (its
// engine started per the wake policy, its key, its model), counting against
// no breaker, and returns the result and the answer (up to 1 MiB).
func (g *Gateway) probeOnce(ctx context.Context, c candidate, body []byte) (ProbeResult, []byte) {
	res := ProbeResult{Model: c.model}
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
	if err != nil {
		res.Reason = err.Error()
		return res, nil
	}
	r.Header.Set("Content-Type", "application/json")
	fields, _ := jsonmember.ScanRequest(body)
	req := &request{r: r, body: body, fields: fields, model: c.model, op: opChat}
	rp := g.newReply(discardWriter{}, false, api.Other, &Result{})
	c.brk = engines.NewBreaker(1, time.Second, g.now)
	start := g.clock.Now()
	a := g.newAttempt(req, c, ctx, start)
	g.try(rp, a)
	defer a.close()
	res.Latency = g.clock.Now().Sub(start)
	switch {
	case a.outcome == outcomeGood:
		res.Status = a.resp.StatusCode
		answer, err := io.ReadAll(io.LimitReader(a.resp.Body, 1<<20))
		if err != nil {
			res.Reason = "reading the answer: " + err.Error()
			return res, nil
		}
		res.Pass = true
		return res, answer
	case a.outcome == outcomeStatus:
		res.Status = a.resp.StatusCode
		res.Reason = apierror.UpstreamMessage(a.errBody)
	default:
		e := a.failureError()
		res.Status, res.Reason = e.Status, e.Message
	}
	return res, nil
}

// discardWriter is the probe's client: it hears nothing.
type discardWriter struct{}

func (discardWriter) Header() http.Header { return http.Header{} }

func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }

func (discardWriter) WriteHeader(int) {}
