package engines

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
)

// Warm swaps: an engine with `swap sleep` is put to sleep where
// another would be stopped, and woken where another would be started.
// vLLM with --enable-sleep-mode frees the GPU on POST /sleep?level=1 and
// keeps its weights in host memory; POST /wake_up brings it back in a
// fraction of a second, against tens of seconds for a cold load.
//
//	ready ──room/group/sleep_after──▶ draining ──sleep ok──▶ sleeping
//	                                      │ sleep fails (one INFO line)
//	                                      ▼
//	                                   stopped (the process is ended)
//
//	sleeping ──Acquire──▶ starting (its share of the box claimed as a start's,
//	                      then wake_up) ──wake ok──▶ ready
//	                                       │ wake fails (one INFO line)
//	                                       ▼
//	                      the process is ended and a fresh one spawned, within
//	                      what is left of start_timeout
//
//	sleeping ──idle_timeout, admin stop, reload, crash──▶ stopped
//
// A sleeping engine holds no share of its box (its GPU memory is free for
// others: the scheduler counts it as stopped), but its process and its host
// memory stay: the admin API and the status page show it asleep, with its
// pid and memory. Only the scheduler's stops (room, group) and sleep_after
// sleep; idle_timeout, an admin stop, a reload and Caddy's stop end the
// process as they do for any engine.

// StopSleepAfter is the stop of an idle engine's sleep_after: a sleep.
const StopSleepAfter StopReason = "sleep_after"

// SleepOutcome is how a sleep or a wake ended, for the metrics.
type SleepOutcome string

// The outcomes.
const (
	SleepOK     SleepOutcome = "ok"
	SleepFailed SleepOutcome = "failed" // fell back to a stop, or to a fresh start
)

// SleepObserver hears about sleeps and wakes; an Observer may implement
// it. Its methods run on the engine's goroutines.
type SleepObserver interface {
	EngineSlept(name string, took time.Duration, outcome SleepOutcome)
	EngineWoke(name string, took time.Duration, outcome SleepOutcome)
}

// sleepsFor reports whether a stop for reason is a sleep.
func (e *Engine) sleepsFor(reason StopReason) bool {
	if !e.cfg.Sleeps() {
		return false
	}
	switch reason {
	case StopRoom, StopGroup, StopSleepAfter:
		return true
	}
	return false
}

// trySleep asks the draining engine's process to sleep. It reports whether
// it sleeps; when it does not, the caller stops it (the INFO line is
// written here).
func (e *Engine) trySleep(proc *process, base *url.URL) bool {
	began := e.now()
	ctx, cancel := context.WithTimeout(e.life, time.Duration(e.cfg.StopTimeout))
	defer cancel()
	err := e.post(ctx, base, e.cfg.Sleep.SleepPath)
	if err == nil {
		err = e.checkSleeping(ctx, base, true)
	}
	if err == nil && proc.exited() {
		err = fmt.Errorf("the process %s", proc.exitReason())
	}
	took := e.now().Sub(began)
	if err != nil {
		e.log.Info("engine did not sleep: stopping it instead", zap.Error(err))
		e.sleepObserved(false, took, SleepFailed)
		return false
	}
	e.log.Info("engine asleep", zap.Int("pid", proc.pid()), zap.Duration("took", took))
	e.sleepObserved(false, took, SleepOK)
	return true
}

// sleepObserved tells the observer of a sleep (woke false) or a wake.
func (e *Engine) sleepObserved(woke bool, took time.Duration, o SleepOutcome) {
	so, ok := e.obs.(SleepObserver)
	if !ok {
		return
	}
	if woke {
		so.EngineWoke(e.cfg.Name, took, o)
	} else {
		so.EngineSlept(e.cfg.Name, took, o)
	}
}

// fallAsleep moves the draining engine to sleeping. Call with mu held.
func (e *Engine) fallAsleep(why string) {
	e.noteStop(why)
	e.why.Stopped = "asleep: " + e.why.Stopped
	e.state, e.stopWhy = Sleeping, ""
	e.failures = 0
	e.armAsleep()
	e.broadcast()
}

// armAsleep schedules the stop of a sleeping engine at idle_timeout after
// its last use. Call with mu held, state Sleeping.
func (e *Engine) armAsleep() {
	d := time.Duration(e.cfg.IdleTimeout)
	if d <= 0 {
		return
	}
	left := d
	if !e.lastUsed.IsZero() {
		left = max(e.lastUsed.Add(d).Sub(e.now()), 0)
	}
	e.idleGen++
	gen := e.idleGen
	if e.idleTimer != nil {
		e.idleTimer.Stop()
	}
	e.idleTimer = e.clock.AfterFunc(left, func() { e.idleFired(gen) })
}

