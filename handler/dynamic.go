package handler

import (
	"cmp"
	"context"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
	"github.com/llmgateway/caddy-llm-gateway/internal/rendezvous"
)

// Members found at run time. A pool with a source (Caddy's dynamic
// upstreams, which the caddy module asks on the source's own refresh
// interval, off the request path) is told the addresses the source gives
// now (SetMembers), and follows them:
//
//	address given, not a member   → a member made from the template, named
//	                                 TEMPLATE@HOST:PORT, "checking" until one
//	                                 GET of its health path answers 2xx; only
//	                                 then do requests go to it
//	member, address still given    → stays, with its breaker and its sessions
//	member, address no longer given → leaves at once (no request is planned
//	                                 on it any more), "draining" until the
//	                                 requests it serves finish, then let go
//
// Sessions follow rendezvous hashing over the current members, keyed by
// the member's name, which is its address: every front door with the same
// DNS view picks the same member, and a member's leaving moves only its own
// sessions. A source that fails keeps the members it gave last: a DNS
// outage must not empty a pool (the caddy module does not call SetMembers
// then).

// MemberMaker builds the runtime of a member found at run time, and lets it
// go: the caddy module gives it its transport and lists it on the admin API
// and the status page, as a written engine.
type MemberMaker interface {
	MakeMember(engines.Config) (*engines.Engine, error)
	ReleaseMember(*engines.Engine)
}

// dynamicPool is a pool's members found at run time.
type dynamicPool struct {
	pool     string
	tmpl     engines.Config // the template, with defaults
	wake     bool
	fallback *route
	log      *zap.Logger
	now      func() time.Time
	// each member's breaker, as a written member's
	breakerFailures int
	breakerCool     time.Duration
	// current are the members requests may go to, by name: the order of
	// a pool's "first in config order" ranks, the same on every front door
	current atomic.Pointer[[]*poolMember]

	mu       sync.Mutex
	maker    MemberMaker
	live     map[string]*poolMember // address → member serving
	checking map[string]*poolMember // address → made, not yet passed its first check
	draining map[string]*poolMember // address → left, its requests finishing
	free     []int                  // prefix-index numbers of members gone
	next     int                    // the next number never used
	closed   bool
	stop     chan struct{} // closed by closeMembers: drains let go at once
	drains   sync.WaitGroup
	// overAnswer tells the last answer over MaxDynamicMembers (answerPrint),
	// whose warning was logged; 0 while the answer is within it
	overAnswer uint64
}

// makeDynamic gives a pool with a source its runtime: members come later,
// from SetMembers. Its prefix index holds as many members as a source may
// give.
func (g *Gateway) makeDynamic(p *pool, tmpl engines.Config, wake bool, byRoute map[string]*route) {
	if !p.cfg.IsDynamic() {
		return
	}
	d := &dynamicPool{
		pool: p.cfg.Name, tmpl: tmpl, wake: wake, fallback: byRoute[tmpl.Fallback], log: g.log, now: g.now,
		breakerFailures: p.cfg.BreakerFailures, breakerCool: time.Duration(p.cfg.BreakerCooldown),
		live: map[string]*poolMember{}, checking: map[string]*poolMember{}, draining: map[string]*poolMember{},
		stop: make(chan struct{}),
	}
	if tmpl.Wake != nil {
		d.wake = *tmpl.Wake
	}
	d.current.Store(&[]*poolMember{})
	p.dyn = d
	p.fleet = tmpl.ModelsFrom != ""
	p.index = prefix.New(config.MaxDynamicMembers, p.bal.IndexSize)
}

// all are the pool's members requests may go to now.
func (p *pool) all() []*poolMember {
	if p.dyn != nil {
		return *p.dyn.current.Load()
	}
	return p.members
}

// size bounds the numbers of the pool's members (poolMember.idx).
func (p *pool) size() int {
	if p.dyn != nil {
		return config.MaxDynamicMembers
	}
	return len(p.members)
}

// SetMemberMaker gives the pools with a source the maker of their members;
// call it before the first SetMembers.
func (g *Gateway) SetMemberMaker(m MemberMaker) {
	for _, p := range g.poolList {
		if p.dyn != nil {
			p.dyn.mu.Lock()
			p.dyn.maker = m
			p.dyn.mu.Unlock()
		}
	}
}

// DynamicPools names the pools that take their members from a source.
func (g *Gateway) DynamicPools() []string {
	var names []string
	for _, p := range g.poolList {
		if p.dyn != nil {
			names = append(names, p.cfg.Name)
		}
	}
	return names
}

// MemberChange is what one SetMembers did.
type MemberChange struct {
	Joined, Left, Checking []string // members' names
}

