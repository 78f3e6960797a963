package engines

import (
	"context"
	"errors"
	"net/url"
	"time"

	"go.uber.org/zap"
)

// Slot calls that never answer: llama-server has been seen to write a
// slot's file and lose the reply (2 of 50 restores; 11 of 20 with verbose
// logging, after which its /health stopped answering too). Waited on for
// stop_timeout, such a call held a swap for 10 s, and each one ties up one
// of the engine's few HTTP threads for good. So each save or restore has
// its own bound (slots save { timeout }, 3s), on the gateway's clock, and
// after maxHungSlotCalls of them in a row the engine is asked no more until
// it restarts: a further call would most likely hang as well, and take
// another thread.

// maxHungSlotCalls is how many slot calls in a row may hang before the
// engine's slot calls stop.
const maxHungSlotCalls = 3

var (
	errSlotCallHung = errors.New("the engine did not answer within slots save's timeout")
	errSlotCallsOff = errors.New("slot calls stopped: the engine's last ones hung; they resume when it restarts")
)

// boundedSlotCall is slotCall bounded by the slots' timeout, counted
// towards stopping the engine's slot calls when it hangs; it fails at once,
// asking nothing, once they are stopped.
func (e *Engine) boundedSlotCall(parent context.Context, base *url.URL, path string, id int, file, tokens string) (uint64, error) {
	t := e.slots
	if t.callsStopped() {
		return 0, errSlotCallsOff
	}
	ctx, cancel := context.WithCancelCause(parent)
	timer := e.clock.AfterFunc(time.Duration(t.cfg.Timeout), func() { cancel(errSlotCallHung) })
	n, err := e.slotCall(ctx, base, path, id, file, tokens)
	timer.Stop()
	hung := errors.Is(context.Cause(ctx), errSlotCallHung)
	cancel(nil)
	if hung {
		n, err = 0, errSlotCallHung // an answer cut short is no answer
	}
	if t.noteCall(hung) {
		e.log.Warn("slot calls stopped until the engine restarts: its last ones hung",
			zap.Int("hung", maxHungSlotCalls), zap.Duration("timeout", time.Duration(t.cfg.Timeout)))
	}
	return n, err
}

// callsStopped reports whether the engine's slot calls are stopped.
func (t *slotTable) callsStopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.stopped
}

// noteCall records whether a slot call hung; true when it is the one that
// stops the engine's slot calls.
func (t *slotTable) noteCall(hung bool) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !hung {
		t.hung = 0
		return false
	}
	t.hung++
	t.count.Hung++
	if t.hung < maxHungSlotCalls || t.stopped {
		return false
	}
	t.stopped = true
	return true
}
