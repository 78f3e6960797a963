package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// Passthrough: /upstream/<model>/<path> reaches the engine serving <model>
// (llama-swap's /upstream/), for an engine's own pages and endpoints: its
// web UI, /props, /slots, /metrics. The engine is started per the wake
// policy and leased while the request is in flight, so it is not stopped for
// idleness or swapped out of its group under it. The caller's credentials
// are stripped and the engine's own key added, as on every other path; the
// answer is relayed as the engine gives it, flushed as it comes.

// UpstreamPrefix is where the passthrough paths start.
const UpstreamPrefix = "/upstream/"

// upstreamTarget finds the route and the rest of the path of a passthrough
// path. Model names may hold slashes (Qwen/Qwen3-8B), so the longest run of
// leading segments that names a model wins.
func (g *Gateway) upstreamTarget(p string) (*route, string, string) {
	rest := strings.TrimPrefix(p, UpstreamPrefix)
	for i := len(rest); i > 0; i = strings.LastIndexByte(rest[:i], '/') {
		if rt := g.byModel[rest[:i]]; rt != nil {
			tail := rest[i:]
			if tail == "" {
				tail = "/"
			}
			return rt, rest[:i], tail
		}
	}
	model, _, _ := strings.Cut(rest, "/")
	return nil, model, ""
}

func (g *Gateway) servePassthrough(w http.ResponseWriter, r *http.Request, res *Result) {
	rt, model, tail := g.upstreamTarget(r.URL.Path)
	res.ModelAsked = model
	if rt == nil {
		res.refuse(w, &Error{http.StatusNotFound, typeInvalidRequest, "model_not_found",
			fmt.Sprintf("%s%s/…: the model %q is not served here; served models: %s", UpstreamPrefix, model, model, strings.Join(g.engineModels(), ", "))})
		return
	}
	res.Known = true
	if !res.key.allows(model) {
		res.refuse(w, res.key.notAllowed(model))
		return
	}
	if r.ContentLength > g.maxBody {
		res.refuse(w, g.tooLarge())
		return
	}
	ctx := r.Context()
	lease, err := rt.eng.Acquire(ctx, rt.wake)
	if err != nil {
		if ctx.Err() != nil {
			return // the caller left; the status is 499
		}
		a := &attempt{c: candidate{rt: rt, acquire: true}}
		a.acquiredResult(ctx, acquired{err: err})
		res.refuse(w, a.failureError())
		return
	}
	defer lease.Release()

	in := r.Clone(ctx)
	in.URL.Path, in.URL.RawPath = tail, ""
	up := newUpstreamRequest(ctx, in, lease.Base(), &rt.cfg, nil)
	if r.Body != nil && r.Body != http.NoBody && r.ContentLength != 0 {
		up.Body = io.NopCloser(&limitedBody{r: r.Body, left: g.maxBody})
		up.GetBody = nil
		up.ContentLength = r.ContentLength
		if r.ContentLength < 0 {
			delete(up.Header, "Content-Length")
		}
	}
	hctx, cancel := context.WithCancelCause(ctx)
	defer cancel(context.Canceled)
	header := g.clock.AfterFunc(time.Duration(rt.cfg.HeaderTimeout), func() { cancel(errHeaderTimeout) })
	resp, err := rt.eng.Transport().RoundTrip(up.WithContext(hctx))
	header.Stop()
	if err != nil {
		if ctx.Err() != nil {
			return
		}
		if errors.Is(err, errTooLarge) {
			res.refuse(w, g.tooLarge())
			return
		}
		a := &attempt{c: candidate{rt: rt}, err: err, outcome: classify(hctx, nil, err), timeout: context.Cause(hctx)}
		res.refuse(w, a.failureError())
		return
	}
	defer resp.Body.Close()
	res.Engine = rt.cfg.Name
	copyHeader(w.Header(), resp.Header)
	w.Header().Set("X-LLM-Engine", rt.cfg.Name)
	w.WriteHeader(resp.StatusCode)
	res.Status = resp.StatusCode
	relayBody(w, resp)
}

// relayBody copies an answer to the client, flushing each read when the
// answer is a stream (or of unknown length), as reverse_proxy does for SSE.
func relayBody(w http.ResponseWriter, resp *http.Response) {
	flush := resp.ContentLength < 0 || isEventStream(resp.Header.Get("Content-Type"))
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if flush {
				_ = rc.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}

// limitedBody is a request body cut off past the gateway's max_body.
type limitedBody struct {
	r    io.Reader
	left int64
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left < 0 {
		return 0, errTooLarge
	}
	if int64(len(p)) > b.left+1 {
		p = p[:b.left+1]
	}
	n, err := b.r.Read(p)
	b.left -= int64(n)
	if b.left < 0 {
		return 0, errTooLarge
	}
	return n, err
}

// engineModels lists the models and aliases of the engines (no pools).
func (g *Gateway) engineModels() []string {
	var names []string
	for _, rt := range g.routes {
		names = append(names, rt.cfg.Models...)
	}
	return names
}
