package engines

import (
	"time"
)

// Status and observers: the snapshot for the admin API, the status page and
// /v1/models, and the engine's output lines for its log stream.

// Status is a snapshot of an engine for the admin API and /v1/models.
type Status struct {
	Name     string   `json:"name"`
	Models   []string `json:"models"`
	Managed  bool     `json:"managed"`
	State    string   `json:"state"`
	Ready    bool     `json:"ready"`
	PID      int      `json:"pid,omitempty"`
	Port     int      `json:"port,omitempty"`
	Leases   int      `json:"leases"`
	IdleSecs float64  `json:"idle_seconds,omitempty"`
	Group    string   `json:"group,omitempty"`
	// Memory is what the engine holds while it runs, counted against the
	// memory budget (memory); absent without one.
	Memory int64 `json:"memory,omitempty"`
	// Health is "up" or "down" for an engine with health checks; empty
	// without them. A down engine's State is "down" too.
	Health string `json:"health,omitempty"`
	// Breaker is the worst of the engine's breakers: open when the host's
	// or any model's is.
	Breaker string `json:"breaker"`
	// EngineBreaker is the host's own breaker (transport failures).
	EngineBreaker string `json:"engine_breaker"`
	// ModelBreakers are the per-model breakers that are not closed, by the
	// model sent upstream (status failures and answer timeouts).
	ModelBreakers map[string]string `json:"model_breakers,omitempty"`
	LastError     string            `json:"last_error,omitempty"`
	LastLines     []string          `json:"last_lines,omitempty"`
	// StartingSince is when the start in progress began (its PID is the
	// starting process's once it is spawned); zero unless starting.
	StartingSince time.Time `json:"starting_since,omitzero"`
	// Limit is the engine's max_concurrent and its queue, now; absent
	// without a limit.
	Limit *LimitStatus `json:"limit,omitempty"`
	// Devices is the device set the engine runs on (devices); absent
	// without one.
	Devices string `json:"devices,omitempty"`
	// Why is the scheduler's last start and stop of the engine, and why.
	Why Reasons `json:"why"`
	// Swap is stop or sleep (swap); a sleeping engine's State is
	// "sleeping", its PID and Memory are what it holds in the host.
	Swap string `json:"swap,omitempty"`
	// Slots is slots save's table and counts; absent without it.
	Slots *SlotsStatus `json:"slots,omitempty"`
	// APIs is the engine's `api` line; absent without one (every API).
	APIs []string `json:"apis,omitempty"`
	// Unspoken are the routes its process answered it does not have
	// (spoken.go): chat, responses, messages, count_tokens, tokenize.
	Unspoken []string `json:"unspoken,omitempty"`
	// Provider is a cloud provider's engine's provider, where it sends
	// requests and its last answer (answers.go); absent for another
	// engine. Such an engine's State is ready, failing or down.
	Provider *ProviderStatus `json:"provider,omitempty"`
}

// LimitStatus is an engine's concurrency limit and its use.
type LimitStatus struct {
	MaxConcurrent int `json:"max_concurrent"`
	InFlight      int `json:"in_flight"` // places taken: requests with a lease or waiting for the start
	Queue         int `json:"queue"`     // how many may wait
	Queued        int `json:"queued"`    // how many wait now
}

// Status reports the engine's state now.
func (e *Engine) Status() Status {
	e.mu.Lock()
	s := Status{
		Name: e.cfg.Name, Models: e.cfg.Models, Managed: e.cfg.Managed(), Group: e.cfg.Group, Memory: e.cfg.Memory,
		Devices: DeviceSet(e.cfg.Devices), Why: e.why, APIs: e.cfg.APIs, Unspoken: e.Unspoken().Names(),
		State: e.state.String(), Ready: e.state == Ready, Port: e.port, Leases: e.leases,
		EngineBreaker: e.brk.State().String(),
	}
	if e.proc != nil {
		s.PID = e.proc.pid()
	}
	if e.state == Starting {
		s.StartingSince = e.startAt
		if s.PID == 0 {
			s.PID = e.startPID
		}
	}
	if e.cfg.Checked() {
		s.Health = "up"
	}
	if !s.Managed {
		// one state on every surface: the admin API, the
		// status page, /v1/models and the metrics all read this one
		s.State = e.remoteState()
		s.Ready = s.State == "ready"
		if e.down.Load() {
			s.Health = "down"
		}
	}
	if (e.state == Ready || e.state == Sleeping) && e.leases == 0 && !e.lastUsed.IsZero() {
		s.IdleSecs = e.now().Sub(e.lastUsed).Seconds()
	}
	if e.lastErr != nil {
		s.LastError = e.lastErr.Error()
	}
	brks := make(map[string]*Breaker, len(e.modelBrks))
	for m, b := range e.modelBrks {
		brks[m] = b
	}
	e.mu.Unlock()
	worst := e.brk.State()
	for m, b := range brks {
		if st := b.State(); st != BreakerClosed {
			if s.ModelBreakers == nil {
				s.ModelBreakers = map[string]string{}
			}
			s.ModelBreakers[m] = st.String()
			if worst != BreakerOpen {
				worst = st
			}
		}
	}
	s.Breaker = worst.String()
	s.LastLines = e.lines.last(keptLines)
	if e.cfg.Managed() {
		s.Swap = e.cfg.Swap
	}
	if e.slots != nil {
		s.Slots = e.slots.status()
	}
	s.Provider = e.providerStatus()
	if e.lim != nil && e.cfg.MaxConcurrent > 0 { // the default cap is no limit the operator set (DefaultMaxConcurrent)
		held, queued := e.lim.counts()
		s.Limit = &LimitStatus{MaxConcurrent: e.cfg.MaxConcurrent, InFlight: held, Queue: e.cfg.Queue, Queued: queued}
	}
	return s
}

// Lines returns the output lines numbered after seq that are still kept
// (oldest first, masked), the number of the newest line, and a channel
// closed when the next line arrives. Start with seq 0 for every kept line.
// A reader follows the output at its own pace and never holds it up; one
// that falls more than the kept lines behind skips ahead.
func (e *Engine) Lines(seq uint64) ([]string, uint64, <-chan struct{}) {
	return e.lines.since(seq)
}

// TimedLines is Lines with each line's time and run (the engine's start
// that printed it), for the status page's output with a line between runs.
func (e *Engine) TimedLines(seq uint64) ([]Line, uint64, <-chan struct{}) {
	return e.lines.timedSince(seq)
}
