package engines

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.uber.org/zap"
)

// A box is what engines share and cannot all hold at once (issue 29): a
// GPU's memory (memory_budget, each engine's memory), or an exclusive group,
// which is the same rule with a budget of one and each member one. Boxes are
// process-wide by name, because what they guard is: two sites or two config
// generations naming group gpu0 share it.
//
// The scheduler. A start claims its engine's share of the box before its
// process is spawned, and holds it until the engine is stopped:
//
//	fits now                        granted at once
//	fits once idle engines stop     they are stopped first (cheapest loss first:
//	                                least recently used), then granted; never an
//	                                engine with requests in flight or queued, one
//	                                within its min_loaded, or one with evict never
//	does not fit                    the claim waits; its requests wait in their
//	                                engine's queue up to their time budget, then
//	                                go to their fallback or get an error
//
// Claims are served one at a time, in order: the claims that have waited
// max_wait first, then the engine whose waiting requests have the highest
// priority, then the oldest (the most requests waiting breaks a tie).
// Oldest first measured as well as most-wanted first on issue 29's trace
// (9 starts against 9 to 10) and cannot starve a rarely asked model. So
// while a swap is pending, a loaded engine's requests are served (it is
// busy, so it stays), and the waiting engines come in turn; a claim that
// has waited max_wait may drain a busy engine (its requests in flight
// finish, new ones wait for its next turn), so nothing waits much longer
// than max_wait plus one swap. A claim that can never fit is refused at
// load (the handler's Validate).
type box struct {
	name  string
	group bool // an exclusive group: a budget of one

	mu      sync.Mutex
	budget  int64
	maxWait time.Duration
	members map[*Engine]struct{}
	granted map[*Engine]int64 // shares granted; counted while the engine is not stopped
	claims  []*claim
	sig     signal
}

// claim is a start waiting for its share.
type claim struct {
	e     *Engine
	need  int64
	since time.Time
}

// DefaultMaxWait is how long a start may wait for its turn before the
// scheduler drains a busy engine for it.
const DefaultMaxWait = 30 * time.Second

var (
	boxesMu sync.Mutex
	boxes   = map[string]*box{}
)

// memoryBox is the name of the box of engines with a memory size.
const memoryBox = "memory"

// SetMemoryBudget sets the memory the engines with a memory size share in
// this process (memory_budget) and how long a start waits for its turn
// before busy engines are drained for it (max_wait; 0: DefaultMaxWait). The
// caddy module calls it when a config loads; the last config's budget wins.
func SetMemoryBudget(budget int64, maxWait time.Duration) {
	b := boxNamed(memoryBox, false)
	b.mu.Lock()
	b.budget, b.maxWait = budget, maxWait
	b.mu.Unlock()
	b.sig.poke()
}

func boxNamed(name string, group bool) *box {
	boxesMu.Lock()
	defer boxesMu.Unlock()
	b := boxes[name]
	if b == nil {
		b = &box{name: name, group: group, members: map[*Engine]struct{}{}, granted: map[*Engine]int64{}}
		if group {
			b.budget = 1
		}
		boxes[name] = b
	}
	return b
}

// joinBox puts e in the box named name.
func joinBox(name string, group bool, e *Engine) *box {
	b := boxNamed(name, group)
	b.mu.Lock()
	b.members[e] = struct{}{}
	b.mu.Unlock()
	return b
}

func (b *box) leave(e *Engine) {
	boxesMu.Lock()
	defer boxesMu.Unlock()
	b.mu.Lock()
	delete(b.members, e)
	delete(b.granted, e)
	empty := len(b.members) == 0
	b.mu.Unlock()
	if empty && boxes[b.name] == b && b.group {
		delete(boxes, b.name)
	}
	b.sig.poke()
}

// need is e's share of b.
func (b *box) need(e *Engine) int64 {
	if b.group {
		return 1
	}
	return int64(e.cfg.Memory)
}

