package handler

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/multipart"
)

// Passthrough: /upstream/<model>/<path> reaches the engine serving <model>
// (llama-swap's /upstream/), for an engine's own pages and endpoints: its
// web UI, /props, /slots, /metrics. The engine is started per the wake
// policy and leased while the request is in flight, so it is not stopped for
// idleness or swapped out of its group under it. The caller's credentials
// are stripped and the engine's own key added, as on every other path; the
// answer is relayed as the engine gives it, flushed as it comes.

// upstreamTarget finds the route and the rest of the path of a passthrough
// path. Model names may hold slashes (Qwen/Qwen3-8B), so the longest run of
// leading segments that names a model wins.
func (g *Gateway) upstreamTarget(p string) (*route, string, string) {
	rest := strings.TrimPrefix(p, config.UpstreamPrefix)
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
	kr := res.key
	if rt == nil {
		res.refuse(w, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "model_not_found", Message: fmt.Sprintf("%s%s/…: the model %q is not served here; served models: %s", config.UpstreamPrefix, shorten(model, maxEcho), shorten(model, maxEcho), strings.Join(kr.Only(g.engineModels()), ", "))})
		return
	}
	res.Known = true
	if gerr := g.mayPassthrough(w, r, kr, model); gerr != nil {
		res.refuse(w, gerr)
		return
	}
	pr, gerr := g.passRouteOf(r, kr, rt, model, tail) // passroute.go
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	req, gerr := g.readPassthrough(w, r, res, rt, model, kr, pr)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	req.key = kr
	req, t, gerr := g.reserve(w, req, res)
	if gerr != nil {
		res.refuse(w, gerr)
		return
	}
	defer g.charge(w, t, req, res)
	withPriority(req, res)
	g.proxyPassthrough(w, req, rt, tail, pr, res)
}

// mayPassthrough is what a key may do on /upstream/: the path's model, the
// route's methods, and, for a key with a budget (tokens or money, its
// own or its team's), only where the
// operator lets budgets reach an engine's own endpoints. What of the
// engine the rest of the path reaches is passRouteOf's.
func (g *Gateway) mayPassthrough(w http.ResponseWriter, r *http.Request, kr *keys.Rules, model string) *apierror.Error {
	if !slices.Contains(g.ptMethods, r.Method) {
		w.Header().Set("Allow", strings.Join(g.ptMethods, ", "))
		return &apierror.Error{Status: http.StatusMethodNotAllowed, Type: apierror.TypeInvalidRequest, Code: "method_not_allowed", Message: fmt.Sprintf("%s %s…: the passthrough serves %s (passthrough methods)", r.Method, config.UpstreamPrefix, strings.Join(g.ptMethods, ", "))}
	}
	if !kr.Allows(model) {
		return kr.NotAllowed(model)
	}
	if kr != nil && g.budgeted(kr) && !g.ptBudgets { // budget.go: tokens or money, its own or its team's
		return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "passthrough_not_allowed", Message: fmt.Sprintf("key %s has a budget, and %s… is not counted for it here: use the /v1/ API (or the operator sets passthrough budgets on)", kr.Name, config.UpstreamPrefix)}
	}
	return nil
}

