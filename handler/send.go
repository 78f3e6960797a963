package handler

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/idle"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// try makes attempt a (runner.go makes it) of its candidate: ask its
// breakers, get a base URL (leasing and starting the engine when
// c.acquire, waiting at most fallback_after when c.slow could take over),
// send the request through the engine's transport, and for an event stream
// read up to the first content event. Nothing but SSE comments reaches the
// client here. The breakers hear the verdict when the attempt is judged
// (judged), through its breaker pass.
func (g *Gateway) try(rp *reply, a *attempt) {
	defer func() { a.ended = g.clock.Now() }()
	c, req := a.c, a.req
	if err := refusedMedia(req, &c.rt.cfg); err != nil { // media.go
		a.outcome, a.err = outcomeMedia, err
		return
	}
	tr, err := g.translationFor(req, c.rt, a.sent)
	a.tr = tr // a request it cannot carry names the API it was for (fail.go)
	if err != nil {
		a.outcome, a.err = outcomeUntranslatable, err
		return
	}
	t, ok := c.admit(a.sent)
	a.pass = t
	if !ok {
		a.outcome = outcomeOpen
		return
	}
	g.send(rp, req, a)
}

func (g *Gateway) send(rp *reply, req *request, a *attempt) {
	c := a.c
	cfg := &c.rt.cfg
	ctx := a.parent
	if cfg.ModelsFrom != "" && !g.mayWakeNode(ctx, a) {
		return
	}

	if c.acquire {
		if !g.lease(rp, req, a) {
			return
		}
	} else if !a.borrow() {
		return
	}
	a.leasedAt = g.clock.Now()
	a.leased.Store(true)
	base := a.lease.Base()

	ctx, a.cancel = context.WithCancelCause(ctx)
	a.ctx = ctx
	if d := time.Duration(cfg.RequestTimeout); d > 0 {
		// stopped by close, not by a context.AfterFunc on ctx, which
		// would start a goroutine at every attempt's end
		a.deadline = g.clock.AfterFunc(d, func() { a.cancel(errRequestTimeout) })
	}

	up, err := g.upstreamRequest(ctx, req, a, base)
	if err != nil {
		a.outcome, a.err = outcomeAuth, err
		return
	}

	sentAt := g.clock.Now()
	rp.during(func() {
		header := g.clock.AfterFunc(time.Duration(cfg.HeaderTimeout), func() { a.cancel(errHeaderTimeout) })
		a.resp, a.err = g.exchange(ctx, req, a, base, up) // spoken.go: a native path the engine does not have, translated at once
		header.Stop()
		a.outcome = classify(ctx, a.resp, a.err)
		if a.outcome == outcomeGood {
			// a provider's stream as SSE events, whatever its framing
			a.resp.Body = c.rt.events(a.resp.Header, a.resp.Body)
		}
		if a.outcome == outcomeGood && a.tr.on {
			switch bad, read := a.tr.answer(a.resp, req, a.sent); {
			case read != nil:
				a.broke(read)
			case bad != nil:
				a.outcome, a.err = outcomeBadAnswer, bad
			}
		}
		if a.outcome == outcomeGood && isEventStream(a.resp.Header.Get("Content-Type")) {
			g.awaitFirstContent(a)
		}
	})
	resp := a.resp
	switch a.outcome {
	case outcomeGood:
	case outcomeStatus:
		// only the first upstream error may be passed on whole; later
		// ones are kept for their message, bounded
		limit := int64(maxLaterErrorBody)
		if req.keepError() {
			limit = maxErrorBody
		}
		a.errBody, _ = io.ReadAll(io.LimitReader(resp.Body, limit))
		resp.Body.Close()
		// no credential the engine was sent leaves in its echo
		a.errBody = upstream.MaskEcho(a.errBody, resp.Header, upstream.SentSecrets(up.Header, cfg))
		a.failure = c.rt.readFailure(resp, a.errBody, g.clock.Now()) // a provider's failure in its own words (providers.go)
		if a.fault = recogniseFault(a.status(), a.errBody, a.sentBody(req)); a.fault != nil {
			a.outcome = outcomeRequestFault // requestfault.go
			g.refused(a)
		}
		if a.tr.on {
			a.errBody = a.tr.errorBody(resp, a.errBody)
		}
	case outcomeStreamError:
		a.errBody = upstream.MaskEcho(a.errBody, nil, upstream.SentSecrets(up.Header, cfg))
		a.err = errors.New(strings.TrimSpace(string(a.errBody)))
		fallthrough
	default:
		a.silence = g.clock.Now().Sub(sentAt)
		if resp != nil {
			resp.Body.Close()
			a.resp = nil
		}
	}
	if a.outcome == outcomeTimeout {
		a.timeout = context.Cause(ctx)
	}
}

