package handler

import (
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
	"github.com/llmgateway/caddy-llm-gateway/internal/rendezvous"
)

// poolMember is one way a pool serves a request.
type poolMember struct {
	id    string // ENGINE or ENGINE/MODEL, as configured
	rt    *route
	model string
	brk   *engines.Breaker
	hash  uint64 // of id, mixed into the session's rendezvous score
	idx   int    // its number in the pool's prefix index
}

// pool is a pool at runtime.
type pool struct {
	cfg          config.PoolConfig
	members      []*poolMember
	next         atomic.Uint64 // round-robin position
	attempts     int
	failoverTime time.Duration
	fleet        bool // a member is a models_from node
	bal          config.Balance
	index        *prefix.Index          // the prompt prefixes each member was sent (affinity)
	dyn          *dynamicPool           // members found at run time (dynamic.go); nil for written ones
	hedges       hedgeBudget            // its hedges, against hedge_budget (hedge.go)
	spareWhy     atomic.Pointer[string] // why it last started a warm spare (spare.go)
}

func newPool(cfg config.PoolConfig, byName map[string]*route, now func() time.Time) *pool {
	cfg = cfg.WithDefaults()
	p := &pool{cfg: cfg, attempts: cfg.FailoverAttempts, failoverTime: time.Duration(cfg.FailoverTime), bal: *cfg.Balance}
	p.index = prefix.New(len(cfg.Members), p.bal.IndexSize)
	cool := time.Duration(cfg.BreakerCooldown)
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
			hash: rendezvous.Hash(id), idx: len(p.members),
		})
	}
	return p
}

// sessionKey is the request's session key for this pool, "" if none.
func (p *pool) sessionKey(req *request) string {
	if p.cfg.StickyHeader != "" {
		return req.r.Header.Get(p.cfg.StickyHeader)
	}
	var m jsonmember.Member
	switch p.cfg.StickyBody {
	case "user":
		m = req.op.user(req.body, &req.fields) // the Messages API's user is metadata.user_id
	case "prompt_cache_key":
		m = req.fields.PromptCacheKey
	default:
		return ""
	}
	v, _ := jsonmember.StringValue(req.body, m)
	return string(v)
}

// A tenant's data is its own (docs/door.md#a-tenants-data-is-its-own). What the gateway keeps
// on a caller's behalf and finds again by what a later request sends (a
// pool's sticky sessions and its prefix index here, an engine's saved KV
// slots in warmswap.go) is found only by requests of the same key.
// Unscoped, another key sending the same X-Session-Id, prompt_cache_key or
// prompt prefix was sent to the member holding the first key's
// conversation, and had the first key's saved slot restored (and
// overwrote it): with llama-server the reused prefix shows in the answer's
// timings, so one tenant could probe another's conversation. The scope is
// the caller's key's (keys.Rules.Scope): its name, or for a key without a
// name a digest of its token (they shared one scope, and `keys
// {env.GATEWAY_KEYS}` with a token per tenant made them one tenant);
// requests without a key share one.

