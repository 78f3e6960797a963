package engines

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
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

// Probe timing: a request is served within one probe interval of the engine
// turning ready.
const (
	firstProbeInterval = 5 * time.Millisecond
	maxProbeInterval   = 20 * time.Millisecond
	probeTimeout       = 2 * time.Second
)

// Crash-loop back-off: a start that follows failed starts or quick crashes
// waits a little longer each time, so a broken engine is not respawned in a
// tight loop by a stream of requests.
const (
	firstRestartDelay = 250 * time.Millisecond
	maxRestartDelay   = 30 * time.Second
	stableUptime      = time.Minute // a crash after this long resets the back-off
)

// drainBound is how long a drain waits for leases when the engine sets no
// request_timeout to bound its requests by.
const drainBound = 10 * time.Minute

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

	// the engine's own load, read in the background (signals.go)
	sig signalState
}

// New makes an engine of a valid config (the handler's Config.Validate
// checks every engine, once). It starts nothing: Provision (and so `caddy
// validate`) may call it freely. rt carries readiness probes; log receives
// the engine's output.
func New(cfg Config, rt http.RoundTripper, log *zap.Logger) (*Engine, error) {
	cfg = cfg.WithDefaults()
	e := &Engine{cfg: cfg, rt: rt, log: log, clock: clock.Real, changed: make(chan struct{})}
	e.lines.secrets = secretsOf(cfg)
	e.brk = NewBreaker(cfg.BreakerFailures, time.Duration(cfg.BreakerCooldown), e.now)
	e.life, e.cancel = context.WithCancel(context.Background())
	if cfg.MaxConcurrent > 0 {
		e.lim = newLimiter(cfg.MaxConcurrent, cfg.Queue, time.Duration(cfg.QueueTimeout), e.clock, e.life.Done())
	}
	if !cfg.Managed() {
		u, err := url.Parse(cfg.To)
		if err != nil {
			return nil, err
		}
		e.base, e.state = u, Ready
	}
	if cfg.Slots != nil {
		e.slots = newSlotTable(cfg)
	}
	if cfg.Managed() && cfg.Group != "" {
		e.boxes = append(e.boxes, joinBox("group:"+cfg.Group, true, e))
	}
	if cfg.Managed() && cfg.Memory > 0 {
		e.boxes = append(e.boxes, joinBox(memoryBoxOf(cfg.Devices), false, e))
	}
	return e, nil
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

// TryAcquire returns a lease at once if the engine is ready and has a free
// place (max_concurrent), nil otherwise. It never waits and never starts
// anything: the fast path of a request.
func (e *Engine) TryAcquire() *Lease {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != Ready || e.closed {
		return nil
	}
	var p *place
	if e.lim != nil {
		if p = e.lim.tryTake(); p == nil {
			return nil
		}
	}
	l := e.leaseLocked()
	l.place = p
	return l
}

// leaseLocked hands out a lease on a ready engine. Call with mu held.
func (e *Engine) leaseLocked() *Lease {
	if e.leases == 0 {
		e.freshUse = true // a new use: its requests' priorities make the engine's
	}
	e.leases++
	if e.idleTimer != nil {
		e.idleGen++ // a pending idle stop is now stale
		e.idleTimer.Stop()
	}
	return &Lease{e: e, base: e.base, slot: -1}
}

// Peek returns where the engine answers if it is ready (and not down),
// without a lease: for serving as another engine's fallback, which the
// gateway never starts, leases or drains.
func (e *Engine) Peek() *url.URL {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.state != Ready || e.closed || e.down.Load() {
		return nil
	}
	return e.base
}

// Borrow is Peek for a request that the engine serves as a fallback: where
// it answers, and one of its max_concurrent places, held until Release (a
// fallback's limit holds for the requests that fall back to it too). It is
// no lease: the engine is never kept up or drained for it. It returns nil
// when the engine is not ready (or down), and a *BusyError at once when
// every place is taken: a fallback is no place to queue.
func (e *Engine) Borrow() (*Lease, error) {
	e.mu.Lock()
	if e.state != Ready || e.closed || e.down.Load() {
		e.mu.Unlock()
		return nil, nil
	}
	l := &Lease{e: e, base: e.base, borrowed: true, slot: -1}
	if e.lim != nil {
		l.place = e.lim.tryTake()
	}
	e.mu.Unlock()
	if e.lim != nil && l.place == nil {
		e.busy(BusyQueueFull)
		return nil, e.busyError(0)
	}
	return l, nil
}

// Busy reports whether every place of the engine's max_concurrent is taken
// (never, without a limit): a request sent to it now would queue.
func (e *Engine) Busy() bool { return e.lim != nil && e.lim.full() }

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

// Release gives the lease back; calling it again does nothing.
func (l *Lease) Release() {
	l.once.Do(func() {
		if !l.borrowed {
			l.e.release()
		}
		if l.slot >= 0 {
			l.e.slots.done(l.slot)
		}
		if l.place != nil {
			l.e.lim.give(l.place)
		}
	})
}

// broadcast wakes everyone waiting for a change. Call with mu held.
func (e *Engine) broadcast() {
	close(e.changed)
	e.changed = make(chan struct{})
	for _, b := range e.boxes {
		b.sig.poke()
	}
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

// wait releases mu until the next change or ctx's end, and takes it again.
func (e *Engine) wait(ctx context.Context) error {
	ch := e.changed
	e.mu.Unlock()
	defer e.mu.Lock()
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Acquire returns a lease on the engine once it is ready. A stopped engine is
// started when wake allows it; concurrent callers share one start. A caller
// whose ctx ends stops waiting without affecting the start. If the start it
// waited for fails, Acquire returns that start's *StartError; the next call
// tries a fresh start.
//
// With max_concurrent, the caller first takes a place: it may wait in the
// engine's queue (leaving it at once when ctx ends), and gets a *BusyError
// when the queue is full or its wait runs out.
func (e *Engine) Acquire(ctx context.Context, wake bool) (*Lease, error) {
	if e.lim == nil {
		return e.acquire(ctx, wake)
	}
	p, err := e.takePlace(ctx)
	if err != nil {
		return nil, err
	}
	l, err := e.acquire(ctx, wake)
	if err != nil {
		e.lim.give(p)
		return nil, err
	}
	l.place = p
	return l, nil
}

// takePlace takes a place of the engine's limit, and says so to the
// observer.
func (e *Engine) takePlace(ctx context.Context) (*place, error) {
	p, waited, queued, why, err := e.lim.take(ctx)
	if queued {
		outcome := QueueServed
		switch {
		case why == BusyQueueTimeout:
			outcome = QueueTimedOut
		case p == nil:
			outcome = QueueLeft
		}
		if qo, ok := e.obs.(QueueObserver); ok {
			qo.EngineQueueWait(e.cfg.Name, waited, outcome)
		}
	}
	if why != "" {
		e.busy(why)
		return nil, e.busyError(waited)
	}
	return p, err
}

// busy tells the observer of a refusal.
func (e *Engine) busy(why BusyReason) {
	if qo, ok := e.obs.(QueueObserver); ok {
		qo.EngineBusy(e.cfg.Name, why)
	}
}

func (e *Engine) busyError(waited time.Duration) *BusyError {
	return &BusyError{Engine: e.cfg.Name, MaxConcurrent: e.cfg.MaxConcurrent, Queue: e.cfg.Queue,
		Waited: waited, RetryAfter: e.lim.retryAfter()}
}

// acquire is Acquire without the limit.
func (e *Engine) acquire(ctx context.Context, wake bool) (*Lease, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var waitedFor uint64
	for {
		if e.closed {
			return nil, ErrClosed
		}
		switch e.state {
		case Ready:
			l := e.leaseLocked()
			prio, _ := PriorityOf(ctx)
			e.notePrio(prio)
			return l, nil
		case Stopped:
			if waitedFor != 0 && waitedFor == e.startSeq && e.lastErr != nil {
				return nil, e.lastErr
			}
			if !wake {
				return nil, ErrNotRunning
			}
			e.noteStarter(ctx)
			e.beginStart(startWhy(ctx))
			waitedFor = e.startSeq
		case Sleeping:
			if !wake {
				return nil, ErrNotRunning
			}
			e.waking = true
			e.noteStarter(ctx)
			e.beginStart("wake: " + startWhy(ctx))
			waitedFor = e.startSeq
		case Starting:
			if waitedFor == 0 {
				waitedFor = e.startSeq
			}
		}
		prio, _ := PriorityOf(ctx)
		e.waiting++
		if e.waitPrios == nil {
			e.waitPrios = map[int]int{}
		}
		e.waitPrios[prio]++
		if e.state == Starting {
			e.pokeBoxes()
		}
		err := e.wait(ctx)
		e.waiting--
		if e.waitPrios[prio]--; e.waitPrios[prio] == 0 {
			delete(e.waitPrios, prio)
		}
		if err != nil {
			return nil, err
		}
	}
}

func (e *Engine) release() {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leases--
	if e.leases > 0 {
		return
	}
	e.lastUsed = e.now()
	if e.state == Draining {
		e.broadcast() // the drain is waiting for this
		return
	}
	e.pokeBoxes() // idle now: a start waiting for room may stop it
	e.armIdle()
}

// armIdle schedules an idle stop. Call with mu held, no leases, state Ready.
func (e *Engine) armIdle() {
	d := time.Duration(e.cfg.IdleTimeout)
	fire := e.idleFired
	if s := time.Duration(e.cfg.SleepAfter); s > 0 && e.cfg.Sleeps() {
		d, fire = s, e.idleSleepFired // it sleeps first; idle_timeout stops it asleep
	}
	if !e.cfg.Managed() || d <= 0 || e.state != Ready {
		return
	}
	e.idleGen++
	gen := e.idleGen
	if e.idleTimer != nil {
		e.idleTimer.Stop()
	}
	e.idleTimer = e.clock.AfterFunc(d, func() { fire(gen) })
}

func (e *Engine) idleFired(gen uint64) {
	e.mu.Lock()
	// a lease taken since the timer was armed made it stale; checking under
	// mu means an arriving request either got its lease first (and keeps the
	// engine) or finds it draining and waits for the stop, then restarts it
	if gen != e.idleGen || e.leases > 0 || (e.state != Ready && e.state != Sleeping) || e.closed {
		e.mu.Unlock()
		return
	}
	asleep := e.state == Sleeping // sleep_after, then idle_timeout (sleep.go)
	e.state = Draining
	e.broadcast()
	e.mu.Unlock()
	e.log.Info("stopping idle engine", zap.Duration("idle_timeout", time.Duration(e.cfg.IdleTimeout)), zap.Bool("asleep", asleep))
	e.finishStop(false, StopIdle)
}

// beginStart moves a stopped engine to starting, for why. Call with mu
// held.
func (e *Engine) beginStart(why string) {
	e.noteStart(why)
	e.state = Starting
	e.startSeq++
	e.startAt, e.startPID = e.now(), 0
	e.lastErr = nil
	seq := e.startSeq
	delay := time.Duration(0)
	if e.failures > 0 {
		delay = firstRestartDelay << (e.failures - 1)
		if delay > maxRestartDelay || delay <= 0 {
			delay = maxRestartDelay
		}
	}
	e.broadcast()
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.run(seq, delay)
	}()
}

// run is one start: take the group, evict its other engines, spawn, probe.
func (e *Engine) run(seq uint64, delay time.Duration) {
	// a restart after failures waits before it takes the group's turn, so a
	// broken engine neither evicts a healthy peer nor holds the turn idle
	if delay > 0 {
		e.log.Info("delaying restart after failures", zap.Duration("delay", delay), zap.Int("failures", e.failures))
		t := e.clock.NewTimer(delay)
		select {
		case <-t.C():
		case <-e.life.Done():
			t.Stop()
			e.startFailed(seq, nil, "the engine was shut down while starting")
			return
		}
	}
	for _, b := range e.boxes {
		// its share of the GPU (a group's turn, its memory) is held until it
		// stops: the scheduler (box.go) makes room or keeps it waiting
		if err := b.claim(e.life, e); err != nil {
			var busy *BusyError
			if errors.As(err, &busy) {
				b.swaps.refuse()
				e.refused(seq, busy)
				return
			}
			e.startFailed(seq, nil, "the engine was shut down while waiting for its turn ("+b.name+")")
			return
		}
	}
	budget := time.Duration(e.cfg.StartTimeout)
	e.mu.Lock()
	waking := e.waking
	e.waking = false
	e.mu.Unlock()
	if waking {
		// a failed wake restarts the engine within what is left of the
		// start's budget
		began := e.now()
		if e.wake(began.Add(budget)) {
			return
		}
		budget = max(budget-e.now().Sub(began), 0)
	}

	port, err := freePort()
	if err != nil {
		e.startFailed(seq, nil, "picking a port: "+err.Error())
		return
	}
	ps := strconv.Itoa(port)
	argv := make([]string, len(e.cfg.Cmd))
	for i, a := range e.cfg.Cmd {
		argv[i] = strings.ReplaceAll(a, PortPlaceholder, ps)
	}
	env := make([]string, len(e.cfg.Env))
	for i, kv := range e.cfg.Env {
		env[i] = strings.ReplaceAll(kv, PortPlaceholder, ps)
	}
	env = withDevices(env, e.cfg.Devices)
	base, err := url.Parse(strings.ReplaceAll(e.cfg.To, PortPlaceholder, ps))
	if err != nil {
		e.startFailed(seq, nil, "bad 'to': "+err.Error())
		return
	}

	began := e.now()
	// the arguments may hold secrets (llama-server --api-key): log the program only
	e.log.Info("starting engine", zap.String("program", argv[0]), zap.Int("port", port))
	e.lines.newRun() // the page draws a line between runs
	proc, err := spawn(argv, e.cfg.Dir, env, &e.lines, e.log)
	if err != nil {
		e.startFailed(seq, nil, err.Error())
		return
	}
	e.mu.Lock()
	e.startPID = proc.pid()
	e.broadcast()
	e.mu.Unlock()
	if reason := e.awaitReadyWithin(proc, base, budget); reason != "" {
		e.stopProcess(proc, port)
		e.startFailed(seq, proc, reason)
		return
	}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.stopProcess(proc, port)
		return
	}
	e.state, e.proc, e.base, e.port = Ready, proc, base, port
	e.readyAt = e.now()
	e.startTook = e.readyAt.Sub(began)
	e.broadcast()
	if e.leases == 0 {
		e.armIdle()
	}
	e.mu.Unlock()
	took := e.now().Sub(began)
	e.log.Info("engine ready", zap.Int("pid", proc.pid()), zap.Duration("start_duration", took))
	if e.obs != nil {
		e.obs.EngineStarted(e.cfg.Name, proc.pid(), took)
	}

	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.watch(proc)
	}()
}

