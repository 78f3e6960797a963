package engines

import (
	"fmt"
	"math"
	"strings"
	"sync"
	"time"

	"github.com/dustin/go-humanize"
)

// A box is what engines share and cannot all hold at once: a
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
// Oldest first measured as well as most-wanted first on the scheduler bench's trace
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

// view is what the scheduler sees of the engine now.
func (e *Engine) view(now time.Time) view {
	e.mu.Lock()
	defer e.mu.Unlock()
	v := view{e: e, holds: e.state != Stopped && e.state != Sleeping, ready: e.state == Ready, busy: e.leases > 0,
		state: e.state, inFlight: e.leases, lastUsed: e.lastUsed, waiting: e.waiting,
		startTook: e.swapCost(), usePrio: e.usePrio}
	first := true
	for p := range e.waitPrios {
		if first || p > v.prio {
			v.prio, first = p, false
		}
	}
	if e.lim != nil {
		if v.queued = e.lim.queued(); v.queued > 0 {
			v.busy = true
		}
	}
	if e.leases > 0 {
		v.lastUsed = now
	}
	switch {
	case e.cfg.Evict == EvictNever:
		v.keep, v.never = true, true
		if d := time.Duration(e.cfg.IdleTimeout); d > 0 && e.leases == 0 && !v.lastUsed.IsZero() {
			v.idleFor = max(v.lastUsed.Add(d).Sub(now), 0)
		}
	case e.cfg.MinLoaded > 0:
		if left := v.lastUsed.Add(time.Duration(e.cfg.MinLoaded)).Sub(now); left > 0 {
			v.keep, v.keepFor = true, left
		}
	}
	return v
}

// swapCount counts a box's swaps (starts that stopped engines to make
// room) and the stops the scheduler made, and keeps the swaps of the last
// hour by the minute, so that a page can say how often it swaps without
// keeping a moment per swap.
type swapCount struct {
	mu      sync.Mutex
	total   uint64
	room    uint64 // idle engines stopped for room
	drained uint64 // busy engines drained for a start that waited max_wait
	refused uint64 // starts refused: no room within max_wait
	minutes [60]struct {
		at int64 // the minute (Unix minutes) the count is of
		n  int
	}
}

func (s *swapCount) add(now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.total++
	m := now.Unix() / 60
	slot := &s.minutes[m%60]
	if slot.at != m {
		slot.at, slot.n = m, 0
	}
	slot.n++
}

func (s *swapCount) stopped(busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if busy {
		s.drained++
	} else {
		s.room++
	}
}

func (s *swapCount) refuse() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refused++
}

// lastHour is the swaps of the last 60 minutes (this one included).
func (s *swapCount) lastHour(now time.Time) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := now.Unix() / 60
	n := 0
	for _, slot := range s.minutes {
		if slot.at > m-60 && slot.at <= m {
			n += slot.n
		}
	}
	return n
}

func (s *swapCount) counts() (total, room, drained, refused uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.total, s.room, s.drained, s.refused
}

// keySwaps counts a box's swaps by the key whose request began the start
// that stopped engines (who causes them). Key names come from the
// config, so the map is as small as the keys are few. Guarded by the box's
// mu.
type keySwaps map[string]uint64

func (k *keySwaps) add(key string) {
	if *k == nil {
		*k = keySwaps{}
	}
	(*k)[key]++
}

// DefaultPriorityGrace is how long an idle engine of a higher-priority use
// is kept from a lower-priority start, when the config says nothing.
const DefaultPriorityGrace = 30 * time.Second

// priorityGrace is the grace a box gets when it is made: the last
// config's (SetPriorityGrace), DefaultPriorityGrace before any. Guarded by
// boxesMu.
var priorityGrace = DefaultPriorityGrace

// SetPriorityGrace sets every box's priority_grace (0: off). The caddy
// module calls it when a config loads; the last config's wins, as for the
// memory budget.
func SetPriorityGrace(d time.Duration) {
	boxesMu.Lock()
	defer boxesMu.Unlock()
	priorityGrace = max(d, 0)
	for _, b := range boxes {
		b.mu.Lock()
		b.grace = priorityGrace
		b.mu.Unlock()
		b.sig.poke()
	}
}

// swapCost is what the scheduler loses by swapping the engine out: its last
// start's duration, or with swap sleep its last wake's, once it has woken.
// Call with mu held.
func (e *Engine) swapCost() time.Duration {
	if e.cfg.Sleeps() && e.wakeTook > 0 {
		return e.wakeTook
	}
	return e.startTook
}
