package handler

import (
	"context"
	"net/http"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The client's side of a reply: what has been sent so far, and the few
// things the gateway says itself — the SSE preamble of a stream that waits,
// keep-alive and seam comments, an in-band error event, and the abort that
// tells the client an answer is not whole.

// preambleDelay is how long a streaming request waits for its engine before
// it gets its SSE headers, so that clients and proxies in between see a
// live response while a model loads.
const preambleDelay = 500 * time.Millisecond

// DefaultKeepAlive is the default interval of SSE keep-alive comments while a
// streaming request waits.
const DefaultKeepAlive = 3 * time.Second

// reply is the client's side of a request: what has been sent so far.
type reply struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	clock     engines.Clock
	stream    bool // the client asked for an event stream
	api       api  // the API family: the shape of the gateway's own errors
	preamble  bool // SSE headers went out before any upstream answered
	keepAlive time.Duration
	start     time.Time
	res       *Result // what the client got, for logs and metrics
}

func (g *Gateway) newReply(w http.ResponseWriter, stream bool, family api, res *Result) *reply {
	return &reply{w: w, rc: http.NewResponseController(w), clock: g.clock, stream: stream, api: family,
		keepAlive: g.keepAlive, start: g.clock.Now(), res: res}
}

// since is the time since the request began.
func (rp *reply) since() time.Duration { return rp.clock.Now().Sub(rp.start) }

// firstByte records the client's first byte and status, once.
func (rp *reply) firstByte(status int) {
	if rp.res == nil || rp.res.Status != 0 {
		return
	}
	rp.res.Status, rp.res.TTFB = status, rp.since()
}

// sendPreamble commits SSE headers before any upstream answered.
func (rp *reply) sendPreamble() {
	h := rp.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	rp.w.WriteHeader(http.StatusOK)
	_ = rp.rc.Flush()
	rp.preamble = true
	rp.firstByte(http.StatusOK)
}

// errorEvent ends a stream whose headers went out with one error event.
func (rp *reply) errorEvent(e *Error) {
	_, _ = rp.w.Write(e.eventAs(rp.api))
	_ = rp.rc.Flush()
}

// comment sends one SSE comment line.
func (rp *reply) comment(text string) {
	_, _ = rp.w.Write([]byte(": " + text + "\n\n"))
	_ = rp.rc.Flush()
}

// abort ends a response that must not look complete: the connection is cut
// (HTTP/1.1) or the stream reset (HTTP/2), so the client sees a broken
// answer, never a tidy end.
func (rp *reply) abort() {
	panic(http.ErrAbortHandler)
}

// waitTimers are the client's timers while the request waits for an
// upstream: the preamble's (nil once sent, or for a request that is not a
// stream) and the keep-alive's.
type waitTimers struct {
	rp        *reply
	preamble  engines.Timer
	keepAlive engines.Timer
}

func (rp *reply) timers() *waitTimers {
	wt := &waitTimers{rp: rp}
	if rp.stream && !rp.preamble {
		wt.preamble = rp.clock.NewTimer(max(0, preambleDelay-rp.since()))
	}
	wt.keepAlive = rp.clock.NewTimer(rp.keepAlive)
	return wt
}

func (wt *waitTimers) stop() {
	if wt.preamble != nil {
		wt.preamble.Stop()
	}
	wt.keepAlive.Stop()
}

func (wt *waitTimers) preambleC() <-chan time.Time {
	if wt.preamble == nil {
		return nil
	}
	return wt.preamble.C()
}

func (wt *waitTimers) keepAliveC() <-chan time.Time { return wt.keepAlive.C() }

// onPreamble sends the preamble when its timer fired.
func (wt *waitTimers) onPreamble() {
	wt.rp.sendPreamble()
	wt.preamble = nil
	wt.keepAlive.Reset(wt.rp.keepAlive)
}

// onKeepAlive sends a keep-alive comment when its timer fired.
func (wt *waitTimers) onKeepAlive() {
	if wt.rp.preamble {
		wt.rp.comment("keep-alive")
	}
	wt.keepAlive.Reset(wt.rp.keepAlive)
}

// during runs wait, a blocking wait for an upstream (its response headers,
// its first content), while a streaming client gets its preamble and
// keep-alive comments from a timer of its own, as in every other wait
// before commit: a long prompt that takes minutes to process shows a live
// stream. Nothing else writes to the client while wait runs, and the timer
// has stopped writing when during returns.
func (rp *reply) during(wait func()) {
	if !rp.stream {
		wait()
		return
	}
	var (
		mu      sync.Mutex
		stopped bool
		t       engines.Timer
	)
	first := rp.keepAlive
	if !rp.preamble {
		first = max(0, preambleDelay-rp.since())
	}
	mu.Lock()
	t = rp.clock.AfterFunc(first, func() {
		mu.Lock()
		defer mu.Unlock()
		if stopped {
			return
		}
		if !rp.preamble {
			rp.sendPreamble()
		} else {
			rp.comment("keep-alive")
		}
		t.Reset(rp.keepAlive)
	})
	mu.Unlock()
	wait()
	mu.Lock()
	stopped = true
	t.Stop()
	mu.Unlock()
}

// pause waits d (a retry's back-off) while keeping a waiting stream alive.
// It reports false if the client went away.
func (rp *reply) pause(ctx context.Context, d time.Duration) bool {
	t := rp.clock.NewTimer(d)
	defer t.Stop()
	wt := rp.timers()
	defer wt.stop()
	for {
		select {
		case <-t.C():
			return true
		case <-ctx.Done():
			return false
		case <-wt.preambleC():
			wt.onPreamble()
		case <-wt.keepAliveC():
			wt.onKeepAlive()
		}
	}
}