// awaitReady probes base+Ready with a short back-off until a 2xx, the process
// exits, the start times out, or the engine is torn down. It returns why the
// engine is not ready, or "" when it is.
func (e *Engine) awaitReady(proc *process, base *url.URL) string {
	return e.awaitReadyWithin(proc, base, time.Duration(e.cfg.StartTimeout))
}

// awaitReadyWithin is awaitReady within timeout.
func (e *Engine) awaitReadyWithin(proc *process, base *url.URL, timeout time.Duration) string {
	if !e.cfg.ProbesReady() {
		return "" // ready none: a running process is all there is to know
	}
	deadline := e.clock.NewTimer(timeout)
	defer deadline.Stop()
	probeURL := base.JoinPath(e.cfg.Ready)
	probeURL.RawQuery = ""
	interval := firstProbeInterval
	tick := e.clock.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-proc.done:
			return "the process " + proc.exitReason() + " before it was ready"
		case <-deadline.C():
			return fmt.Sprintf("not ready within start_timeout %s", timeout)
		case <-e.life.Done():
			return "the engine was shut down while starting"
		case <-tick.C():
		}
		if e.probe(e.life, probeURL.String()) {
			return ""
		}
		tick.Reset(interval)
		if interval *= 2; interval > maxProbeInterval {
			interval = maxProbeInterval
		}
	}
}

