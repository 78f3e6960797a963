package handler

import (
	"context"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The relay: the commit point, the relay of an answer to the client, and
// the honest cut. Once commit has sent the first content, the request is
// the answering engine's: a failure after it is never passed off as a
// clean answer, and it never switches engines (resume.go continues the same
// answer, with a seam comment, or not at all).

// stream is an event stream's state, owned by the relay: the reader, the
// events held back before the first content, and what a resumable stream
// has said so far.
type stream struct {
	events  *sseReader
	held    []byte      // events read before the first content event
	tr      *transcript // what a resumable stream sent so far
	rewrite *rewriteIDs // a resumed stream's id and created
}

// commit gives the attempt's answer to the client. This is the commit
// point: the first content leaves the gateway here, and from now on the
// request is this engine's, whatever happens.
func (g *Gateway) commit(rp *reply, a *attempt) {
	defer a.close()
	resp := a.resp
	name := a.c.rt.cfg.Name
	st := a.stream
	if rp.preamble {
		// the status and headers went out with the preamble: body only
		if a.c.isFallback() {
			rp.comment("fallback " + name)
		}
	} else {
		h := rp.w.Header()
		copyHeader(h, resp.Header)
		if g.annotate && st == nil && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			h.Del("Content-Length") // the annotated body is longer
		}
		h.Set("X-LLM-Engine", name)
		if a.c.isFallback() {
			h.Set("X-LLM-Fallback", name)
		}
		if st != nil {
			// an event stream is delivered event by event: no length,
			// and no buffering in proxies in front of us
			h.Del("Content-Length")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Accel-Buffering", "no")
		}
		rp.firstByte(resp.StatusCode)
		rp.w.WriteHeader(resp.StatusCode)
	}
	if st == nil {
		// a body that is not a stream gets the same budget between reads:
		// headers followed by silence must not hold the request forever
		g.startIdle(a)
		a.idle.touch()
		resp.Body = &touchReader{resp.Body, a.idle}
		if !rp.preamble && resp.StatusCode == http.StatusOK && isJSON(resp.Header) {
			g.writeJSONAnswer(rp, a)
			return
		}
		if err := copyBody(rp.w, resp.Body, rp.preamble); err != nil {
			g.cutBody(rp, a, err)
		}
		return
	}
	if _, err := rp.w.Write(st.held); err != nil {
		g.cut(rp, a, errClientGone)
	}
	if st.tr = g.newTranscript(a); st.tr != nil {
		st.tr.addAll(st.held)
	}
	st.held = nil
	g.relay(rp, a)
}

// maxWholeAnswer bounds the JSON answer read whole to find its usage (and
// annotate it); a larger one is passed on as it is.
const maxWholeAnswer = 1 << 20

// writeJSONAnswer sends a non-streaming JSON answer, reading it whole (when
// it is not huge) to count its tokens and, with annotate_response, to add
// "extra_fields".
func (g *Gateway) writeJSONAnswer(rp *reply, a *attempt) {
	body, err := io.ReadAll(io.LimitReader(a.resp.Body, maxWholeAnswer+1))
	if err != nil {
		g.cutBody(rp, a, err)
	}
	whole := len(body) <= maxWholeAnswer
	if whole {
		if u, ok := usageOf(body); ok {
			rp.res.Usage, rp.res.HasUsage = u, true
		}
		if g.annotate {
			body = annotate(body, a.c.rt.cfg.Name, a.sent, rp.since().Milliseconds(), a.index)
		}
	}
	if _, err := rp.w.Write(body); err != nil {
		g.cut(rp, a, errClientGone)
	}
	if !whole {
		if err := copyBody(rp.w, a.resp.Body, false); err != nil {
			g.cutBody(rp, a, err)
		}
	}
}

// relay passes an event stream on until it ends. A stream that breaks
// is continued by resume when it can be (a new attempt whose stream the
// loop relays in turn, after a seam comment), and cut honestly when not.
func (g *Gateway) relay(rp *reply, a *attempt) {
	defer func() { a.close() }() // the last resumed attempt (closing twice is safe)
	var tried resumeTries
	origin := a.c
	for {
		err := g.relayEvents(rp, a)
		if err == nil {
			return
		}
		a.broke(err)
		if a.outcome == outcomeCanceled {
			g.cut(rp, a, err)
		}
		a.c.cutFailure(a.sent, a.outcome == outcomeTimeout)
		b := g.resume(rp, origin, a, err, &tried)
		if b == nil {
			g.cut(rp, a, err)
		}
		a.close()
		a = b
	}
}

