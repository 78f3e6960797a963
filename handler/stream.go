package handler

import (
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"
	"sync"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// run walks the plan: each candidate is tried until one gives an answer worth
// committing. Nothing reaches the client before commit; after it, nothing
// switches.
func (g *Gateway) run(w http.ResponseWriter, req *request, plan []candidate, res *Result) {
	var failed []*attempt
	defer func() {
		for _, a := range failed {
			a.close()
		}
	}()
	for i, c := range plan {
		a := g.try(req, c)
		res.Attempts++
		last := i == len(plan)-1
		if a.outcome == outcomeGood || (a.outcome == outcomeStatus && (last || !a.retryable())) {
			res.Engine, res.ModelSent = c.rt.cfg.Name, a.sent
			g.commit(w, req, a)
			return
		}
		if ce := g.log.Check(zapcore.DebugLevel, "attempt failed"); ce != nil {
			ce.Write(zap.String("attempt", a.label()), zap.Error(a.err))
		}
		failed = append(failed, a)
		if a.outcome == outcomeCanceled || !a.retryable() {
			break
		}
	}
	g.fail(w, failed)
}

// fail answers with the first attempt's failure: the primary's upstream error
// as it was sent when there is one, else an error of ours, listing every
// attempt when there were several.
func (g *Gateway) fail(w http.ResponseWriter, failed []*attempt) {
	first := failed[0]
	if first.outcome == outcomeCanceled {
		return // nobody is listening
	}
	e := first.failureError()
	if len(failed) > 1 {
		labels := make([]string, len(failed))
		for i, a := range failed {
			labels[i] = a.label()
		}
		e.Message += " (attempts: " + strings.Join(labels, ", ") + ")"
	}
	e.write(w)
}

// commit gives the attempt's response to the client. This is the commit
// point: the first byte of the response leaves the gateway here, and from
// now on the request is this engine's, whatever happens.
func (g *Gateway) commit(w http.ResponseWriter, req *request, a *attempt) {
	defer a.close()
	resp := a.resp
	h := w.Header()
	copyHeader(h, resp.Header)
	h.Set("X-LLM-Engine", a.c.rt.cfg.Name)
	sse := isEventStream(resp.Header.Get("Content-Type"))
	if sse {
		// an event stream is delivered event by event: no length, and no
		// buffering in proxies in front of us
		h.Del("Content-Length")
		h.Set("Cache-Control", "no-cache")
		h.Set("X-Accel-Buffering", "no")
	}
	w.WriteHeader(resp.StatusCode)

	if err := copyBody(w, resp.Body, sse); err != nil {
		g.cut(w, a, sse, err)
	}
}

// errClientGone marks a copy that ended because the client stopped reading.
var errClientGone = errors.New("client went away")

// cut ends a response whose upstream failed after commit. The client must
// see an error, never a tidy end that looks complete: a stream gets one
// in-band error event first, and the connection is aborted either way.
func (g *Gateway) cut(w http.ResponseWriter, a *attempt, sse bool, err error) {
	if errors.Is(err, errClientGone) || a.lease == nil {
		panic(http.ErrAbortHandler)
	}
	g.log.Warn("upstream failed mid-response", zap.String("engine", a.c.rt.cfg.Name), zap.Error(err))
	if sse {
		e := &Error{http.StatusBadGateway, typeUpstream, "upstream_stream_cut",
			"engine " + a.c.rt.cfg.Name + " cut the stream: " + rootCause(err)}
		_, _ = w.Write(e.sseEvent())
		_ = http.NewResponseController(w).Flush()
	}
	a.close()
	panic(http.ErrAbortHandler)
}

var copyBufPool = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

// copyBody copies the upstream body to the client. An event stream is
// flushed after every read, so each event leaves as soon as it arrives;
// other bodies are flushed once at the end. A read error is the upstream's,
// a write error becomes errClientGone.
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
				if err := rc.Flush(); err != nil && !errors.Is(err, http.ErrNotSupported) {
					return errClientGone
				}
			}
		}
		if rerr == io.EOF {
			if !flushEach {
				_ = rc.Flush()
			}
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
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}
