package statuspage

import (
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The scheduler on the page: for each memory budget (the
// handler's, each device set's) and each exclusive group, what is used of
// it, the starts waiting in the order they will be served and why, each
// engine's share, why it may not be stopped now and why it last started and
// stopped, and the swaps of the last hour. Moments are sent, not durations,
// so that an unchanged scheduler is the same bytes (see snapshot).

// boxView is one box.
type boxView struct {
	// Name is what the page calls it: "memory_budget", "devices 1,2",
	// "group gpu0".
	Name   string `json:"name"`
	Group  bool   `json:"group,omitempty"` // a budget of one: sizes are turns, not bytes
	Used   int64  `json:"used"`
	Budget int64  `json:"budget"`
	// SwapsLastHour are the starts of the last hour that stopped engines
	// to make room.
	SwapsLastHour int           `json:"swaps_last_hour"`
	Refused       uint64        `json:"refused,omitempty"`
	Queue         []queuedView  `json:"queue"`
	Engines       []shareHolder `json:"engines"`
	// Asleep are the engines put to sleep (swap sleep): no share of the
	// budget, AsleepMemory of host memory.
	Asleep       []string `json:"asleep,omitempty"`
	AsleepMemory int64    `json:"asleep_memory,omitempty"`
}

// queuedView is a start waiting for room, in the order of the queue.
type queuedView struct {
	Engine   string `json:"engine"`
	Need     int64  `json:"need"`
	Requests int    `json:"requests"`
	Priority int    `json:"priority,omitempty"`
	Since    int64  `json:"since"` // Unix ms
	Why      string `json:"why"`
}

// shareHolder is a member of a box.
type shareHolder struct {
	Name  string `json:"name"`
	Share int64  `json:"share"`
	State string `json:"state"`
	Holds bool   `json:"holds,omitempty"`
	// Held is why the scheduler may not stop it now; with KeptUntil
	// (min_loaded), the page counts down.
	Held      string `json:"held,omitempty"`
	KeptUntil int64  `json:"kept_until,omitempty"`
	Started   string `json:"started,omitempty"`
	StartedAt int64  `json:"started_at,omitempty"`
	Stopped   string `json:"stopped,omitempty"`
	StoppedAt int64  `json:"stopped_at,omitempty"`
}

// memoryViews reads the scheduler's boxes: the handler's memory budget if
// it has one, the device sets, the groups. None without them.
func memoryViews() []boxView {
	s := engines.Boxes()
	var out []boxView
	if s.Budget > 0 {
		out = append(out, boxOf("memory_budget", s.MemoryUse))
	}
	for _, u := range s.Sets {
		out = append(out, boxOf("devices "+u.Devices, u))
	}
	for _, u := range s.Groups {
		out = append(out, boxOf("group "+u.Group, u))
	}
	return out
}

func boxOf(name string, u engines.MemoryUse) boxView {
	v := boxView{Name: name, Group: u.Group != "", Used: u.Used, Budget: u.Budget, SwapsLastHour: u.SwapsLastHour,
		Refused: u.Refused, Queue: make([]queuedView, 0, len(u.Queue)), Engines: make([]shareHolder, 0, len(u.Engines)),
		Asleep: u.Asleep, AsleepMemory: u.AsleepMemory}
	for _, q := range u.Queue {
		v.Queue = append(v.Queue, queuedView{Engine: q.Engine, Need: q.Need, Requests: q.Requests, Priority: q.Priority,
			Since: q.Since.UnixMilli(), Why: q.Why})
	}
	for _, e := range u.Engines {
		h := shareHolder{Name: e.Name, Share: e.Memory, State: e.State, Holds: e.Holds, Held: e.Held,
			Started: e.Why.Started, StartedAt: msOrZero(e.Why.StartedAt), Stopped: e.Why.Stopped, StoppedAt: msOrZero(e.Why.StoppedAt)}
		if !e.KeptUntil.IsZero() {
			// the page counts down: the words would change every second
			h.Held, h.KeptUntil = "min_loaded", roundMs(e.KeptUntil)
		}
		if strings.HasPrefix(h.Held, "in use") {
			h.Held = "in use" // the engine card has its leases
		}
		v.Engines = append(v.Engines, h)
	}
	return v
}

func msOrZero(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}
