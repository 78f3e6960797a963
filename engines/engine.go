package engines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// State is where an engine is in its life.
//
//	stopped ──Acquire/Start──▶ starting ──ready──▶ ready ──idle/group/stop──▶ draining ──▶ stopped
//	   ▲                          │ fails                 │ crash                  │ swap sleep
//	   └──────────────────────────┴───────────────────────┘                        ▼
//	                              starting ◀──Acquire (wake)───────────────── sleeping
//
// An engine with swap sleep is put to sleep where it would be stopped for
// room or after sleep_after, and woken where it would be started (sleep.go
// has the sleep's own diagram and its fallbacks).
//
// A remote engine (no command) is always ready: the gateway does not own it.
// Its health checks (health.go) may mark it down beside its state.
type State int

// The states.
const (
	Stopped State = iota
	Starting
	Ready
	Draining
	Sleeping // swap sleep: the process runs, the GPU is free (sleep.go)
)

func (s State) String() string {
	switch s {
	case Starting:
		return "starting"
	case Ready:
		return "ready"
	case Draining:
		return "draining"
	case Sleeping:
		return "sleeping"
	}
	return "stopped"
}

// ErrNotRunning is returned by Acquire for a stopped engine that may not be woken.
var ErrNotRunning = errors.New("engine is not running")

// ErrClosed is returned once the engine has been torn down.
var ErrClosed = errors.New("engine is shut down")

// StartError is a failed start: why, and what the process printed last.
type StartError struct {
	Engine    string
	Reason    string
	LastLines []string
}

func (e *StartError) Error() string {
	msg := fmt.Sprintf("engine %s failed to start: %s", e.Engine, e.Reason)
	if len(e.LastLines) > 0 {
		msg += "; last output: " + strings.Join(e.LastLines, " | ")
	}
	return msg
}

// Observer hears about an engine's life, for metrics and events. Its
// methods are called from the engine's own goroutines; keep them cheap.
type Observer interface {
	EngineStarted(name string, pid int, took time.Duration)
	EngineStartFailed(name, reason string)
	EngineStopped(name string, pid int, reason StopReason)
}

// StopReason says why an engine stopped.
type StopReason string

// The reasons.
const (
	StopIdle   StopReason = "idle"
	StopGroup  StopReason = "group"
	StopAdmin  StopReason = "admin"
	StopReload StopReason = "reload" // its config went away (a reload, or Caddy's stop)
	StopCrash  StopReason = "crash"
)

// Engine is one upstream at runtime. Engines with a command outlive config
// reloads (the caddy module keeps them in a usage pool keyed by definition),
// so nothing here refers to a particular config generation.
type Engine struct {
	cfg   Config
	rt    http.RoundTripper
	log   *zap.Logger
	lines lineBuffer
	boxes []*box // what it shares: its group, the memory budget
	clock clock.Clock
	brk   *Breaker // the engine's own: transport failures (the host is sick)
	obs   Observer
	lim   *limiter // max_concurrent and its queue; nil without a limit

	life   context.Context // ends when the engine is torn down
	cancel context.CancelFunc
	wg     sync.WaitGroup // start and watch goroutines

	mu        sync.Mutex
	state     State
	changed   chan struct{} // closed and replaced on every state change
	leases    int
	base      *url.URL // where to send requests while ready
	port      int
	proc      *process
	startSeq  uint64    // counts starts, so a waiter knows which one it waited for
	startAt   time.Time // when the start in progress began (beginStart)
	startPID  int       // its process, once spawned; proc is set only when ready
	lastErr   error     // why start number startSeq failed, if it did
	readyAt   time.Time
	lastUsed  time.Time
	failures  int // consecutive failed starts and quick crashes
	idleTimer clock.Timer
	idleGen   uint64
	closed    bool
	waiting   int                 // requests waiting for a start: the scheduler serves the most wanted first
	waitPrios map[int]int         // their priorities, counted
	startTook time.Duration       // the last start's duration: what the scheduler loses by stopping it
	usePrio   int                 // the highest priority among the requests of its last use (reasons.go)
	freshUse  bool                // a new use began: the next priority noted replaces usePrio
	startKey  string              // the key whose request began the last start: its swaps count by it (priority.go)
	why       Reasons             // the scheduler's last start and stop, and why
	stopWhy   string              // the scheduler's reason for the stop under way
	modelBrks map[string]*Breaker // one per model sent: status failures and answer timeouts
	waking    bool                // the start under way wakes the sleeping process (sleep.go)
	wakeTook  time.Duration       // the last wake's duration: what a swap out costs with swap sleep
	slots     *slotTable          // slots save: the sessions in the engine's slots (slots.go)

	// health checks of a remote engine (health.go)
	down         atomic.Bool // failed health_fails checks in a row, not yet passed health_passes; read per request without mu
	healthPasses int         // consecutive passed checks
	healthFails  int         // consecutive failed checks

	// what the last look at a remote engine without health checks saw
	// (health.go: heard*)
	heard atomic.Int32

	// a provider's engine's last answer (answers.go): its state
	answer atomic.Pointer[Answer]

	// the engine's own load, read in the background (signals.go)
	sig signalState

	// what its process was learned not to speak (spoken.go)
	spoken spoken
}