// idleSleepFired puts an idle engine to sleep once sleep_after passed.
func (e *Engine) idleSleepFired(gen uint64) {
	e.mu.Lock()
	if gen != e.idleGen || e.leases > 0 || e.state != Ready || e.closed {
		e.mu.Unlock()
		return
	}
	e.state = Draining
	e.stopWhy = "sleep_after " + time.Duration(e.cfg.SleepAfter).String()
	e.broadcast()
	e.mu.Unlock()
	e.finishStop(false, StopSleepAfter)
}

// wake brings the sleeping process back, once its share of
// the box is granted. It reports whether the engine is ready; when it is
// not, the caller spawns a fresh process (the INFO line is written here)
// within what is left of the start's budget, by.
func (e *Engine) wake(by time.Time) bool {
	e.mu.Lock()
	proc, base, port := e.proc, e.base, e.port
	e.mu.Unlock()
	if proc == nil || base == nil {
		return false
	}
	began := e.now()
	ctx, cancel := context.WithTimeout(e.life, max(by.Sub(began), 0))
	err := e.post(ctx, base, e.cfg.Sleep.WakePath)
	if err == nil {
		err = e.checkSleeping(ctx, base, false)
	}
	cancel()
	if err == nil {
		if reason := e.awaitReadyWithin(proc, base, max(by.Sub(e.now()), 0)); reason != "" {
			err = fmt.Errorf("%s", reason)
		}
	}
	took := e.now().Sub(began)
	if err != nil {
		e.log.Info("engine did not wake: restarting it", zap.Error(err), zap.Duration("waited", took))
		e.sleepObserved(true, took, SleepFailed)
		e.stopProcess(proc, port)
		e.mu.Lock()
		if e.proc == proc {
			e.proc, e.base, e.port = nil, nil, 0
		}
		e.mu.Unlock()
		return false
	}
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		e.stopProcess(proc, port)
		return true // torn down meanwhile: nothing to start
	}
	e.state = Ready
	e.readyAt = e.now()
	e.wakeTook = e.readyAt.Sub(began)
	e.broadcast()
	if e.leases == 0 {
		e.armIdle()
	}
	e.mu.Unlock()
	e.log.Info("engine awake", zap.Int("pid", proc.pid()), zap.Duration("took", took))
	e.sleepObserved(true, took, SleepOK) // a wake, not a start: the metrics count it apart
	return true
}

// post POSTs an empty body to base+path (path may carry a query) and
// wants a 2xx.
func (e *Engine) post(ctx context.Context, base *url.URL, path string) error {
	resp, err := e.ask(ctx, http.MethodPost, base, path, nil)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return nil
}

// checkSleeping asks the sleeping path whether the engine sleeps, and
// wants want.
func (e *Engine) checkSleeping(ctx context.Context, base *url.URL, want bool) error {
	path := e.cfg.Sleep.SleepingPath
	if path == ReadyNone {
		return nil
	}
	resp, err := e.ask(ctx, http.MethodGet, base, path, nil)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var v struct {
		IsSleeping *bool `json:"is_sleeping"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<10)).Decode(&v); err != nil || v.IsSleeping == nil {
		return fmt.Errorf("GET %s: no is_sleeping in its answer", path)
	}
	if *v.IsSleeping != want {
		return fmt.Errorf("GET %s: is_sleeping is %t", path, *v.IsSleeping)
	}
	return nil
}

// ask sends method to base+path (path may carry a query) with the
// engine's key and a JSON body when there is one, and returns a 2xx
// answer, whose body the caller closes; any other status is an error.
func (e *Engine) ask(ctx context.Context, method string, base *url.URL, path string, body []byte) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, joinPathQuery(base, path), rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	e.cfg.SetKey(req.Header)
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %v", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, fmt.Errorf("%s %s answered %d", method, path, resp.StatusCode)
	}
	return resp, nil
}

// joinPathQuery is base with path (which may carry a query) appended.
func joinPathQuery(base *url.URL, path string) string {
	p, q, _ := strings.Cut(path, "?")
	u := base.JoinPath(p)
	u.RawQuery = q
	return u.String()
}
