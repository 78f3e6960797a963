package engines

import (
	"maps"
	"slices"
	"strings"
	"time"
)

// What the scheduler shows: for each box, what is used of its
// budget, the starts waiting in the order they will be served and why each
// waits, each member's share, why it may not be stopped now and why it
// last started and stopped, and its swaps. The admin API
// (GET /llm_gateway/memory), the metrics and the status page read it.

// MemoryUse is one box's use now.
type MemoryUse struct {
	// Devices is the device set of a memory_budget with devices; "" for
	// the handler's memory_budget and for a group.
	Devices string `json:"devices,omitempty"`
	// Group is the exclusive group's name, for a group (a budget of one).
	Group string `json:"group,omitempty"`
	// Unit is what Used, Budget, each queued start's need, each engine's
	// memory and AsleepMemory count: "bytes" for a memory_budget, "turns"
	// for a group (a budget of one turn; each engine needs one), whose
	// figures are no sizes.
	Unit   string `json:"unit"`
	Used   int64  `json:"used"`
	Budget int64  `json:"budget"`
	// Loaded are the engines that hold a share (running or starting).
	Loaded []string `json:"loaded"`
	// Waiting are the starts waiting for room, in the order they will be
	// served; Queue says the same with why each waits.
	Waiting []string      `json:"waiting"`
	Queue   []QueuedStart `json:"queue"`
	Engines []EngineUse   `json:"engines"`
	// Swaps are the starts that stopped engines to make room, since the
	// process started; SwapsLastHour those of the last hour.
	Swaps         uint64 `json:"swaps"`
	SwapsLastHour int    `json:"swaps_last_hour"`
	// SwapsByKey are the swaps by the name of the key whose request began
	// the start ("" for a key without a name, a request without a key, an
	// admin start), since the process started: who causes them.
	SwapsByKey map[string]uint64 `json:"swaps_by_key,omitempty"`
	// Stops are the scheduler's stops since the process started, by
	// reason: room (an idle engine stopped for a start), drained (a busy
	// one drained for a start that waited max_wait); Refused the starts
	// it refused (no room within max_wait).
	Stops   map[string]uint64 `json:"stops"`
	Refused uint64            `json:"refused"`
	// Asleep are the engines put to sleep (swap sleep): they hold no share
	// of the budget, but their processes and weights stay in host memory,
	// AsleepMemory in all (their memory).
	Asleep       []string `json:"asleep"`
	AsleepMemory int64    `json:"asleep_memory"`
}

// QueuedStart is one start waiting for room.
type QueuedStart struct {
	Engine string `json:"engine"`
	Need   int64  `json:"need"`
	// Requests are the requests waiting for it; Priority the highest of
	// theirs.
	Requests int       `json:"requests"`
	Priority int       `json:"priority"`
	Since    time.Time `json:"since"`
	// Waited is how long it has waited, in seconds.
	Waited float64 `json:"waited_seconds"`
	// Why it waits: "stopping a to make room", "waiting for room: b (in
	// use, 2 in flight)", "in turn after c".
	Why string `json:"why"`
}

// EngineUse is one member of a box.
type EngineUse struct {
	Name   string `json:"name"`
	Memory int64  `json:"memory"`
	State  string `json:"state"`
	Holds  bool   `json:"holds"` // its share is counted
	// Held is why the scheduler may not stop it now ("in use, 2 in
	// flight", "min_loaded for 40s more", "evict never", "starting");
	// "" when it may.
	Held string `json:"held,omitempty"`
	// KeptUntil is when its min_loaded ends, while it protects it.
	KeptUntil time.Time `json:"kept_until,omitzero"`
	// Priority is the highest priority among the requests of its last
	// use: idle engines of lower priority are stopped first.
	Priority int     `json:"priority"`
	Why      Reasons `json:"why"`
}