// upstreamRequest is the request a's engine is sent: the body in the API
// it reads (a.tr), its filters applied, pointed at its path with its
// credentials. An error says a provider's credentials could not be had
// (outcomeAuth).
func (g *Gateway) upstreamRequest(ctx context.Context, req *request, a *attempt, base *url.URL) (*http.Request, error) {
	c := a.c
	body := a.tr.body
	if body == nil {
		body = req.bodyFor(a.sent)
	}
	if fs := c.rt.filters; len(fs) > 0 && req.json() && a.tr.count == nil {
		body = jsonmember.ApplyFilters(body, fs)
	}
	if c.rt.cfg.SavesSlots() && a.tr.count == nil {
		body = g.warmSlot(req, a, body) // slots save: the session's slot (warmswap.go)
	}
	up := upstream.NewRequest(ctx, req.r, base, &c.rt.cfg, body)
	if req.json() {
		// the route read the body as JSON, whatever its client called it
		// (curl -d says application/x-www-form-urlencoded, some clients
		// say nothing), and JSON it is said to be: Anthropic and Bedrock
		// refuse another type
		up.Header.Set("Content-Type", "application/json")
	}
	if err := a.tr.target(c.rt, req, up, base, a.sent, body); err != nil {
		return nil, err
	}
	return up, nil
}

// refused tells of an engine's answer that is the request's fault
// (requestfault.go): counted by kind, and a warning of what the engine
// refused and how to make it accept it, at most once a minute per engine
// and kind.
func (g *Gateway) refused(a *attempt) {
	name, f := a.c.rt.cfg.Name, a.fault
	if g.Hooks.RequestFault != nil {
		g.Hooks.RequestFault(name, string(f.kind))
	}
	level := zapcore.DebugLevel
	if g.faults.due(name, f.kind, g.clock.Now()) {
		level = zapcore.WarnLevel
	}
	if ce := g.log.Check(level, "the engine refused the request: the client hears it as a 400, the engine's breaker does not"); ce != nil {
		ce.Write(zap.String("engine", name), zap.String("kind", string(f.kind)), zap.String("refused", f.what), zap.String("fix", f.fix))
	}
}

// awaitFirstContent reads a fresh event stream up to its first content
// event, holding back comments and role-only chunks (bounded), so that a
// stream that fails before saying anything can still go elsewhere. This is
// what makes the commit point "first content", not "first byte".
func (g *Gateway) awaitFirstContent(a *attempt) {
	cfg := &a.c.rt.cfg
	st := &stream{events: sse.NewReader(a.resp.Body), gram: a.req.op.grammar()}
	a.stream = st
	g.startIdle(a)
	if d := time.Duration(cfg.FirstTokenTimeout); d > 0 {
		t := g.clock.AfterFunc(d, func() { a.cancel(errFirstTokenTimeout) })
		defer t.Stop()
	}
	for {
		ev, err := st.events.Next()
		a.idle.Touch()
		if err != nil {
			if err == io.EOF {
				return // an empty stream that ended cleanly: an answer, commit it
			}
			a.broke(err)
			return
		}
		e := st.gram.Scan(ev, true) // the one read of this event: commit reads it no more
		switch e.Kind {
		case grammar.Malformed:
			g.droppedEvent(a)
			continue
		case grammar.ErrorEvent:
			a.outcome, a.err = outcomeStreamError, errors.New(strings.TrimSpace(string(ev)))
			a.errBody = append([]byte(nil), ev...)
			return
		case grammar.Comment, grammar.Preamble:
			st.hold(ev, &e)
			if len(st.held) < maxHeld {
				continue
			}
			return // enough held: commit
		}
		st.hold(ev, &e)
		return // content or [DONE]: commit
	}
}

// startIdle arms the attempt's stream-idle budget.
func (g *Gateway) startIdle(a *attempt) {
	a.idle = idle.New(g.clock, time.Duration(a.c.rt.cfg.StreamIdleTimeout), func() { a.cancel(errStreamIdleTimeout) })
}
