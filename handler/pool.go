package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"context"
	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// DefaultPool is the sentinel model that means the default pool: the pool
// named "auto", or else the first pool declared.
const DefaultPool = "auto"

// PoolConfig is a pool: a model name clients ask for ("auto" or the pool's
// own name) that is served by whichever member is healthy.
type PoolConfig struct {
	// Name is what clients put in "model". A pool named "auto" is the
	// default pool.
	Name string `json:"name"`

	// Members are ENGINE or ENGINE/MODEL: an engine of this handler and
	// the model to send it (default: its model_name, else its first
	// model). At least one.
	Members []string `json:"members"`

	// StickyHeader names a request header whose value is the session key.
	StickyHeader string `json:"sticky_header,omitempty"`

	// StickyBody names a top-level body field ("user" or
	// "prompt_cache_key") whose value is the session key.
	StickyBody string `json:"sticky_body,omitempty"`

	// FailoverAttempts bounds the attempts of one request across members.
	// Default: the number of members.
	FailoverAttempts int `json:"failover_attempts,omitempty"`

	// FailoverTime bounds the time one request spends failing over.
	// Default: 60s.
	FailoverTime caddy.Duration `json:"failover_time,omitempty"`

	// BreakerFailures is how many consecutive failures open a member's
	// breaker. Default: 5.
	BreakerFailures int `json:"breaker_failures,omitempty"`

	// BreakerCooldown is how long an open member is skipped before one
	// trial request. Default: 30s.
	BreakerCooldown caddy.Duration `json:"breaker_cooldown,omitempty"`
}

// DefaultFailoverTime is a pool's default failover time budget.
const DefaultFailoverTime = 60 * time.Second

// validate checks a pool against the handler's engine names.
func (p PoolConfig) validate(engineNames map[string]bool) error {
	if p.Name == "" {
		return fmt.Errorf("a pool needs a name")
	}
	if len(p.Members) == 0 {
		return fmt.Errorf("pool %s has no members", p.Name)
	}
	seen := map[string]bool{}
	for _, m := range p.Members {
		name, model, hasModel := strings.Cut(m, "/")
		if !engineNames[name] {
			return fmt.Errorf("pool %s: member %s is not an engine of this handler", p.Name, m)
		}
		if hasModel && model == "" {
			return fmt.Errorf("pool %s: member %q: use ENGINE or ENGINE/MODEL", p.Name, m)
		}
		if seen[m] {
			return fmt.Errorf("pool %s: member %s is listed twice", p.Name, m)
		}
		seen[m] = true
	}
	switch p.StickyBody {
	case "", "user", "prompt_cache_key":
	default:
		return fmt.Errorf("pool %s: sticky body takes user or prompt_cache_key, not %q", p.Name, p.StickyBody)
	}
	if p.FailoverAttempts < 0 || p.FailoverTime < 0 || p.BreakerFailures < 0 || p.BreakerCooldown < 0 {
		return fmt.Errorf("pool %s: failover and breaker values may not be negative", p.Name)
	}
	return nil
}

// poolMember is one way a pool serves a request.
type poolMember struct {
	id    string // ENGINE or ENGINE/MODEL, as configured
	rt    *route
	model string
	brk   *engines.Breaker
	hash  uint64 // of id, mixed into the session's rendezvous score
}

// pool is a pool at runtime.
type pool struct {
	cfg      PoolConfig
	members  []*poolMember
	next     atomic.Uint64 // round-robin position
	attempts int
	budget   time.Duration
	fleet    bool // a member is a models_from node
}

func newPool(cfg PoolConfig, byName map[string]*route) *pool {
	p := &pool{cfg: cfg, attempts: cfg.FailoverAttempts, budget: time.Duration(cfg.FailoverTime)}
	if p.attempts == 0 {
		p.attempts = len(cfg.Members)
	}
	if p.budget == 0 {
		p.budget = DefaultFailoverTime
	}
	cool := time.Duration(cfg.BreakerCooldown)
	if cool == 0 {
		cool = engines.DefaultBreakerCool
	}
	for _, id := range cfg.Members {
		name, model, _ := strings.Cut(id, "/")
		rt := byName[name]
		if model == "" {
			model = rt.cfg.ModelName
		}
		if model == "" {
			model = rt.cfg.Models[0]
		}
		p.fleet = p.fleet || rt.cfg.ModelsFrom != ""
		p.members = append(p.members, &poolMember{
			id: id, rt: rt, model: model,
			brk:  engines.NewBreaker(cfg.BreakerFailures, cool, nil),
			hash: fnv64(id),
		})
	}
	return p
}

