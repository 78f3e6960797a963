package engines

import (
	"errors"
	"net"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// Start and run: the transition stopped → starting, the claim on the boxes,
// the process spawned and watched, the crash-loop back-off, preloads.

// Crash-loop back-off: a start that follows failed starts or quick crashes
// waits a little longer each time, so a broken engine is not respawned in a
// tight loop by a stream of requests.
const (
	firstRestartDelay = 250 * time.Millisecond
	maxRestartDelay   = 30 * time.Second
	stableUptime      = time.Minute // a crash after this long resets the back-off
)

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
		// stops: the scheduler (claim.go) makes room or keeps it waiting
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
	e.forgetSpoken() // a new process, maybe a newer build: it may speak more
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
		e.noteRefused(busy)
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

// preloadMu makes a preload's check and start one step.
var preloadMu sync.Mutex

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

// freePort asks the kernel for a free loopback port.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}
