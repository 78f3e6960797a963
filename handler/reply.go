package handler

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// The client's side of a reply: what has been sent so far, and the few
// things the gateway says itself — the SSE preamble of a stream that waits,
// keep-alive and seam comments, an in-band error event, and the abort that
// tells the client an answer is not whole.

// preambleDelay is how long a streaming request waits for its engine before
// it gets its SSE headers, so that clients and proxies in between see a
// live response while a model loads.
const preambleDelay = 500 * time.Millisecond

// reply is the client's side of a request: what has been sent so far.
type reply struct {
	w         http.ResponseWriter
	rc        *http.ResponseController
	clock     clock.Clock
	stream    bool    // the client asked for an event stream
	api       api.API // the client's: the shape of the gateway's own errors
	preamble  bool    // SSE headers went out before any upstream answered
	keepAlive time.Duration
	start     time.Time
	res       *Result // what the client got, for logs and metrics
	switched  bool    // the request left its first candidate
	// ids are the id, created and model of the chunks the gateway sent
	// itself (loading status), which the engine's chunks then get too:
	// one id and one model per stream
	ids *grammar.Rewrite
	// spend takes one of max_attempts for an upstream call after commit
	// (a resume); false when none is left
	spend func() bool
	// seq is the sequence_number of a Responses client's next event,
	// which an in-band error takes (apierror.EventAs)
	seq int
	// sent is the bytes of the answer written to the client (write): what
	// a cut answer had relayed
	sent int64
}

func (g *Gateway) newReply(w http.ResponseWriter, stream bool, client api.API, res *Result) *reply {
	return &reply{w: w, rc: http.NewResponseController(w), clock: g.clock, stream: stream, api: client,
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

// write writes b, bytes of the answer, to the client.
func (rp *reply) write(b []byte) error {
	n, err := rp.w.Write(b)
	rp.sent += int64(n)
	return err
}

// errorEvent ends a stream whose headers went out with one error event.
func (rp *reply) errorEvent(e *apierror.Error) {
	_, _ = rp.w.Write(e.EventAs(rp.api, rp.seq))
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
	preamble  clock.Timer
	keepAlive clock.Timer
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
	if wt.keepAlive != nil {
		wt.keepAlive.Stop()
	}
}

// streamTimers are the client's timers for a streaming request, and none
// (channels that never fire) for one that is not: a JSON client is sent
// nothing while it waits, so the timers would only cost (race.go).
func (rp *reply) streamTimers() *waitTimers {
	if !rp.stream {
		return &waitTimers{rp: rp}
	}
	return rp.timers()
}

func (wt *waitTimers) preambleC() <-chan time.Time {
	if wt.preamble == nil {
		return nil
	}
	return wt.preamble.C()
}

func (wt *waitTimers) keepAliveC() <-chan time.Time {
	if wt.keepAlive == nil {
		return nil
	}
	return wt.keepAlive.C()
}

// onPreamble sends the preamble when its timer fired.
func (wt *waitTimers) onPreamble() {
	// re-armed before the flush, in order: a clock that moves once the
	// client has the preamble (a test's) sees the keep-alive's timer
	wt.keepAlive.Reset(wt.rp.keepAlive)
	wt.rp.sendPreamble()
	wt.preamble = nil
}

// onKeepAlive sends a keep-alive comment when its timer fired.
func (wt *waitTimers) onKeepAlive() {
	// re-armed before the flush, in order: a clock that moves once the
	// client has the comment (a test's) sees the next one's timer
	wt.keepAlive.Reset(wt.rp.keepAlive)
	if wt.rp.preamble {
		wt.rp.comment("keep-alive")
	}
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
		t       clock.Timer
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
		// re-armed before the flush, in order: a clock that moves once the
		// client has what this sends (a test's) sees the next timer
		t.Reset(rp.keepAlive)
		if !rp.preamble {
			rp.sendPreamble()
		} else {
			rp.comment("keep-alive")
		}
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

// loading is a chat stream's loading status (loading_status on): while the
// request waits for its engine to start, the client gets the wait as
// reasoning_content deltas, which chat UIs show in their thinking box.
//
// These chunks go out before any engine has answered, so they cannot carry
// the id and model the engine will use; instead the engine's chunks are
// given the loading chunks' id, created and model (rp.ids, applied at
// commit as resume applies its own), so that the client sees one stream:
// SDKs' accumulators refuse a chunk whose id changes mid-stream.
// The engine that answered is named in the stream's comment and trailers.
type loading struct {
	rp      *reply
	model   string
	engine  string
	since   time.Time
	sent    bool
	id      string // this stream's id, chatcmpl-llmgw-<random>
	created int64
}

// newLoading returns the loading status of a request that is about to wait
// for rt's start, or nil when it gets none: loading_status off, not a
// streaming chat request, the engine not starting (a queue is not a load),
// or the request already left its first candidate for a fallback.
func (g *Gateway) newLoading(rp *reply, req *request, rt *route) *loading {
	if !rt.cfg.ShowsLoading() || !rp.stream || rp.switched || !req.chatStream() || rt.eng.State() == engines.Ready {
		return nil
	}
	return &loading{rp: rp, model: req.model, engine: rt.cfg.Name, since: g.clock.Now()}
}

// chatStream reports whether the request is an OpenAI chat completion
// stream, the one grammar with a reasoning_content delta.
func (req *request) chatStream() bool {
	return req.stream && req.op == opChat && req.json()
}

// tick sends the wait so far; the first one says what is loading.
func (l *loading) tick() {
	if l == nil || !l.rp.preamble {
		return
	}
	waited := l.rp.clock.Now().Sub(l.since).Round(time.Second)
	if !l.sent {
		l.start()
		l.delta("Loading " + l.model + " on engine " + l.engine + "…\n")
		return
	}
	l.delta("still loading… " + waited.String() + "\n")
}

// done says the engine is up, once something was said.
func (l *loading) done() {
	if l == nil || !l.sent {
		return
	}
	l.delta("loaded after " + l.rp.clock.Now().Sub(l.since).Round(100*time.Millisecond).String() + ".\n\n")
}

// start gives the stream its id and created, for these chunks and the
// engine's.
func (l *loading) start() {
	l.sent = true
	var r [12]byte
	_, _ = rand.Read(r[:])
	l.id = "chatcmpl-llmgw-" + hex.EncodeToString(r[:])
	l.created = l.rp.clock.Now().Unix()
	l.rp.ids = &grammar.Rewrite{
		ID:      jsonmember.AppendString(nil, l.id),
		Created: strconv.AppendInt(nil, l.created, 10),
		Model:   jsonmember.AppendString(nil, l.model),
	}
}

func (l *loading) delta(text string) {
	b := make([]byte, 0, 200)
	b = append(b, `data: {"id":`...)
	b = jsonmember.AppendString(b, l.id)
	b = append(b, `,"object":"chat.completion.chunk","created":`...)
	b = strconv.AppendInt(b, l.created, 10)
	b = append(b, `,"model":`...)
	b = jsonmember.AppendString(b, l.model)
	b = append(b, `,"choices":[{"index":0,"delta":{"role":"assistant","reasoning_content":`...)
	b = jsonmember.AppendString(b, text)
	b = append(b, "}}]}\n\n"...)
	_, _ = l.rp.w.Write(b)
	_ = l.rp.rc.Flush()
}
