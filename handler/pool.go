package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"fmt"
	"hash/fnv"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

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
	cfg      config.PoolConfig
	members  []*poolMember
	next     atomic.Uint64 // round-robin position
	attempts int
	budget   time.Duration
	fleet    bool // a member is a models_from node
}

func newPool(cfg config.PoolConfig, byName map[string]*route, now func() time.Time) *pool {
	p := &pool{cfg: cfg, attempts: cfg.FailoverAttempts, budget: time.Duration(cfg.FailoverTime)}
	if p.attempts == 0 {
		p.attempts = len(cfg.Members)
	}
	if p.budget == 0 {
		p.budget = config.DefaultFailoverTime
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
			brk:  engines.NewBreaker(cfg.BreakerFailures, cool, now),
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

func (p *pool) unavailable() *apierror.Error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "pool_unavailable", Message: fmt.Sprintf("every member of pool %s is failing (breakers open) or down, or, with wake off, has the model unloaded; try again shortly", p.cfg.Name)}
}