func fnv64(s string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, s)
	return h.Sum64()
}

// mix is a 64-bit finalizer (splitmix64): the rendezvous score of a session
// and a member.
func mix(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// sessionKey is the request's session key for this pool, "" if none.
func (p *pool) sessionKey(req *request) string {
	if p.cfg.StickyHeader != "" {
		return req.r.Header.Get(p.cfg.StickyHeader)
	}
	var m jsonmember.Member
	switch p.cfg.StickyBody {
	case "user":
		m = req.fields.User
	case "prompt_cache_key":
		m = req.fields.PromptCacheKey
	default:
		return ""
	}
	v, _ := jsonmember.StringValue(req.body, m)
	return string(v)
}

// order returns the healthy members in the order to try them: for a session,
// by rendezvous score (highest random weight), so every gateway with the
// same config picks the same member without shared state, and a member's
// recovery takes back only the sessions that were its own; without one,
// starting at the next round-robin position, ready engines first.
//
// A models_from node ranks by what it reports of the member's model:
// loaded as a ready engine, loading as a starting one, unloaded as a
// stopped one (and skipped when wake is off for it: the gateway never makes
// a node load a model then), a node that did not answer last of all. With
// a session, the rendezvous order holds within those ranks, so every
// gateway with the same view of the fleet still agrees.
func (p *pool) order(key string, rank func(*poolMember) int) []*poolMember {
	if rank == nil {
		rank = readiness
	}
	if rotation := rank; key == "" {
		// a member whose max_concurrent places are all taken ranks as one
		// that is starting: an idle member goes first, and the busy one's
		// queue only after
		rank = func(m *poolMember) int {
			r := rotation(m)
			if r == nodeLoaded && m.rt.eng.Busy() {
				return nodeLoading
			}
			return r
		}
	}
	healthy := make([]*poolMember, 0, len(p.members))
	for _, m := range p.members {
		// a member whose engine failed its health checks is skipped before
		// any request pays for it, as one whose breaker is open
		if m.brk.Ready() && m.rt.eng.Healthy() && (m.rt.wake || rank(m) != nodeUnloaded || m.rt.cfg.ModelsFrom == "") {
			healthy = append(healthy, m)
		}
	}
	if len(healthy) == 0 {
		return nil
	}
	if key != "" {
		k := fnv64(key)
		slices.SortStableFunc(healthy, func(a, b *poolMember) int {
			sa, sb := mix(k^a.hash), mix(k^b.hash)
			switch {
			case sa > sb:
				return -1
			case sa < sb:
				return 1
			}
			return 0
		})
		if p.fleet {
			slices.SortStableFunc(healthy, func(a, b *poolMember) int { return fleetRank(a, rank) - fleetRank(b, rank) })
		}
		return healthy
	}
	// readiness-aware: members whose engine is ready first, in rotation;
	// then one that is starting (wait for it rather than start a second);
	// and only then one that must be started, always the first in config
	// order, so that cold requests arriving together start one engine
	var ready, starting, cold, gone []*poolMember
	for _, m := range healthy {
		switch rank(m) {
		case nodeLoaded:
			ready = append(ready, m)
		case nodeLoading:
			starting = append(starting, m)
		case nodeUnloaded:
			cold = append(cold, m)
		default:
			gone = append(gone, m)
		}
	}
	if len(ready) > 0 {
		start := int(p.next.Add(1)-1) % len(ready)
		ready = append(ready[start:], ready[:start]...)
	}
	return append(append(append(ready, starting...), cold...), gone...)
}

// fleetRank is a member's rank for a session: a node that has the model or
// is loading it is as good as any (the session's own member wins among
// them); one that would have to load it comes after, one that did not
// answer last.
func fleetRank(m *poolMember, rank func(*poolMember) int) int {
	if m.rt.cfg.ModelsFrom == "" {
		return 0
	}
	return max(0, rank(m)-nodeLoading)
}

// readiness ranks a member by its engine's state: nodeLoaded when ready (a
// remote engine always is), nodeLoading when starting, nodeUnloaded when
// stopped or draining.
func readiness(m *poolMember) int {
	switch m.rt.eng.State() {
	case engines.Ready:
		return nodeLoaded
	case engines.Starting:
		return nodeLoading
	}
	return nodeUnloaded
}

// poolPlan is the plan for a request to a pool: its healthy members in
// order, each with its own breaker and no same-member retries (a pool
// replays on the next member instead).
func (p *pool) plan(req *request, rank func(*poolMember) int) []candidate {
	ms := p.order(p.sessionKey(req), rank)
	plan := make([]candidate, len(ms))
	for i, m := range ms {
		plan[i] = candidate{rt: m.rt, model: m.model, role: rolePool, acquire: true, brk: m.brk, label: m.id}
	}
	return plan
}

func (p *pool) unavailable() *Error {
	return &Error{http.StatusServiceUnavailable, typeUnavailable, "pool_unavailable",
		fmt.Sprintf("every member of pool %s is failing (breakers open) or down, or, with wake off, has the model unloaded; try again shortly", p.cfg.Name)}
}

// PoolStatus is a pool's state for the admin API.
type PoolStatus struct {
	Name    string         `json:"name"`
	Members []MemberStatus `json:"members"`
}

// MemberStatus is one pool member's state.
type MemberStatus struct {
	Member  string `json:"member"`
	Engine  string `json:"engine"`
	Model   string `json:"model"`
	Breaker string `json:"breaker"`
}

// Pools reports every pool and its members' breakers.
func (g *Gateway) Pools() []PoolStatus {
	out := make([]PoolStatus, 0, len(g.pools))
	for _, p := range g.poolList {
		ps := PoolStatus{Name: p.cfg.Name}
		for _, m := range p.members {
			ps.Members = append(ps.Members, MemberStatus{m.id, m.rt.cfg.Name, m.model, m.brk.State().String()})
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
	out := make([]ProbeResult, 0, len(p.members))
	for _, m := range p.members {
		out = append(out, g.probeMember(ctx, m))
	}
	return out, nil
}

func (g *Gateway) probeMember(ctx context.Context, m *poolMember) ProbeResult {
	res := ProbeResult{Member: m.id, Model: m.model}
	body := []byte(`{"model":` + string(jsonmember.AppendString(nil, m.model)) + `,"messages":[{"role":"user","content":"ping"}],"max_tokens":1}`)
	r, err := http.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
	if err != nil {
		res.Reason = err.Error()
		return res
	}
	r.Header.Set("Content-Type", "application/json")
	fields, _ := jsonmember.ScanRequest(body)
	req := &request{r: r, body: body, fields: fields, model: m.model}
	rp := g.newReply(discardWriter{}, false, apiOpenAI, &Result{})
	c := candidate{rt: m.rt, model: m.model, role: rolePool, acquire: true, brk: engines.NewBreaker(1, time.Second, nil), label: m.id}
	start := time.Now()
	a := g.try(rp, req, c)
	defer a.close()
	res.Latency = time.Since(start)
	switch {
	case a.outcome == outcomeGood:
		res.Status = a.resp.StatusCode
		if _, err := io.Copy(io.Discard, io.LimitReader(a.resp.Body, 1<<20)); err != nil {
			res.Reason = "reading the answer: " + err.Error()
			return res
		}
		res.Pass = true
	case a.outcome == outcomeStatus:
		res.Status = a.resp.StatusCode
		res.Reason = upstreamMessage(a.errBody)
	default:
		e := a.failureError()
		res.Status, res.Reason = e.Status, e.Message
	}
	return res
}

// discardWriter is the probe's client: it hears nothing.
type discardWriter struct{}

func (discardWriter) Header() http.Header         { return http.Header{} }
func (discardWriter) Write(b []byte) (int, error) { return len(b), nil }
func (discardWriter) WriteHeader(int)             {}