// session is the request's session within its caller's scope: key when
// the request names one, else the chained hashes of its prompt's blocks of
// block bytes (none when block is 0). The scoped key starts with the
// scope's length, so no key sent in one scope spells a key of another; the
// blocks are rehashed with the scope (internal/prefix.Scope). Saved slot
// files are named after this key or the last of these blocks, so they
// carry the scope in their hash too.
func (req *request) session(key string, block int) (string, []uint64) {
	scope := req.key.Scope()
	if key != "" {
		return strconv.Itoa(len(scope)) + ":" + scope + ":" + key, nil
	}
	if block <= 0 {
		return "", nil
	}
	// promptBlocks makes a new slice each call: rehashing it in place
	// changes nothing another reader holds
	return "", prefix.Scope(req.promptBlocks(block), scope)
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
	healthy := p.healthy(rank)
	if len(healthy) == 0 {
		return nil
	}
	if key != "" {
		k := rendezvous.Hash(key)
		slices.SortStableFunc(healthy, func(a, b *poolMember) int {
			sa, sb := rendezvous.Score(k, a.hash), rendezvous.Score(k, b.hash)
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
	ready, rest := byReadiness(healthy, rank)
	if len(ready) > 0 {
		start := int(p.next.Add(1)-1) % len(ready)
		ready = append(ready[start:], ready[:start]...)
	}
	return append(ready, rest...)
}

// healthy are the members a request may go to: a member whose engine
// failed its health checks is skipped before any request pays for it, as
// one whose breaker is open.
func (p *pool) healthy(rank func(*poolMember) int) []*poolMember {
	all := p.all()
	healthy := make([]*poolMember, 0, len(all))
	for _, m := range all {
		if m.brk.Ready() && m.rt.eng.Healthy() && (m.rt.wake || rank(m) != nodeUnloaded || m.rt.cfg.ModelsFrom == "") {
			healthy = append(healthy, m)
		}
	}
	return healthy
}

// byReadiness splits members into those whose engine is ready, in their
// order, and the rest: one that is starting (wait for it rather than start
// a second); and only then one that must be started, always the first in
// config order, so that cold requests arriving together start one engine;
// a node that did not answer last.
func byReadiness(healthy []*poolMember, rank func(*poolMember) int) (ready, rest []*poolMember) {
	var starting, cold, gone []*poolMember
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
	return ready, append(append(starting, cold...), gone...)
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
// replays on the next member instead). res hears which pool chose and why.
func (p *pool) plan(req *request, rank func(*poolMember) int, res *Result) []candidate {
	var ms []*poolMember
	why := ChoiceSession
	block := 0 // only affinity reads the prompt
	if p.bal.Policy == config.BalanceAffinity {
		block = p.bal.Block
	}
	if key, blocks := req.session(p.sessionKey(req), block); key != "" {
		ms = p.order(key, rank)
	} else {
		ms, why = p.choose(blocks, rank)
		req.blocks = blocks // the index learns who answers (answered)
	}
	if res != nil {
		res.Pool, res.PoolChoice = p.cfg.Name, why
	}
	p.warmSpare()
	plan := make([]candidate, len(ms))
	for i, m := range ms {
		plan[i] = candidate{rt: m.rt, model: m.model, role: rolePool, acquire: true, brk: m.brk, label: m.id}
	}
	return plan
}

func (p *pool) unavailable() *apierror.Error {
	return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "pool_unavailable", Message: fmt.Sprintf("every member of pool %s is failing (breakers open) or down, or, with wake off, has the model unloaded; try again shortly", p.cfg.Name)}
}

// Why a pool chose the member it tried first: the access log's
// pool_choice and llm_gateway_pool_choices_total's reason.
const (
	ChoiceSession  = "session"  // the request's session key (rendezvous)
	ChoiceAffinity = "affinity" // the member that was sent the longest prefix of its prompt
	ChoiceLoad     = "load"     // the least loaded member
	ChoiceRotation = "rotation" // the next in turn (balance round_robin)
)

// choose orders the healthy members for a request without a session key,
// by the pool's balance policy:
//
//	round_robin   ready members in rotation (one whose places are all taken after them)  → rotation
//	least_loaded  ready members by load, ties in rotation                                → load
//	affinity      the member sent the longest prefix of the prompt first, if it was sent
//	              ≥ cache_threshold of its whole blocks and the pool is not imbalanced    → affinity
//	              else as least_loaded                                                    → load
//
// The pool is imbalanced when, among its ready members, busiest − idlest >
// balance_abs_threshold and busiest > balance_rel_threshold × idlest: one
// hot prefix must not drown one engine while the others idle. Load is the
// engine's (engines.Occupancy: the gateway's own in flight and queued, and
// the engine's own queue while its signals are fresh). A member whose load
// has reached its known capacity (max_concurrent, or its slots) does not
// get a turn by affinity while another member has room. A member whose
// engine is saturated (its queue full, or its signals say it defers
// requests or has every slot busy) is passed over: it goes after every
// ready member that is not, the saturated ones by load too. Members that
// are starting or must be started follow, as for rotation.
func (p *pool) choose(blocks []uint64, rank func(*poolMember) int) ([]*poolMember, string) {
	if p.bal.Policy == config.BalanceRoundRobin {
		return p.order("", rank), ChoiceRotation
	}
	if rank == nil {
		rank = readiness
	}
	// each member's rank once: it takes the engine's lock
	ranks := make([]int, p.size())
	known := make([]bool, p.size())
	cached := func(m *poolMember) int {
		if !known[m.idx] {
			ranks[m.idx], known[m.idx] = rank(m), true
		}
		return ranks[m.idx]
	}
	healthy := p.healthy(cached)
	if len(healthy) == 0 {
		return nil, ChoiceLoad
	}
	ready, rest := byReadiness(healthy, cached)
	if len(ready) == 0 {
		return rest, ChoiceLoad
	}
	type loaded struct {
		m         *poolMember
		load      int
		saturated bool
		full      bool // as many requests as its known capacity
	}
	// the rotation that breaks ties moves only when it broke one (below):
	// moved by every choice, it moved with each turn that followed its
	// prefix too, and conversations of as many turns as there are members,
	// one after another, all began on the same member
	start := int(p.next.Load() % uint64(len(ready)))
	byLoad := make([]loaded, len(ready))
	busiest, idlest, capacity := 0, -1, 0
	for i := range ready {
		m := ready[(start+i)%len(ready)]
		o := m.rt.eng.Occupancy()
		byLoad[i] = loaded{m, o.Load, o.Saturated, o.Capacity > 0 && o.Load >= o.Capacity}
		busiest = max(busiest, o.Load)
		if idlest < 0 || o.Load < idlest {
			idlest = o.Load
		}
		if o.Capacity > 0 && (capacity == 0 || o.Capacity < capacity) {
			capacity = o.Capacity
		}
	}
	// the saturated after the others, each part by load, ties in rotation
	slices.SortStableFunc(byLoad, func(a, b loaded) int {
		if a.saturated != b.saturated {
			if a.saturated {
				return 1
			}
			return -1
		}
		return a.load - b.load
	})
	out := make([]*poolMember, 0, len(healthy))
	for _, l := range byLoad {
		out = append(out, l.m)
	}
	out = append(out, rest...)
	why := ChoiceLoad
	imbalanced := busiest-idlest > p.bal.AbsFor(capacity) && float64(busiest) > p.bal.RelThreshold*float64(idlest)
	if len(blocks) > 0 && !imbalanced {
		if m := p.index.Lookup(blocks); m.Blocks > 0 && float64(m.Blocks) >= p.bal.CacheThreshold*float64(len(blocks)) {
			// the least loaded of the members that hold the prefix and
			// are not saturated, nor full while another member is not:
			// a turn that waits for a slot waits for a whole answer,
			// usually longer than processing the conversation again elsewhere
			for i, l := range byLoad {
				if l.saturated {
					break
				}
				if l.full && !byLoad[0].full {
					continue // it would queue the turn while another member has room
				}
				if m.Has(l.m.idx) {
					copy(out[1:i+1], out[:i])
					out[0] = l.m
					why = ChoiceAffinity
					break
				}
			}
		}
	}
	if why == ChoiceLoad && len(byLoad) > 1 && byLoad[1].saturated == byLoad[0].saturated && byLoad[1].load == byLoad[0].load {
		p.next.Add(1)
	}
	return out, why
}

// warmSpare starts a member as a warm spare when the pool's ready members
// are all busy past its warm_spare (spare.go), and keeps why.
func (p *pool) warmSpare() {
	if p.cfg.WarmSpare <= 0 {
		return
	}
	all := p.all()
	ms := make([]spareMember, len(all))
	for i, m := range all {
		ms[i] = spareMember{id: m.id, eng: m.rt.eng, usable: m.brk.Ready() && m.rt.eng.Healthy(), starts: m.rt.cfg.Managed() && m.rt.wake}
	}
	if eng, why := spareFor(p.cfg.Name, p.cfg.WarmSpare, ms); eng != nil && eng.StartSpare(why) {
		p.spareWhy.Store(&why)
	}
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

// answered records in the prefix index that member id was sent the prompt
// of these blocks: the member that answers, after any failover, at the
// commit (loop.go), not the one planned first.
func (p *pool) answered(id string, blocks []uint64) {
	for _, m := range p.all() {
		if m.id == id {
			p.index.Add(m.idx, blocks)
			return
		}
	}
}

// MemberStatus is one pool member's state.
type MemberStatus struct {
	Member  string `json:"member"`
	Engine  string `json:"engine"`
	Model   string `json:"model"`
	Breaker string `json:"breaker"`
	// State is a member found at run time that does not serve:
	// "checking" (its first health check has not passed) or "draining"
	// (its address left the source; its requests finish). Empty when it
	// serves.
	State string `json:"state,omitempty"`
}
