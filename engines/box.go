package engines

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
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
//	fits once idle engines stop     they are stopped first (cheapest loss first,
//	                                see evictOrder), then granted; never an
//	                                engine with requests in flight or queued, one
//	                                within its min_loaded, or one with evict never,
//	                                nor, before the start waited max_wait, one whose
//	                                last use was of a higher priority than the
//	                                start's and ended within priority_grace
//	                                (priority.go)
//	does not fit                    the claim waits; its requests wait in their
//	                                engine's queue, then go to their fallback or
//	                                get an error
//	still kept out after max_wait   the start is refused (a *BusyError naming what
//	                                holds the room and why, with a Retry-After):
//	                                what the rules protect (min_loaded, evict
//	                                never) holds more than the budget leaves it
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
// load (the handler's Validate, CheckMemory for device sets).
//
// Every start, stop and keep the scheduler decides carries its reason
// (reasons.go), for the admin API, the metrics and the status page.
type box struct {
	name    string
	group   bool   // an exclusive group: a budget of one
	devices string // a memory box's device set ("" for the default one)

	mu      sync.Mutex
	budget  int64
	maxWait time.Duration
	grace   time.Duration // priority_grace (priority.go); 0: off
	members map[*Engine]struct{}
	granted map[*Engine]int64 // shares granted; counted while the engine is not stopped
	claims  []*claim
	sig     signal
	swaps   swapCount
	byKey   keySwaps // swaps by the key that began the start
}

// claim is a start waiting for its share.
type claim struct {
	e     *Engine
	need  int64
	since time.Time
	why   string // why it waits now, once it has had its turn (head of the queue)
}

// DefaultMaxWait is how long a start may wait for its turn before the
// scheduler drains a busy engine for it, or refuses it when what the rules
// protect leaves it no room.
const DefaultMaxWait = 30 * time.Second

// defaultRoomRetry is the Retry-After of a refused start when nothing says
// when room will come (busy engines, evict never without idle_timeout).
const defaultRoomRetry = 10 * time.Second

var (
	boxesMu sync.Mutex
	boxes   = map[string]*box{}
)

// memoryBox is the name of the box of engines with a memory size; a device
// set's box is memoryBox+":"+its devices.
const memoryBox = "memory"

// SetMemoryBudget sets the memory the engines with a memory size share in
// this process (memory_budget) and how long a start waits for its turn
// before busy engines are drained for it (max_wait; 0: DefaultMaxWait). The
// caddy module calls it when a config loads; the last config's budget wins.
func SetMemoryBudget(budget int64, maxWait time.Duration) {
	SetMemoryBudgets(budget, nil, maxWait)
}

// SetMemoryBudgets is SetMemoryBudget with the budgets of device sets
// (memory_budget <size> devices <ids>): each set is a box of its own. A set
// the last config does not name keeps no budget.
func SetMemoryBudgets(budget int64, sets []DeviceBudget, maxWait time.Duration) {
	want := map[string]int64{memoryBox: budget}
	for _, s := range sets {
		want[memoryBox+":"+DeviceSet(s.Devices)] = s.Budget
	}
	boxesMu.Lock()
	for name, b := range boxes {
		if _, ok := want[name]; !ok && !b.group {
			want[name] = 0
		}
	}
	boxesMu.Unlock()
	for name, n := range want {
		b := boxNamed(name, false)
		b.mu.Lock()
		b.budget, b.maxWait = n, maxWait
		b.mu.Unlock()
		b.sig.poke()
	}
}

