package handler

import (
	"io"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// The stream-idle budget of an attempt's answer.

// watchdog is the stream-idle budget: the gap between two reads of an
// answer may not exceed it. It is kept lazily: a read only stores the time,
// and the timer, when it fires, re-arms itself for the rest of the gap, so
// a busy stream costs no timer operation per event.
//
// It measures the engine only: while the relay is blocked writing to a slow
// client (blocked), the budget does not run, so a client that stops
// reading is never taken for an engine that stopped talking.
type watchdog struct {
	clock   clock.Clock
	idle    time.Duration
	t0      time.Time
	last    atomic.Int64 // when the last read returned, in ns since t0; 0: none yet
	blocked atomic.Bool  // the relay is writing to the client
	timer   clock.Timer
	fire    func()
}

// startIdle arms the attempt's stream-idle budget.
func (g *Gateway) startIdle(a *attempt) {
	w := &watchdog{clock: g.clock, idle: time.Duration(a.c.rt.cfg.StreamIdleTimeout), t0: g.clock.Now(),
		fire: func() { a.cancel(errStreamIdleTimeout) }}
	w.timer = g.clock.AfterFunc(w.idle, w.check)
	a.idle = w
}

// touch restarts the budget.
func (w *watchdog) touch() { w.last.Store(max(1, int64(w.clock.Now().Sub(w.t0)))) }

// block stops the budget while the relay writes to the client; unblock
// restarts it from now.
func (w *watchdog) block() { w.blocked.Store(true) }

func (w *watchdog) unblock() {
	w.touch()
	w.blocked.Store(false)
}

func (w *watchdog) check() {
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

func (w *watchdog) stop() { w.timer.Stop() }

// touchReader restarts an idle budget at every read.
type touchReader struct {
	io.ReadCloser
	w *watchdog
}

func (t *touchReader) Read(p []byte) (int, error) {
	n, err := t.ReadCloser.Read(p)
	if n > 0 {
		t.w.touch()
	}
	return n, err
}