// SetObserver sets who hears about starts and stops; call it before use.
func (e *Engine) SetObserver(o Observer) { e.obs = o }

// SetClock sets the clock of the engine's timers and breakers (a clock.Fake
// in tests); call it before use.
func (e *Engine) SetClock(c clock.Clock) {
	e.clock = c
	if e.lim != nil {
		e.lim.clock = c
	}
}

// Clock is the engine's clock.
func (e *Engine) Clock() clock.Clock { return e.clock }

func (e *Engine) now() time.Time { return e.clock.Now() }

// Name is the engine's configured name.
func (e *Engine) Name() string { return e.cfg.Name }

// Config is the engine's definition, defaults filled in.
func (e *Engine) Config() Config { return e.cfg }

// Transport carries requests to this engine.
func (e *Engine) Transport() http.RoundTripper { return e.rt }

// Breaker guards the engine as a host: consecutive transport failures
// (connect, DNS, TLS, a hang-up before headers) open it, and then no request
// for any of its models is sent to it.
func (e *Engine) Breaker() *Breaker { return e.brk }

// ModelBreaker guards one model of the engine: consecutive status failures
// (429, 5xx) and answer timeouts of that model open it, and only requests
// for that model go elsewhere. model is the name sent upstream; the set is
// bounded by the config, which names every model an engine may be sent.
func (e *Engine) ModelBreaker(model string) *Breaker {
	e.mu.Lock()
	defer e.mu.Unlock()
	b := e.modelBrks[model]
	if b == nil {
		if e.modelBrks == nil {
			e.modelBrks = map[string]*Breaker{}
		}
		b = NewBreaker(e.cfg.BreakerFailures, time.Duration(e.cfg.BreakerCooldown), e.now)
		e.modelBrks[model] = b
	}
	return b
}

// broadcast wakes everyone waiting for a change. Call with mu held.
func (e *Engine) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
	for _, b := range e.boxes {
		b.sig.poke()
	}
}

// Changed returns a channel that is closed at the engine's next change of
// state (a start, ready, a stop), for watchers such as the status page.
func (e *Engine) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
}

// State is the engine's state now.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// pokeBoxes tells the engine's boxes that its wants changed. Safe with mu
// held.
func (e *Engine) pokeBoxes() {
	for _, b := range e.boxes {
		b.sig.poke()
	}
}

// Signal is one read of an engine's own load.
type Signal struct {
	At      time.Time
	Running float64 // requests the engine is working on
	Waiting float64 // requests it queued (deferred) for a free slot
	KVCache float64 // share of its KV cache in use, 0–1; -1 when not published

	// Slots and SlotsBusy are llama-server's slots and those processing,
	// from its /slots (slotlist.go); 0 and 0 when it was not read.
	Slots, SlotsBusy int

	// Own is what the gateway itself had on the engine (in flight and
	// queued) when the read began: the engine's count beyond it is other
	// front doors' (Load).
	Own int

	// Skipped is how many lines of the engine's /metrics page the read
	// could not parse and skipped (the rest of the page counted).
	Skipped int

	kind string // whose names the page carried: kindLlama, kindVLLM, kindSGLang; "" for none
}

// Series is one gauge or counter read from the engine's /metrics, to be
// re-exposed under the gateway's own (llm_gateway_engine_*).
type Series struct {
	Name    string // the engine's own name, e.g. vllm:num_requests_waiting
	Counter bool
	Labels  [][2]string // name, value; sorted by name
	Value   float64
}

// signalState is the engine's last read; Engine.sig.
type signalState struct {
	mu     sync.Mutex
	last   Signal
	ok     bool // last holds a read
	series []Series

	slotsAfter time.Time // /slots is not asked again before (it was refused)
}

// Reasons are the scheduler's last decisions about an engine.
type Reasons struct {
	// Started is why it last started: "request", "admin start",
	// "preload", with how long it waited for room and what was stopped
	// for it.
	Started   string    `json:"started,omitempty"`
	StartedAt time.Time `json:"started_at,omitzero"`
	// Stopped is why it last stopped: "room for qwen (needs 12GiB of the
	// memory_budget)", "idle_timeout 10m", "admin stop", "config reload",
	// "crashed".
	Stopped   string    `json:"stopped,omitempty"`
	StoppedAt time.Time `json:"stopped_at,omitzero"`
}

// Lease is a request's hold on a ready engine: while any lease is held the
// engine is never stopped for idleness or swapped out of its group. It also
// holds the request's place of the engine's max_concurrent, if it has one.
type Lease struct {
	e        *Engine
	base     *url.URL
	place    *place // of the engine's limiter, or nil
	borrowed bool   // Borrow's: a place only, no lease
	slot     int    // the engine slot its session took (slots.go), -1 for none
	once     sync.Once
}

// Base is the URL to send the leased request to.
func (l *Lease) Base() *url.URL { return l.base }
