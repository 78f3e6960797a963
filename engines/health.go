package engines

import (
	"context"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Active health checks of a remote engine, modelled on Caddy's
// reverse_proxy active checks (health_uri, health_interval, health_passes,
// health_fails), which run only inside reverse_proxy: one cheap GET of the
// health path every interval, never a completion. An engine the gateway
// starts is not checked: its process and readiness probe say whether it is
// up.
//
// Health is a flag beside the state machine, not a state of it: a remote
// engine stays Ready (the gateway does not own it), and a down one is
// skipped by plans and pools before any request pays for it.

// HealthObserver hears about health changes; an Observer may implement it.
type HealthObserver interface {
	EngineHealth(name string, down bool)
}

// StartHealthChecks starts the engine's health checks when its config asks
// for them; the first check runs at once, as Caddy's do. The checks end
// when the engine is destructed. A remote engine without health checks
// (not a cloud provider's) is looked at once, at once: its readiness path,
// so that every surface says ready or down from the start, not unknown
// until someone looks (the status page, which looks, said down while the
// admin API said unknown). Call it once, after SetClock.
func (e *Engine) StartHealthChecks() {
	if e.cfg.Managed() || (!e.cfg.Checked() && e.cfg.IsProvider()) {
		return
	}
	e.wg.Add(1)
	if !e.cfg.Checked() {
		go func() {
			defer e.wg.Done()
			e.firstLook()
		}()
		return
	}
	go func() {
		defer e.wg.Done()
		e.every(time.Duration(e.cfg.HealthInterval), func() { e.recordCheck(e.checkHealth()) })
	}()
}

// every runs do at once and then every interval until the engine is
// destructed. The next run is armed only once this one has returned, so a
// slow run never overlaps the next.
func (e *Engine) every(interval time.Duration, do func()) {
	var t clock.Timer
	for {
		do()
		if t == nil {
			t = e.clock.NewTimer(interval)
			defer t.Stop()
		} else {
			t.Reset(interval)
		}
		select {
		case <-e.life.Done():
			return
		case <-t.C():
		}
	}
}

// checkHealth reports whether GET of the health path (or a provider's own
// check) answers 2xx within health_timeout, through the engine's own
// transport and with its credentials.
func (e *Engine) checkHealth() bool {
	ctx, cancel := context.WithTimeout(e.life, time.Duration(e.cfg.HealthTimeout))
	defer cancel()
	return e.get(ctx, e.checkURL().String())
}

// recordCheck counts a check's result and moves the engine down after
// health_fails failures in a row, and up after health_passes passes.
func (e *Engine) recordCheck(pass bool) {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return
	}
	changed := false
	if pass {
		e.healthFails = 0
		e.healthPasses++
		if e.down.Load() && e.healthPasses >= e.cfg.HealthPasses {
			e.down.Store(false)
			changed = true
		}
	} else {
		e.healthPasses = 0
		e.healthFails++
		if !e.down.Load() && e.healthFails >= e.cfg.HealthFails {
			e.down.Store(true)
			changed = true
		}
	}
	down := e.down.Load()
	if changed {
		e.broadcast()
	}
	e.mu.Unlock()
	if !changed {
		return
	}
	if down {
		e.log.Warn("engine is down: it failed its health checks",
			zap.String("health_path", e.cfg.HealthPath), zap.Int("health_fails", e.cfg.HealthFails))
	} else {
		e.log.Info("engine is up: it passed its health checks", zap.Int("health_passes", e.cfg.HealthPasses))
	}
	if ho, ok := e.obs.(HealthObserver); ok {
		ho.EngineHealth(e.cfg.Name, down)
	}
}

// Healthy reports whether requests may go to the engine: false only for a
// remote engine that failed its health checks. It takes no lock: plans and
// pools ask it on every request.
func (e *Engine) Healthy() bool { return !e.down.Load() }

// What the last look at a remote engine without health checks saw: a
// request's answer, the status page's probe, a model listing (Heard).
const (
	heardNothing  int32 = iota // never looked at, or nobody looked yet
	heardAnswer                // it answered
	heardNoAnswer              // it did not answer (or not with a 2xx)
)

// Heard records what a look at a remote engine saw: whether it answered
// (a request's answer, a readiness probe, its model list with a 2xx). An
// engine with health checks is judged by them alone.
func (e *Engine) Heard(answered bool) {
	if e.cfg.Managed() || e.cfg.Checked() || e.cfg.IsProvider() {
		return
	}
	v := heardNoAnswer
	if answered {
		v = heardAnswer
	}
	if e.heard.Swap(v) != v {
		e.mu.Lock()
		e.broadcast()
		e.mu.Unlock()
	}
}

// firstLook probes a remote engine without health checks once and records
// what it saw, unless someone heard from the engine meanwhile (a newer
// look) or the engine was destructed.
func (e *Engine) firstLook() {
	answered := e.Probe(e.life)
	if e.life.Err() != nil {
		return
	}
	v := heardNoAnswer
	if answered {
		v = heardAnswer
	}
	if e.heard.CompareAndSwap(heardNothing, v) {
		e.mu.Lock()
		e.broadcast()
		e.mu.Unlock()
	}
}

// remoteState is the state a remote engine reports, the same on every
// surface: down when its health checks failed, when its host's breaker
// keeps requests away, or (without health checks) when the last look at it
// found no answer; unknown until the first look at it (at load) ends;
// else ready. A provider's engine's comes from its answers (answers.go).
// It takes no lock of the engine's.
func (e *Engine) remoteState() string {
	switch {
	case e.down.Load(), e.brk.State() != BreakerClosed:
		return "down"
	case e.cfg.Checked():
		return "ready"
	case e.cfg.IsProvider():
		return e.answersState()
	}
	switch e.heard.Load() {
	case heardAnswer:
		return "ready"
	case heardNoAnswer:
		return "down"
	}
	return "unknown"
}