// relayEvents passes the rest of an event stream on, event by event: a
// data line that is not JSON is dropped, and the stream's end is reported:
// nil for a clean one, the error for a stream that did not end whole.
//
// Events are not copied: consecutive events lie side by side in the
// reader's buffer, so the batch of events one read brought is written with
// one Write and one Flush, just before the next read would block, as
// reverse_proxy writes its copy buffer.
func (g *Gateway) relayEvents(rp *reply, a *attempt) error {
	st := a.stream
	var batch []byte // events read and not yet written: a span of the reader's buffer
	send := func(flush bool) {
		if len(batch) > 0 {
			if _, err := rp.w.Write(batch); err != nil {
				g.cut(rp, a, errClientGone)
			}
			batch = nil
		}
		if flush {
			if err := rp.rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
				g.cut(rp, a, errClientGone)
			}
			// a slow client is no silent upstream: the idle budget
			// counts from the last event delivered
			a.idle.touch()
		}
	}
	for {
		if !st.events.buffered() {
			send(true) // the next read may block: everything read so far goes out now
		}
		ev, err := st.events.next()
		a.idle.touch()
		if err == io.EOF {
			// a clean end, [DONE] or not: finish at once
			send(true)
			return nil
		}
		if err != nil {
			send(false)
			return err
		}
		kind, usage, hasUsage := inspectEvent(ev)
		if kind == eventMalformed {
			send(false)
			g.droppedEvent(a)
			continue
		}
		if st.rewrite != nil {
			ev = st.rewrite.apply(ev)
		}
		st.tr.add(ev)
		batch = extend(batch, ev)
		if hasUsage {
			rp.res.Usage, rp.res.HasUsage = usage, true
		}
		if kind == eventDone {
			send(true)
			g.drainAfterDone(a)
			return nil
		}
	}
}

// extend appends ev to batch without copying when ev follows batch in the
// same buffer, which is how consecutive events come out of an sseReader.
func extend(batch, ev []byte) []byte {
	n := len(batch)
	if n == 0 {
		return ev
	}
	if cap(batch) >= n+len(ev) && len(ev) > 0 && &batch[:n+1][n] == &ev[0] {
		return batch[:n+len(ev)]
	}
	return append(batch[:n:n], ev...) // not adjacent: copy (never happens with one reader)
}

// droppedEvent counts a data event that was not JSON.
func (g *Gateway) droppedEvent(a *attempt) {
	g.dropped.Add(1)
	if g.Hooks.Dropped != nil {
		g.Hooks.Dropped(a.c.rt.cfg.Name)
	}
	g.log.Warn("dropped a malformed event", zap.String("engine", a.c.rt.cfg.Name))
}

// drainAfterDone reads what follows [DONE] (normally just the end of the
// chunked body) for a moment, so that the upstream connection is reused
// instead of closed; an upstream that lingers is cut off after 100 ms.
func (g *Gateway) drainAfterDone(a *attempt) {
	t := time.AfterFunc(100*time.Millisecond, func() { a.cancel(context.Canceled) })
	defer t.Stop()
	for {
		if _, err := a.stream.events.next(); err != nil {
			return
		}
	}
}

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

// cutBody classifies a body read that failed, counts it against its
// breaker, then cuts.
func (g *Gateway) cutBody(rp *reply, a *attempt, err error) {
	if !errors.Is(err, errClientGone) {
		a.broke(err)
		if a.outcome != outcomeCanceled {
			a.c.cutFailure(a.sent, a.outcome == outcomeTimeout)
		}
	}
	g.cut(rp, a, err)
}

// errClientGone marks a copy that ended because the client stopped reading.
var errClientGone = errors.New("client went away")

// cut ends a response whose upstream failed after commit. The client must
// see an error, never a tidy end that looks complete: a stream gets one
// in-band error event first, and the connection is aborted either way.
//
// The breaker has heard of the cut already (relay, cutBody): cut only tells
// the client.
func (g *Gateway) cut(rp *reply, a *attempt, err error) {
	if errors.Is(err, errClientGone) || a.req.r.Context().Err() != nil {
		// the client left ("stop generating"): the engine did nothing wrong
		a.close()
		rp.abort()
	}
	g.log.Warn("upstream failed mid-response", zap.String("engine", a.c.rt.cfg.Name), zap.Error(err))
	if a.stream != nil || rp.preamble {
		reason := rootCause(err)
		if a.outcome == outcomeTimeout {
			reason = "no event within its " + a.timeout.Error() + " of " + a.budget().String()
		}
		rp.errorEvent(&Error{http.StatusBadGateway, typeUpstream, "upstream_stream_cut",
			"engine " + a.c.rt.cfg.Name + " cut the stream: " + reason})
	}
	a.close()
	rp.abort()
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies a body that is not an event stream; flushEach flushes
// every read (a stream whose preamble went out). A read error is the
// upstream's, a write error becomes errClientGone.
func copyBody(w http.ResponseWriter, body io.Reader, flushEach bool) error {
	bp := copyBufPool.Get().(*[]byte)
	defer copyBufPool.Put(bp)
	buf := *bp
	rc := http.NewResponseController(w)
	for {
		n, rerr := body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return errClientGone
			}
			if flushEach {
				_ = rc.Flush()
			}
		}
		if rerr == io.EOF {
			return nil
		}
		if rerr != nil {
			return rerr
		}
	}
}

func isEventStream(ct string) bool {
	if ct == "" {
		return false
	}
	if strings.HasPrefix(ct, "text/event-stream") && (len(ct) == len("text/event-stream") || ct[len("text/event-stream")] == ';') {
		return true
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}