// claim waits until e's share is granted, stopping idle (or, for a claim
// that waited max_wait, busy) engines to make room.
func (b *box) claim(ctx context.Context, e *Engine) error {
	b.mu.Lock()
	delete(b.granted, e) // a share of an earlier run is history
	c := &claim{e: e, need: b.need(e), since: e.now()}
	b.claims = append(b.claims, c)
	b.mu.Unlock()
	b.sig.poke()
	defer func() {
		b.mu.Lock()
		if i := slices.Index(b.claims, c); i >= 0 {
			b.claims = slices.Delete(b.claims, i, i+1)
		}
		b.mu.Unlock()
		b.sig.poke()
	}()
	for {
		wake := b.sig.channel()
		b.mu.Lock()
		victims, next, granted := b.turn(c)
		if granted {
			b.granted[e] = c.need
		}
		b.mu.Unlock()
		if granted {
			return nil
		}
		for _, v := range victims {
			e.log.Info("stopping an engine to make room", zap.String("box", b.name), zap.String("engine", v.e.Name()), zap.Bool("busy", v.busy))
			_ = v.e.Stop(ctx, true, StopGroup)
		}
		if len(victims) > 0 {
			continue
		}
		var tick <-chan time.Time
		if next > 0 {
			t := e.clock.NewTimer(next)
			defer t.Stop()
			tick = t.C()
		}
		select {
		case <-wake:
		case <-tick:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// view is what the scheduler knows of one engine.
type view struct {
	e        *Engine
	need     int64 // its share while it holds one
	holds    bool  // granted and not stopped
	ready    bool  // ready: it can be stopped now
	busy     bool  // requests in flight or queued
	keep     bool  // within min_loaded, or evict never: never stopped for room
	keepFor  time.Duration
	lastUsed time.Time
	waiting  int // requests waiting for it to start
	prio     int // the highest priority among them
}

// turn decides for claim c, with mu held: granted, or the engines to stop
// first, or nothing yet (and when to look again: a claim reaching max_wait,
// an engine's min_loaded ending).
func (b *box) turn(c *claim) (victims []view, next time.Duration, granted bool) {
	now := c.e.now()
	views := make([]view, 0, len(b.members))
	for o := range b.members {
		v := o.view(now)
		v.need = b.granted[o]
		v.holds = v.holds && v.need > 0
		views = append(views, v)
	}
	maxWait := b.maxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	head := b.head(now, maxWait, views)
	if head != c {
		return nil, 0, false // one claim at a time, in order
	}
	starving := now.Sub(c.since) >= maxWait
	victims, ok := decide(b.budget, views, c.e, c.need, starving)
	if ok && len(victims) == 0 {
		return nil, 0, true
	}
	if ok {
		return victims, 0, false
	}
	next = maxWait - now.Sub(c.since)
	if starving {
		next = 0
	}
	for _, v := range views {
		if v.holds && v.keepFor > 0 && (next <= 0 || v.keepFor < next) {
			next = v.keepFor
		}
	}
	return nil, next, false
}

// head is the claim to serve first: those that waited max_wait, then the
// highest priority waiting, then the oldest.
func (b *box) head(now time.Time, maxWait time.Duration, views []view) *claim {
	waiting := map[*Engine]view{}
	for _, v := range views {
		waiting[v.e] = v
	}
	var best *claim
	for _, c := range b.claims {
		if best == nil || before(c, best, now, maxWait, waiting) {
			best = c
		}
	}
	return best
}

func before(a, b *claim, now time.Time, maxWait time.Duration, waiting map[*Engine]view) bool {
	sa, sb := now.Sub(a.since) >= maxWait, now.Sub(b.since) >= maxWait
	wa, wb := waiting[a.e], waiting[b.e]
	switch {
	case sa != sb:
		return sa
	case sa:
	case wa.prio != wb.prio:
		return wa.prio > wb.prio
	case !a.since.Equal(b.since):
		return a.since.Before(b.since)
	}
	return wa.waiting > wb.waiting
}

// decide is the rule of one claim, as a pure function of what the engines
// hold (tested on its own): the engines to stop so that need fits the
// budget, and whether it can fit now. An engine that keeps its share
// (min_loaded, evict never) is never chosen, nor one that is starting or
// stopping; a busy one only for a claim that waited max_wait (starving),
// and after every idle one.
func decide(budget int64, views []view, self *Engine, need int64, starving bool) ([]view, bool) {
	var used int64
	var candidates []view
	for _, v := range views {
		if !v.holds || v.e == self {
			continue
		}
		used += v.need
		if v.ready && !v.keep && (!v.busy || starving) {
			candidates = append(candidates, v)
		}
	}
	if used+need <= budget {
		return nil, true
	}
	slices.SortFunc(candidates, func(a, b view) int {
		if a.busy != b.busy {
			if a.busy {
				return 1
			}
			return -1
		}
		return a.lastUsed.Compare(b.lastUsed)
	})
	var victims []view
	for _, v := range candidates {
		if used+need <= budget {
			break
		}
		victims = append(victims, v)
		used -= v.need
	}
	if used+need > budget {
		return nil, false
	}
	return victims, true
}

// fitsNow reports whether e's share fits without stopping anything, for a
// preload, which never evicts.
func (b *box) fitsNow(e *Engine) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := e.now()
	var used int64
	for o := range b.members {
		if o == e {
			continue
		}
		v := o.view(now)
		if v.holds {
			used += max(b.granted[o], b.need(o))
		}
	}
	return used+b.need(e) <= b.budget
}

// MemoryUse is the memory budget's use, for the admin API: what the
// engines that run or start hold, the budget, and the starts waiting for
// room, in the order they will be served.
type MemoryUse struct {
	Used    int64    `json:"used"`
	Budget  int64    `json:"budget"`
	Loaded  []string `json:"loaded"`
	Waiting []string `json:"waiting"`
}

// Memory reports the memory budget's use now.
func Memory() MemoryUse {
	b := boxNamed(memoryBox, false)
	b.mu.Lock()
	defer b.mu.Unlock()
	u := MemoryUse{Budget: b.budget, Loaded: []string{}, Waiting: []string{}}
	var now time.Time
	views := make([]view, 0, len(b.members))
	for o := range b.members {
		if now.IsZero() {
			now = o.now()
		}
		v := o.view(now)
		views = append(views, v)
		if v.holds && b.granted[o] > 0 {
			u.Used += b.granted[o]
			u.Loaded = append(u.Loaded, o.Name())
		}
	}
	slices.Sort(u.Loaded)
	maxWait := b.maxWait
	if maxWait <= 0 {
		maxWait = DefaultMaxWait
	}
	waiting := map[*Engine]view{}
	for _, v := range views {
		waiting[v.e] = v
	}
	order := slices.Clone(b.claims)
	slices.SortStableFunc(order, func(x, y *claim) int {
		switch {
		case before(x, y, now, maxWait, waiting):
			return -1
		case before(y, x, now, maxWait, waiting):
			return 1
		}
		return 0
	})
	for _, c := range order {
		u.Waiting = append(u.Waiting, c.e.Name())
	}
	return u
}

// signal wakes everyone waiting for a change in a box; it takes no lock an
// engine holds, so an engine may poke it with its own mutex held.
type signal struct {
	mu sync.Mutex
	ch chan struct{}
}

func (s *signal) channel() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch == nil {
		s.ch = make(chan struct{})
	}
	return s.ch
}

func (s *signal) poke() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ch != nil {
		close(s.ch)
		s.ch = nil
	}
}

// waitingNow is how many requests wait for the engine to start.
func (e *Engine) waitingNow() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.waiting
}