// SetMembers makes pool's members the given addresses (HOST:PORT, as
// Caddy's upstream sources dial them; a trailing dot of a name is kept
// except on an IP address, and a network prefix such as tcp4/ is
// dropped). New addresses are checked once, at most their health timeout,
// before they serve. One caller at a time: the caddy module's follower.
func (g *Gateway) SetMembers(ctx context.Context, pool string, addrs []string) MemberChange {
	var ch MemberChange
	p := g.pools[pool]
	if p == nil || p.dyn == nil {
		return ch
	}
	d := p.dyn
	d.mu.Lock()
	want := d.wanted(addrs)
	if d.closed || d.maker == nil {
		d.mu.Unlock()
		return ch
	}
	for addr, m := range d.live {
		if !want[addr] {
			delete(d.live, addr)
			d.draining[addr] = m
			ch.Left = append(ch.Left, m.id)
			d.drains.Add(1)
			go d.drain(addr, m)
		}
	}
	for addr, m := range d.checking {
		if !want[addr] {
			delete(d.checking, addr)
			d.letGo(m)
		}
	}
	var check []*poolMember
	for addr := range want {
		if d.live[addr] != nil {
			continue
		}
		m := d.checking[addr]
		if m == nil {
			if m = d.make(addr); m == nil {
				continue
			}
			d.checking[addr] = m
		}
		check = append(check, m)
	}
	d.publish()
	d.mu.Unlock()

	passed := checkMembers(ctx, check)
	d.mu.Lock()
	defer d.mu.Unlock()
	for i, m := range check {
		addr := d.addrOf(m)
		if d.checking[addr] != m {
			continue // let go meanwhile (closed)
		}
		if passed[i] {
			delete(d.checking, addr)
			d.live[addr] = m
			ch.Joined = append(ch.Joined, m.id)
		} else {
			ch.Checking = append(ch.Checking, m.id)
		}
	}
	d.publish()
	if len(ch.Joined)+len(ch.Left) > 0 {
		d.log.Info("pool members changed", zap.String("pool", pool),
			zap.Strings("joined", ch.Joined), zap.Strings("left", ch.Left), zap.Int("members", len(d.live)))
	}
	return ch
}

// wanted is the set of addresses a source gave, each as a member's
// address. Past MaxDynamicMembers the choice is stable (issue 51: each
// lookup of a larger answer took a random 64, and of 64 members 22, then 13
// were still members 2 s later): the current members first, then the others
// by their rendezvous score with the pool, so that every front door with
// the same answer takes the same ones; the warning is logged once per
// answer, not at every lookup. It holds d.mu.
func (d *dynamicPool) wanted(addrs []string) map[string]bool {
	var all []string
	want := map[string]bool{}
	for _, a := range addrs {
		if _, rest, ok := strings.Cut(a, "/"); ok {
			a = rest // tcp4/host:port
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			continue
		}
		if ip := net.ParseIP(strings.TrimSuffix(host, ".")); ip != nil {
			host = ip.String() // an SRV target 10.0.0.7. is an address, not a name
		}
		a = net.JoinHostPort(host, port)
		if !want[a] {
			want[a] = true
			all = append(all, a)
		}
	}
	if len(all) <= config.MaxDynamicMembers {
		d.overAnswer = 0
		return want
	}
	if answer := answerPrint(all); answer != d.overAnswer {
		d.overAnswer = answer
		d.log.Warn("a pool's source gave more members than a pool takes; the current members and then the others by rendezvous score are kept, the rest left out",
			zap.String("pool", d.pool), zap.Int("max", config.MaxDynamicMembers), zap.Int("given", len(all)))
	}
	pool := rendezvous.Hash(d.pool)
	score := func(a string) uint64 { return rendezvous.Score(pool, rendezvous.Hash(d.tmpl.Name+"@"+a)) }
	current := func(a string) bool { return d.live[a] != nil || d.checking[a] != nil }
	slices.SortFunc(all, func(a, b string) int {
		if ca, cb := current(a), current(b); ca != cb {
			if ca {
				return -1
			}
			return 1
		}
		return cmp.Compare(score(b), score(a))
	})
	for _, a := range all[config.MaxDynamicMembers:] {
		delete(want, a)
	}
	return want
}

// answerPrint tells one answer (a set of addresses) from another, in any
// order.
func answerPrint(addrs []string) uint64 {
	sorted := slices.Sorted(slices.Values(addrs))
	return rendezvous.Hash(strings.Join(sorted, " "))
}

// make builds the member at addr from the template, or reports why not.
// It holds d.mu.
func (d *dynamicPool) make(addr string) *poolMember {
	u, err := url.Parse(d.tmpl.To)
	if err != nil {
		return nil // validated: a template's to parses
	}
	u.Host = addr
	ec := d.tmpl
	ec.Name = d.tmpl.Name + "@" + addr
	ec.To = u.String()
	ec.Preload = false
	e, err := d.maker.MakeMember(ec)
	if err != nil {
		d.log.Error("making a pool member", zap.String("pool", d.pool), zap.String("member", ec.Name), zap.Error(err))
		return nil
	}
	rt := &route{eng: e, cfg: e.Config(), wake: d.wake, fallback: d.fallback}
	rt.filters = filtersOf(rt.cfg)
	rt.plan = buildPlan(rt)
	model := rt.cfg.ModelName
	if model == "" {
		model = rt.cfg.Models[0]
	}
	idx := d.next
	if n := len(d.free); n > 0 {
		idx, d.free = d.free[n-1], d.free[:n-1]
	} else {
		d.next++
	}
	return &poolMember{
		id: ec.Name, rt: rt, model: model,
		brk:  engines.NewBreaker(d.breakerFailures, d.breakerCool, d.now),
		hash: rendezvous.Hash(ec.Name), idx: idx,
	}
}