// Scheduler is every box's use: the handler's memory_budget, each device
// set's, each exclusive group's.
type Scheduler struct {
	MemoryUse             // the handler's memory_budget
	Sets      []MemoryUse `json:"sets,omitempty"`
	Groups    []MemoryUse `json:"groups,omitempty"`
}

// Memory reports the handler's memory budget's use now.
func Memory() MemoryUse {
	return boxNamed(memoryBox, false).use()
}

// Boxes reports every box's use now: the handler's memory budget first,
// then the device sets and groups by name. Device sets without a budget
// (no config names them) are left out.
func Boxes() Scheduler {
	boxesMu.Lock()
	all := make([]*box, 0, len(boxes))
	for _, b := range boxes {
		all = append(all, b)
	}
	boxesMu.Unlock()
	slices.SortFunc(all, func(a, b *box) int { return strings.Compare(a.name, b.name) })
	s := Scheduler{MemoryUse: Memory()}
	for _, b := range all {
		switch {
		case b.group:
			s.Groups = append(s.Groups, b.use())
		case b.devices != "":
			if u := b.use(); u.Budget > 0 {
				s.Sets = append(s.Sets, u)
			}
		}
	}
	return s
}

// use is the box's use now.
func (b *box) use() MemoryUse {
	b.mu.Lock()
	defer b.mu.Unlock()
	u := MemoryUse{Devices: b.devices, Budget: b.budget, Loaded: []string{}, Waiting: []string{}, Asleep: []string{},
		Queue: []QueuedStart{}, Engines: []EngineUse{}}
	u.Unit = "bytes"
	if b.group {
		u.Group, u.Unit = strings.TrimPrefix(b.name, "group:"), "turns"
	}
	var now time.Time
	views := make([]view, 0, len(b.members))
	for o := range b.members {
		if now.IsZero() {
			now = o.now()
		}
		v := o.view(now)
		v.need = b.granted[o]
		v.holds = v.holds && v.need > 0
		views = append(views, v)
		eu := EngineUse{Name: o.Name(), Memory: b.need(o), State: v.state.String(), Holds: v.holds, Priority: v.usePrio, Why: o.Why()}
		if v.holds {
			u.Used += v.need
			u.Loaded = append(u.Loaded, o.Name())
			eu.Held = v.heldBecause()
			if v.keep && !v.never && v.keepFor > 0 {
				eu.KeptUntil = now.Add(v.keepFor)
			}
		}
		if v.state == Sleeping {
			u.Asleep = append(u.Asleep, o.Name())
			if !b.group {
				u.AsleepMemory += b.need(o)
			}
		}
		u.Engines = append(u.Engines, eu)
	}
	if now.IsZero() {
		now = time.Now()
	}
	slices.Sort(u.Loaded)
	slices.Sort(u.Asleep)
	slices.SortFunc(u.Engines, func(x, y EngineUse) int { return strings.Compare(x.Name, y.Name) })
	maxWait := b.maxWaitOr()
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
	for i, c := range order {
		u.Waiting = append(u.Waiting, c.e.Name())
		w := waiting[c.e]
		q := QueuedStart{Engine: c.e.Name(), Need: c.need, Requests: w.waiting, Priority: w.prio,
			Since: c.since, Waited: now.Sub(c.since).Seconds(), Why: c.why}
		switch {
		case i > 0:
			q.Why = "in turn after " + order[i-1].e.Name()
		case q.Why == "":
			q.Why = "its turn: about to start"
		}
		if i == 0 && now.Sub(c.since) >= maxWait && strings.HasPrefix(q.Why, "waiting for room") {
			q.Why += "; it waited max_wait: busy engines are drained for it"
		}
		u.Queue = append(u.Queue, q)
	}
	total, room, drained, refused := b.swaps.counts()
	u.Swaps, u.SwapsLastHour, u.Refused = total, b.swaps.lastHour(now), refused
	u.Stops = map[string]uint64{"room": room, "drained": drained}
	if len(b.byKey) > 0 {
		u.SwapsByKey = maps.Clone(map[string]uint64(b.byKey))
	}
	return u
}