func boxNamed(name string, group bool) *box {
	boxesMu.Lock()
	defer boxesMu.Unlock()
	b := boxes[name]
	if b == nil {
		b = &box{name: name, group: group, members: map[*Engine]struct{}{}, granted: map[*Engine]int64{}, grace: priorityGrace}
		if group {
			b.budget = 1
		} else {
			b.devices = strings.TrimPrefix(strings.TrimPrefix(name, memoryBox), ":")
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
	return e.cfg.Memory
}

// what names the box in messages: group gpu0, memory_budget, memory_budget
// of devices 1,2.
func (b *box) what() string {
	switch {
	case b.group:
		return "group " + strings.TrimPrefix(b.name, "group:")
	case b.devices != "":
		return "memory_budget of devices " + b.devices
	}
	return "memory_budget"
}

// size writes a share of b: memory in bytes, a group's turn as a turn.
func (b *box) size(n int64) string {
	if b.group {
		return "its turn"
	}
	return humanize.IBytes(uint64(n))
}

// claim waits until e's share is granted, stopping idle (or, for a claim
// that waited max_wait, busy) engines to make room. It returns a
// *BusyError when the start is refused: it waited max_wait and what the
// rules protect leaves it no room.
func (b *box) claim(ctx context.Context, e *Engine) error {
	key := e.starter()
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
	var stopped []string
	for {
		wake := b.sig.channel()
		b.mu.Lock()
		t := b.turn(c)
		if t.granted {
			b.granted[e] = c.need
			if len(stopped) > 0 {
				b.swaps.add(e.now())
				b.byKey.add(key)
			}
		}
		b.mu.Unlock()
		switch {
		case t.granted:
			e.noteGranted(b, e.now().Sub(c.since), stopped)
			return nil
		case t.refused != nil:
			return t.refused
		}
		for _, v := range t.victims {
			why := fmt.Sprintf("room for %s (needs %s of the %s)", e.Name(), b.size(c.need), b.what())
			reason := StopRoom
			if b.group {
				reason = StopGroup
			}
			if v.busy {
				why = fmt.Sprintf("drained for %s, which waited max_wait (%s in flight)", e.Name(), v.inUse())
			}
			e.log.Info("stopping an engine to make room", zap.String("box", b.name), zap.String("engine", v.e.Name()), zap.Bool("busy", v.busy), zap.String("why", why))
			b.swaps.stopped(v.busy)
			_ = v.e.stopFor(ctx, why, reason)
			stopped = append(stopped, v.e.Name())
		}
		if len(t.victims) > 0 {
			continue
		}
		var tick <-chan time.Time
		if t.next > 0 {
			timer := e.clock.NewTimer(t.next)
			defer timer.Stop()
			tick = timer.C()
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
	e         *Engine
	need      int64 // its share while it holds one
	holds     bool  // granted and not stopped
	ready     bool  // ready: it can be stopped now
	state     State
	busy      bool // requests in flight or queued
	inFlight  int  // leases
	queued    int  // requests in its max_concurrent queue
	keep      bool // within min_loaded, or evict never: never stopped for room
	never     bool // evict never
	keepFor   time.Duration
	grace     time.Duration // the rest of its priority_grace against the start at hand (protectWarm)
	idleFor   time.Duration // evict never: until its idle_timeout stops it (0: never)
	lastUsed  time.Time
	startTook time.Duration // its last start: what stopping it loses
	usePrio   int           // the highest priority among the requests of its last use
	waiting   int           // requests waiting for it to start
	prio      int           // the highest priority among them
}

// turnResult is what one look at the queue decided for a claim.
type turnResult struct {
	granted bool
	victims []view        // to stop first
	refused *BusyError    // the start is refused
	next    time.Duration // when to look again (0: at the next change)
}

// turn decides for claim c, with mu held: granted, or the engines to stop
// first, or refused, or nothing yet (and when to look again: a claim
// reaching max_wait, an engine's min_loaded ending).
func (b *box) turn(c *claim) turnResult {
	now := c.e.now()
	views := b.views(now)
	maxWait := b.maxWaitOr()
	head := b.head(now, maxWait, views)
	if head != c {
		return turnResult{} // one claim at a time, in order
	}
	waited := now.Sub(c.since)
	starving := waited >= maxWait
	if !starving {
		protectWarm(views, startPrio(views, c.e), b.grace, now)
	}
	victims, ok := decide(b.budget, views, c.e, c.need, starving, now)
	switch {
	case ok && len(victims) == 0:
		c.why = ""
		return turnResult{granted: true}
	case ok:
		names := make([]string, len(victims))
		for i, v := range victims {
			names[i] = v.e.Name()
		}
		c.why = "stopping " + strings.Join(names, ", ") + " to make room"
		return turnResult{victims: victims}
	}
	held := heldBy(views, c.e)
	c.why = "waiting for room: " + strings.Join(held, ", ")
	if starving && !fitsBesideKept(b.budget, views, c.e, c.need) {
		return turnResult{refused: &BusyError{Engine: c.e.Name(), Waited: waited, WaitingFor: held,
			Need: b.size(c.need), Box: b.what(), RetryAfter: roomRetry(views, c.e)}}
	}
	next := maxWait - waited
	if starving {
		next = 0
	}
	for _, v := range views {
		if !v.holds {
			continue
		}
		for _, d := range []time.Duration{v.keepFor, v.grace} {
			if d > 0 && (next <= 0 || d < next) {
				next = d
			}
		}
	}
	return turnResult{next: next}
}

// views are the members as the scheduler sees them now. Call with mu held.
func (b *box) views(now time.Time) []view {
	views := make([]view, 0, len(b.members))
	for o := range b.members {
		v := o.view(now)
		v.need = b.granted[o]
		v.holds = v.holds && v.need > 0
		views = append(views, v)
	}
	return views
}

func (b *box) maxWaitOr() time.Duration {
	if b.maxWait <= 0 {
		return DefaultMaxWait
	}
	return b.maxWait
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
// stopping, nor one within the priority_grace of a higher-priority use
// (protectWarm marks them, for a claim that is not starving); a busy one
// only for a claim that waited max_wait (starving), and after every idle
// one. Among the rest, cheapest loss first
// (evictOrder), and no more than it takes: a victim whose share the later
// ones free anyway is kept.
func decide(budget int64, views []view, self *Engine, need int64, starving bool, now time.Time) ([]view, bool) {
	var used int64
	var candidates []view
	for _, v := range views {
		if !v.holds || v.e == self {
			continue
		}
		used += v.need
		if v.ready && !v.keep && v.grace == 0 && (!v.busy || starving) {
			candidates = append(candidates, v)
		}
	}
	if used+need <= budget {
		return nil, true
	}
	slices.SortFunc(candidates, func(a, b view) int { return evictOrder(a, b, now) })
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
	// the last victim was needed; an earlier one may not be once the later,
	// bigger ones go: keep it (the dearest first)
	for i := len(victims) - 2; i >= 0; i-- {
		if used+victims[i].need+need <= budget {
			used += victims[i].need
			victims = slices.Delete(victims, i, i+1)
		}
	}
	return victims, true
}

// evictOrder orders the engines a claim may stop, the cheapest loss first:
//
//  1. idle before busy (a busy one only for a claim that waited max_wait)
//  2. the lower priority of its last use first (the highest priority among
//     the requests it served then): a batch model goes before an
//     interactive one
//  3. the smaller loss first: what a restart would cost, its last start's
//     duration, discounted by how long it has been idle compared with that
//     duration (loss = start² / (start + idle)), so a model that takes a
//     minute to load is kept over one that takes two seconds unless it has
//     been idle much longer. Starts are compared by their power of two (a
//     50 s and a 60 s start are alike; under 2.8 s, all are), so that the
//     noise of a measure never outweighs recency
//  4. the least recently used first
func evictOrder(a, b view, now time.Time) int {
	if a.busy != b.busy {
		if a.busy {
			return 1
		}
		return -1
	}
	if a.usePrio != b.usePrio {
		return cmp.Compare(a.usePrio, b.usePrio)
	}
	if la, lb := a.loss(now), b.loss(now); la != lb {
		return cmp.Compare(la, lb)
	}
	return a.lastUsed.Compare(b.lastUsed)
}

// loss is what stopping the engine costs, in seconds of a restart
// discounted by its idleness (evictOrder).
func (v view) loss(now time.Time) float64 {
	s := v.startTook.Seconds()
	if s <= 0 {
		return 0
	}
	s = math.Exp2(max(math.Round(math.Log2(s)), 1)) // 2, 4, 8, … seconds
	idle := max(now.Sub(v.lastUsed).Seconds(), 0)
	return s * s / (s + idle)
}

// heldBecause is why the engine keeps its share now, "" when the
// scheduler may stop it.
func (v view) heldBecause() string {
	switch {
	case v.state == Starting:
		return "starting"
	case v.state == Draining:
		return "stopping"
	case v.never:
		return "evict never"
	case v.keep:
		return "min_loaded for " + v.keepFor.Round(time.Second).String() + " more"
	case v.busy:
		return v.inUse()
	case v.grace > 0:
		left := v.grace.Round(time.Second)
		if left == 0 {
			left = v.grace.Round(time.Millisecond)
		}
		return fmt.Sprintf("used at priority %d, priority_grace for %s more", v.usePrio, left)
	}
	return ""
}

// inUse says how busy the engine is: in use (2 in flight, 1 queued).
func (v view) inUse() string {
	parts := []string{}
	if v.inFlight > 0 {
		parts = append(parts, fmt.Sprintf("%d in flight", v.inFlight))
	}
	if v.queued > 0 {
		parts = append(parts, fmt.Sprintf("%d queued", v.queued))
	}
	if len(parts) == 0 {
		return "in use"
	}
	return "in use, " + strings.Join(parts, ", ")
}

// heldBy names the engines that hold room a claim of self cannot take now,
// and why: "qwen (in use, 2 in flight)", "llama (min_loaded for 40s more)".
func heldBy(views []view, self *Engine) []string {
	var held []string
	for _, v := range views {
		if !v.holds || v.e == self {
			continue
		}
		if why := v.heldBecause(); why != "" {
			held = append(held, v.e.Name()+" ("+why+")")
		}
	}
	slices.Sort(held)
	return held
}

// fitsBesideKept reports whether need would fit if every engine the rules
// let the scheduler stop (idle or busy, not within min_loaded or evict
// never) were stopped: when it would not, waiting longer does not help
// until a rule lets go.
func fitsBesideKept(budget int64, views []view, self *Engine, need int64) bool {
	var kept int64
	for _, v := range views {
		if v.holds && v.e != self && v.keep {
			kept += v.need
		}
	}
	return kept+need <= budget
}

// roomRetry is when room may come for a refused start: the first
// min_loaded to end, or the idle stop of an evict never engine, else
// defaultRoomRetry; in whole seconds, between 1 s and maxRetryAfter.
func roomRetry(views []view, self *Engine) time.Duration {
	d := time.Duration(0)
	for _, v := range views {
		if !v.holds || v.e == self || !v.keep {
			continue
		}
		in := v.keepFor
		if v.never {
			in = v.idleFor
		}
		if in > 0 && (d == 0 || in < d) {
			d = in
		}
	}
	if d == 0 {
		d = defaultRoomRetry
	}
	d = (d + time.Second - 1).Truncate(time.Second)
	return min(max(d, time.Second), maxRetryAfter)
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
