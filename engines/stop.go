package engines

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Stopping an engine's process. Without a stop command: SIGTERM to its
// process group, SIGKILL after stop_timeout. With one (stop_cmd, llama-swap's
// cmdStop), the command goes first: `docker stop qwen` for an
// engine run with `docker run`, whose CLI would not pass a signal on to the
// container. The signals still follow when the command fails at once (SIGTERM
// then), or when the engine outlives stop_timeout (SIGTERM, and SIGKILL
// after another stop_timeout): whatever the command does, the engine ends.

// stopProcess ends proc and returns once it has exited, its output is read,
// and its stop command (if any) has ended too. port is the port the engine
// was started with, for {engine.port}.
func (e *Engine) stopProcess(proc *process, port int) {
	defer proc.output.Wait()
	if proc.exited() {
		return
	}
	grace := time.Duration(e.cfg.StopTimeout)
	if len(e.cfg.StopCmd) > 0 && e.runStopCmd(proc, port, grace) {
		return
	}
	pgid := proc.pid()
	// the timer is armed before SIGTERM, in order: a clock that moves once
	// the engine saw the signal (a test's) sees it, however late this
	// goroutine runs after sending it
	t := e.clock.NewTimer(grace)
	defer t.Stop()
	terminateGroup(pgid)
	select {
	case <-proc.done:
	case <-t.C():
		e.log.Warn("engine still running stop_timeout after SIGTERM: killing it",
			zap.Int("pid", pgid), zap.Duration("stop_timeout", grace))
		killGroup(pgid)
		<-proc.done
	}
}

// runStopCmd runs the engine's stop command and waits, at most grace from
// its start, for proc to exit. It reports whether proc has exited; false
// means the signals must follow: the command could not start, failed, or
// grace ran out. The command itself is given the rest of grace to finish
// after the engine is gone (`docker stop` returns a little after the
// container's CLI does), and is killed if it outlives it.
func (e *Engine) runStopCmd(proc *process, port int, grace time.Duration) bool {
	argv := e.stopArgv(proc.pid(), port)
	env := make([]string, len(e.cfg.Env))
	for i, kv := range e.cfg.Env {
		env[i] = strings.ReplaceAll(kv, PortPlaceholder, strconv.Itoa(port))
	}
	// the arguments may hold secrets, as cmd's may: log the program only
	e.log.Info("stopping engine with stop_cmd", zap.String("program", argv[0]), zap.Int("pid", proc.pid()))
	t := e.clock.NewTimer(grace)
	defer t.Stop()
	sc, err := spawn(argv, e.cfg.Dir, env, &e.lines, e.log.With(zap.String("source", "stop_cmd")))
	if err != nil {
		e.log.Error("stop_cmd could not start: sending SIGTERM", zap.Error(err))
		return false
	}
	expired := false
	defer func() { e.endStopCmd(sc, t, expired) }()
	cmdDone := sc.done
	for {
		select {
		case <-proc.done:
			return true
		case <-cmdDone:
			cmdDone = nil
			if sc.err != nil {
				e.log.Error("stop_cmd failed: sending SIGTERM", zap.String("reason", sc.exitReason()),
					zap.Strings("last_lines", e.lines.last(5)))
				return false
			}
		case <-t.C():
			expired = true
			e.log.Warn("engine still running stop_timeout after stop_cmd: sending SIGTERM",
				zap.Int("pid", proc.pid()), zap.Duration("stop_timeout", grace))
			return false
		}
	}
}

// endStopCmd waits for the stop command until t fires (at once if it has
// fired), then kills what is left of it, and reads the rest of its output.
func (e *Engine) endStopCmd(sc *process, t clock.Timer, expired bool) {
	if !expired {
		select {
		case <-sc.done:
		case <-t.C():
		}
	}
	if !sc.exited() {
		e.log.Warn("stop_cmd still running at stop_timeout: killing it", zap.Int("pid", sc.pid()))
		killGroup(sc.pid())
		<-sc.done
	}
	sc.output.Wait()
}

// stopArgv is the stop command with {engine.pid} and {engine.port} filled in.
func (e *Engine) stopArgv(pid, port int) []string {
	r := strings.NewReplacer(PIDPlaceholder, strconv.Itoa(pid), PortPlaceholder, strconv.Itoa(port))
	argv := make([]string, len(e.cfg.StopCmd))
	for i, a := range e.cfg.StopCmd {
		argv[i] = r.Replace(a)
	}
	return argv
}

// drainBound is how long a drain waits for leases when the engine sets no
// request_timeout to bound its requests by.
const drainBound = 10 * time.Minute

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