// probe reports whether GET url answers 2xx within probeTimeout.
func (e *Engine) probe(ctx context.Context, u string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return e.get(ctx, u)
}

// get reports whether GET url answers 2xx.
func (e *Engine) get(ctx context.Context, u string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	e.cfg.SetKey(req.Header) // a cloud engine's readiness path may want its key
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// Probe asks the engine's readiness path now, whatever its state. For a
// managed engine that is not running it reports false without starting it.
func (e *Engine) Probe(ctx context.Context) bool {
	e.mu.Lock()
	base, state := e.base, e.state
	e.mu.Unlock()
	if base == nil || (e.cfg.Managed() && state != Ready) {
		return false
	}
	if !e.cfg.ProbesReady() {
		return true
	}
	u := base.JoinPath(e.cfg.Ready)
	u.RawQuery = ""
	return e.probe(ctx, u.String())
}

func (e *Engine) startFailed(seq uint64, proc *process, reason string) {
	var last []string
	if proc != nil {
		last = e.lines.last(5)
	}
	err := &StartError{Engine: e.cfg.Name, Reason: reason, LastLines: last}
	e.log.Error("engine failed to start", zap.String("reason", reason), zap.Strings("last_lines", last))
	if e.obs != nil {
		e.obs.EngineStartFailed(e.cfg.Name, reason)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq == e.startSeq {
		e.state, e.lastErr = Stopped, err
		e.failures++
		e.broadcast()
	}
}

// refused ends a start the scheduler refused: it found no room within
// max_wait. Its waiters get busy. It is no failure of the engine's, so the
// restart back-off does not grow.
func (e *Engine) refused(seq uint64, busy *BusyError) {
	e.log.Info("start refused: no room", zap.String("box", busy.Box), zap.Strings("waiting_for", busy.WaitingFor),
		zap.Duration("waited", busy.Waited), zap.Duration("retry_after", busy.RetryAfter))
	e.mu.Lock()
	defer e.mu.Unlock()
	if seq == e.startSeq {
		e.state, e.lastErr = Stopped, busy
		e.broadcast()
	}
}

// watch notices a ready engine's process ending on its own.
func (e *Engine) watch(proc *process) {
	<-proc.done
	e.mu.Lock()
	if e.proc != proc || (e.state != Ready && e.state != Sleeping) {
		e.mu.Unlock()
		return // a stop we asked for (or a wake, which notices it)
	}
	e.state, e.proc, e.base = Stopped, nil, nil
	e.noteStop("crashed: the process " + proc.exitReason())
	if e.now().Sub(e.readyAt) < stableUptime {
		e.failures++
	} else {
		e.failures = 0
	}
	e.broadcast()
	e.mu.Unlock()
	e.log.Error("engine exited unexpectedly", zap.String("reason", proc.exitReason()), zap.Strings("last_lines", e.lines.last(5)))
	if e.obs != nil {
		e.obs.EngineStopped(e.cfg.Name, proc.pid(), StopCrash)
	}
}

// Start starts the engine if it is stopped and waits until it is ready,
// whatever the wake policy (the admin API's start). It takes no place of
// max_concurrent: it sends no request.
func (e *Engine) Start(ctx context.Context) error {
	l, err := e.acquire(context.WithValue(ctx, whyKey{}, "admin start"), true)
	if err != nil {
		return err
	}
	l.Release()
	return nil
}

// Preload starts the engine if it is stopped, without waiting for it: the
// config that has it with `preload` has begun to run (never call it from
// Provision: `caddy validate` runs that). It honours the engine's group: a
// peer that is running or starting keeps its turn, and the engine is left
// stopped. A start that fails is logged as any start is, and the next
// request tries a fresh one. A remote engine has nothing to start.
func (e *Engine) Preload() {
	if !e.cfg.Managed() {
		return
	}
	preloadMu.Lock() // two preloads of one box (two handlers, or two sites) never both start
	defer preloadMu.Unlock()
	for _, b := range e.boxes {
		if !b.fitsNow(e) {
			e.log.Info("not preloading: it does not fit beside the engines that run", zap.String("box", b.name))
			return
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.state != Stopped {
		return
	}
	e.log.Info("preloading engine")
	e.beginStart("preload")
}

// Stop stops a running engine. With drain, it first lets the requests that
// hold leases finish (bounded); new requests wait for the stop and then start
// the engine again. A remote engine cannot be stopped.
func (e *Engine) Stop(ctx context.Context, drain bool, reason StopReason) error {
	if !e.cfg.Managed() {
		return fmt.Errorf("engine %s is remote: the gateway does not run it", e.cfg.Name)
	}
	e.mu.Lock()
	for e.state == Starting || e.state == Draining {
		if err := e.wait(ctx); err != nil {
			e.mu.Unlock()
			return err
		}
	}
	if e.state != Ready && e.state != Sleeping {
		e.stopWhy = ""
		e.mu.Unlock()
		return nil
	}
	e.state = Draining
	e.broadcast()
	e.mu.Unlock()
	e.finishStop(drain, reason)
	return nil
}

// finishStop ends a draining engine: waits for its leases when asked (bounded
// by its request budget plus stop_timeout), then stops its process.
func (e *Engine) finishStop(drain bool, reason StopReason) {
	bound := time.Duration(e.cfg.RequestTimeout)
	if bound <= 0 {
		bound = drainBound
	}
	e.finishStopWithin(drain, bound+time.Duration(e.cfg.StopTimeout), reason)
}

// finishStopWithin is finishStop with the drain bounded by within.
func (e *Engine) finishStopWithin(drain bool, within time.Duration, reason StopReason) {
	e.mu.Lock()
	if drain && e.leases > 0 {
		ctx, cancel := context.WithTimeout(e.life, within)
		for e.leases > 0 && e.wait(ctx) == nil {
		}
		cancel()
	}
	proc, port, base := e.proc, e.port, e.base
	e.mu.Unlock()
	if proc != nil && base != nil {
		e.saveSlots(base)
		if e.sleepsFor(reason) && e.trySleep(proc, base) {
			e.mu.Lock()
			if !e.closed {
				e.fallAsleep(e.stopWords(reason))
				e.mu.Unlock()
				return
			}
			e.mu.Unlock() // torn down meanwhile: stop it after all
		}
	}
	if proc != nil {
		e.stopProcess(proc, port)
		e.log.Info("engine stopped", zap.Int("pid", proc.pid()), zap.String("reason", string(reason)))
		if e.obs != nil {
			e.obs.EngineStopped(e.cfg.Name, proc.pid(), reason)
		}
	}
	e.mu.Lock()
	if proc != nil {
		e.noteStop(e.stopWords(reason))
	}
	e.stopWhy = ""
	e.state, e.proc, e.base, e.port = Stopped, nil, nil, 0
	e.failures = 0
	e.broadcast()
	e.mu.Unlock()
}

// Destruct tears the engine down: an engine being started is abandoned, a
// running one is drained briefly and stopped, and every goroutine it owns has
// returned when Destruct does. It implements caddy.Destructor for the usage
// pool that keeps engines across reloads.
func (e *Engine) Destruct() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	if e.idleTimer != nil {
		e.idleTimer.Stop()
	}
	running := (e.state == Ready || e.state == Sleeping) && e.cfg.Managed()
	if running {
		e.state = Draining
	}
	e.broadcast()
	e.mu.Unlock()
	if running {
		// requests in flight get stop_timeout to finish: long enough for
		// most answers, short enough not to hold a reload or Caddy's stop
		e.finishStopWithin(true, time.Duration(e.cfg.StopTimeout), StopReload)
	}
	e.cancel()
	e.wg.Wait()
	for _, b := range e.boxes {
		b.leave(e)
	}
	return nil
}

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
		Devices: DeviceSet(e.cfg.Devices), Why: e.why,
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
		// one state on every surface (issue 28): the admin API, the
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
	if e.lim != nil {
		held, queued := e.lim.counts()
		s.Limit = &LimitStatus{MaxConcurrent: e.cfg.MaxConcurrent, InFlight: held, Queue: e.cfg.Queue, Queued: queued}
	}
	return s
}

// Changed returns a channel that is closed at the engine's next change of
// state (a start, ready, a stop), for watchers such as the status page.
func (e *Engine) Changed() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.changed
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

// State is the engine's state now.
func (e *Engine) State() State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// preloadMu makes a preload's check and start one step.
var preloadMu sync.Mutex

// pokeBoxes tells the engine's boxes that its wants changed. Safe with mu
// held.
func (e *Engine) pokeBoxes() {
	for _, b := range e.boxes {
		b.sig.poke()
	}
}