// addrOf is the address a member was made for.
func (d *dynamicPool) addrOf(m *poolMember) string {
	return strings.TrimPrefix(m.id, d.tmpl.Name+"@")
}

// publish stores the members requests may go to, by name. It holds d.mu.
func (d *dynamicPool) publish() {
	ms := make([]*poolMember, 0, len(d.live))
	for _, m := range d.live {
		ms = append(ms, m)
	}
	slices.SortFunc(ms, func(a, b *poolMember) int { return strings.Compare(a.id, b.id) })
	d.current.Store(&ms)
}

// drain lets a member that left go once the requests it serves have
// finished (or the pool closes). A remote engine's last lease wakes
// nobody, so its leases are looked at every drainPoll.
func (d *dynamicPool) drain(addr string, m *poolMember) {
	defer d.drains.Done()
	t := time.NewTicker(drainPoll)
	defer t.Stop()
	for m.rt.eng.Status().Leases > 0 {
		select {
		case <-t.C:
		case <-d.stop:
		}
		if d.isClosed() {
			break
		}
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.draining[addr] == m {
		delete(d.draining, addr)
	}
	d.letGo(m)
}

const drainPoll = 100 * time.Millisecond

func (d *dynamicPool) isClosed() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.closed
}

// letGo releases a member's runtime and its prefix-index number. It holds
// d.mu.
func (d *dynamicPool) letGo(m *poolMember) {
	if d.maker != nil {
		d.maker.ReleaseMember(m.rt.eng)
	}
	d.free = append(d.free, m.idx)
}

// CloseMembers lets go of every member found at run time (the config is
// unloading; the next config's members, made alike, keep the same
// runtimes). Members draining are let go at once: their requests go on,
// as a reload's do.
func (g *Gateway) CloseMembers() {
	for _, p := range g.poolList {
		d := p.dyn
		if d == nil {
			continue
		}
		d.mu.Lock()
		if d.closed {
			d.mu.Unlock()
			continue
		}
		d.closed = true
		close(d.stop)
		for _, m := range d.live {
			d.letGo(m)
		}
		for _, m := range d.checking {
			d.letGo(m)
		}
		d.live, d.checking = map[string]*poolMember{}, map[string]*poolMember{}
		d.current.Store(&[]*poolMember{})
		d.mu.Unlock()
		d.drains.Wait()
	}
}

// checkMembers asks each new member's health path at once (its
// health_path, else its readiness path, else /v1/models), with its key
// and through its transport, and reports which answered 2xx within its
// health timeout.
func checkMembers(ctx context.Context, ms []*poolMember) []bool {
	passed := make([]bool, len(ms))
	var wg sync.WaitGroup
	for i, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			passed[i] = checkMember(ctx, m.rt)
		}()
	}
	wg.Wait()
	return passed
}

func checkMember(ctx context.Context, rt *route) bool {
	timeout := time.Duration(rt.cfg.HealthTimeout)
	if timeout <= 0 {
		timeout = engines.DefaultHealthTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	path := rt.cfg.HealthPath
	if path == "" && rt.cfg.ProbesReady() {
		path = rt.cfg.Ready
	}
	if path == "" {
		path = "/v1/models"
	}
	base := rt.eng.Peek()
	if base == nil {
		return false
	}
	u := *base
	u.Path, u.RawQuery = upstream.JoinPath(base.Path, path), ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false
	}
	rt.cfg.SetKey(req.Header)
	resp, err := rt.eng.Transport().RoundTrip(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// waiting is the status of the members that do not serve: checking, then
// draining, each by name.
func (d *dynamicPool) waiting() []MemberStatus {
	if d == nil {
		return nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []MemberStatus
	for _, group := range []struct {
		state string
		ms    map[string]*poolMember
	}{{"checking", d.checking}, {"draining", d.draining}} {
		start := len(out)
		for _, m := range group.ms {
			out = append(out, MemberStatus{Member: m.id, Engine: m.rt.cfg.Name, Model: m.model, Breaker: m.brk.State().String(), State: group.state})
		}
		slices.SortFunc(out[start:], func(a, b MemberStatus) int { return strings.Compare(a.Member, b.Member) })
	}
	return out
}

// askedRoutes are the routes a model-list fan-out asks (fleet.go): every
// engine's, and every member found at run time (a models_from template
// makes models_from members).
func (g *Gateway) askedRoutes() []*route {
	out := g.routes
	for _, p := range g.poolList {
		if p.dyn == nil {
			continue
		}
		for _, m := range p.all() {
			out = append(out[:len(out):len(out)], m.rt)
		}
	}
	return out
}
