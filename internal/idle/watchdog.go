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
// answer may not exceed it. It is kept lazily: a read only stores the time,
// and the timer, when it fires, re-arms itself for the rest of the gap, so
// a busy stream costs no timer operation per event.
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
	timer   clock.Timer
	fire    func()
}

// New arms a budget of idle that calls fire when it runs out.
func New(c clock.Clock, idle time.Duration, fire func()) *Watchdog {
	w := &Watchdog{clock: c, idle: idle, t0: c.Now(), fire: fire}
	w.timer = c.AfterFunc(w.idle, w.check)
	return w
}

// Touch restarts the budget.
func (w *Watchdog) Touch() { w.last.Store(max(1, int64(w.clock.Now().Sub(w.t0)))) }

// Block stops the budget while the relay writes to the client; Unblock
// restarts it from now.
func (w *Watchdog) Block() { w.blocked.Store(true) }

func (w *Watchdog) Unblock() {
	w.Touch()
	w.blocked.Store(false)
}

func (w *Watchdog) check() {
	if w.blocked.Load() {
		w.timer.Reset(w.idle) // the client's time, not the engine's
		return
	}
	last := w.last.Load()
	gap := w.clock.Now().Sub(w.t0) - time.Duration(last)
	if last == 0 {
		// no event yet: the wait for the first one is first_token_timeout's
		gap = 0
	}
	if gap >= w.idle {
		w.fire()
		return
	}
	w.timer.Reset(w.idle - gap)
}

func (w *Watchdog) Stop() { w.timer.Stop() }

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