// readPassthrough reads a passthrough body with the one reader: a JSON or
// multipart body is held to the same rules as on /v1/ (its model must be
// the path's engine's, and one the key may use), and a JSON body gets the
// engine's filters. Another body is relayed as it is, bounded by max_body.
// A provider's route whose body names the model (pr.bodyModel) needs one,
// sent as the engine's model_name when it has one.
func (g *Gateway) readPassthrough(w http.ResponseWriter, r *http.Request, res *Result, rt *route, model string, kr *keys.Rules, pr *passRoute) (*request, *apierror.Error) {
	req := &request{r: r, model: model, op: opPassthrough, passthrough: true}
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		if pr != nil && pr.bodyModel {
			return nil, bodyModelMissing(rt, pr)
		}
		return req, nil
	}
	if gerr := checkPassthroughMedia(r); gerr != nil {
		return nil, gerr
	}
	body, gerr := g.readBodyOnce(w, r, &res.body)
	if gerr != nil {
		return nil, gerr
	}
	req.body = body
	var named []byte
	jsonBody := false
	ct := r.Header.Get("Content-Type")
	if boundary, ok := multipart.Boundary(ct); ok {
		f, gerr := scanForm(body, boundary)
		if gerr != nil {
			return nil, gerr
		}
		req.form, req.stream = &f, f.Stream
		if f.Model.OK() {
			named = body[f.Model.Start:f.Model.End]
		}
	} else if len(body) > 0 && looksJSON(ct, body) {
		// a body an engine reads as JSON is read here as every route
		// reads one (a BOM or UTF-16 passed unread, with a
		// model the key may not use and no filters applied)
		if gerr := g.scanJSON(body, &req.fields); gerr != nil {
			return nil, gerr
		}
		jsonBody = true
		req.stream = jsonmember.IsTrue(body, req.fields.Stream)
		if req.counts, gerr = readCounts(body, &req.fields); gerr != nil {
			return nil, gerr
		}
		if v, ok := jsonmember.StringValue(body, req.fields.Model); ok {
			named = v
		}
	}
	if named != nil && !kr.Allows(string(named)) {
		return nil, kr.NotAllowed(string(named))
	}
	if named != nil && g.byModel[string(named)] != rt {
		return nil, apierror.BadRequest("model_mismatch", fmt.Sprintf(
			"the body names the model %q, which %s%s/ does not serve: send the body to the path of its own model", named, config.UpstreamPrefix, model))
	}
	if pr != nil && pr.bodyModel {
		if named == nil {
			return nil, bodyModelMissing(rt, pr)
		}
		req.model = string(named)
		if pr.sent != "" {
			req.body = req.bodyFor(pr.sent) // before the filters: the fields are the caller's body's
		}
	}
	if jsonBody {
		req.body = jsonmember.ApplyFilters(req.body, rt.filters)
	}
	return req, nil
}

// bodyModelMissing refuses a provider's route whose body names no model.
func bodyModelMissing(rt *route, pr *passRoute) *apierror.Error {
	return apierror.BadRequest("missing_model", fmt.Sprintf(
		`engine %s's route %s takes the model in the body: name it in "model"`, rt.cfg.Name, pr.name))
}

// proxyPassthrough sends the request to the engine, leased (and started,
// per its wake policy) while it is in flight, and relays its answer,
// reading the usage the answer reports.
func (g *Gateway) proxyPassthrough(w http.ResponseWriter, req *request, rt *route, tail string, pr *passRoute, res *Result) {
	r := req.r
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
	up := upstream.NewRequest(ctx, in, lease.Base(), &rt.cfg, req.body)
	if req.body == nil {
		up.Body, up.GetBody, up.ContentLength = http.NoBody, nil, 0
	}
	if err := pr.target(rt, up, lease.Base(), req.body); err != nil {
		a := &attempt{c: candidate{rt: rt}, err: err, outcome: outcomeAuth}
		res.refuse(w, a.failureError())
		return
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
		a := &attempt{c: candidate{rt: rt}, err: err, outcome: classify(hctx, nil, err), timeout: context.Cause(hctx)}
		res.refuse(w, a.failureError())
		return
	}
	defer resp.Body.Close()
	res.Engine = rt.cfg.Name
	if resp.StatusCode >= http.StatusBadRequest {
		// an error answer, read whole (bounded) to mask what of the
		// engine's credentials it echoes, as on /v1/
		body, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		body = upstream.MaskEcho(body, resp.Header, upstream.SentSecrets(up.Header, &rt.cfg))
		resp.Body = io.NopCloser(bytes.NewReader(body))
		resp.ContentLength = int64(len(body))
		resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	upstream.CopyHeader(w.Header(), resp.Header)
	w.Header().Set("X-LLM-Engine", rt.cfg.Name)
	w.WriteHeader(resp.StatusCode)
	res.Status = resp.StatusCode
	m := &grammar.Meter{SSE: isEventStream(resp.Header.Get("Content-Type")), Max: maxWholeAnswer}
	relayBody(w, resp, m)
	res.Usage, res.HasUsage = m.Result()
}

// relayBody copies an answer to the client, flushing each read when the
// answer is a stream (or of unknown length), as reverse_proxy does for SSE.
func relayBody(w http.ResponseWriter, resp *http.Response, m *grammar.Meter) {
	flush := resp.ContentLength < 0 || isEventStream(resp.Header.Get("Content-Type"))
	rc := http.NewResponseController(w)
	buf := make([]byte, 32<<10)
	for {
		n, err := resp.Body.Read(buf)
		if n > 0 {
			m.Write(buf[:n])
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
