// Package idle keeps the stream-idle budget of an answer: the gap between
// two reads may not exceed it.
package idle

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Watchdog is the stream-idle budget: the gap between two reads of an
// answer may not exceed it. It is kept lazily: a read only stores the time.
// The watchdogs of one clock share one timer (schedule.go): when a
// watchdog's turn comes, the scheduler looks at its last read and either
// fires it or puts it back for the rest of the gap, so a busy stream costs
// no timer operation per event, and an open stream neither a timer nor a
// goroutine of its own (ten thousand open streams).
//
// It measures the engine only: while the relay is blocked writing to a slow
// client (blocked), the budget does not run, so a client that stops
// reading is never taken for an engine that stopped talking.
type Watchdog struct {
	clock   clock.Clock
	idle    time.Duration
	t0      time.Time
	last    atomic.Int64 // when the last read returned, in ns since t0; 0: none yet
	blocked atomic.Bool  // the relay is writing to the client
	fire    func()

	// the scheduler's, under its lock
	s       *scheduler
	due     int64 // when the scheduler looks at it next, ns since s.epoch
	index   int   // position in s.queue; -1 when not queued
	stopped bool  // Stop was called
}

// New arms a budget of idle that calls fire (in a goroutine of its own, as
// a timer would) when it runs out. Until the first Touch the budget does not
// run: the wait for the first event is first_token_timeout's.
func New(c clock.Clock, idle time.Duration, fire func()) *Watchdog {
	w := &Watchdog{clock: c, idle: idle, t0: c.Now(), fire: fire, index: -1}
	schedulerOf(c).add(w, w.t0.Add(idle))
	return w
}

// Touch restarts the budget.
func (w *Watchdog) Touch() { w.last.Store(max(1, int64(clock.Since(w.clock, w.t0)))) }

// Block stops the budget while the relay works on what it read and writes
// it to the client; Unblock restarts it from now. A read that ends the
// engine's silence may Block instead of Touch: the Unblock after the write
// restarts the budget, one clock read per read rather than two.
func (w *Watchdog) Block() { w.blocked.Store(true) }

func (w *Watchdog) Unblock() {
	w.Touch()
	w.blocked.Store(false)
}

// next is the scheduler's look at the watchdog at now: the time of the
// next look, or expired when the budget ran out.
func (w *Watchdog) next(now time.Time) (at time.Time, expired bool) {
	if w.blocked.Load() {
		return now.Add(w.idle), false // the client's time, not the engine's
	}
	last := w.last.Load()
	if last == 0 {
		// no event yet: the wait for the first one is first_token_timeout's
		return now.Add(w.idle), false
	}
	gap := now.Sub(w.t0) - time.Duration(last)
	if gap >= w.idle {
		return now, true
	}
	return now.Add(w.idle - gap), false
}

// Stop ends the budget. As with a timer's Stop, a fire already under way
// (the budget ran out just before) is not called back.
func (w *Watchdog) Stop() { w.s.remove(w) }

// TouchReader restarts an idle budget at every read.
type TouchReader struct {
	io.ReadCloser
	W *Watchdog
}

func (t *TouchReader) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.W.Touch()
	}
	return n, err
}
