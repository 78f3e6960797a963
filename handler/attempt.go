package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/idle"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/retry"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"

	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// maxErrorBody bounds the first upstream error body of a request, kept to
// pass on whole if nothing answers; maxLaterErrorBody bounds the others,
// which only lend the attempt list a message.
const (
	maxErrorBody      = 1 << 20
	maxLaterErrorBody = 4 << 10
)

// maxHeld bounds the events held back before the first content event.
const maxHeld = 64 << 10

// attempt is one try of one candidate: its lease, its response, its time
// budgets, and how to let go of all of them. An event stream's state, once
// the attempt has one, is the relay's (stream, in relay.go).
type attempt struct {
	c        candidate
	req      *request
	outcome  outcome
	resp     *http.Response
	err      error
	timeout  error  // which budget ran out
	sent     string // the model sent upstream
	ticket   ticket // what the breakers allowed
	lease    *engines.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	idle     *idle.Watchdog
	errBody  []byte        // an error answer's body, kept to pass on
	waited   time.Duration // a slow start: how long the request waited
	silence  time.Duration // from sending to a failure without an answer
	stream   *stream       // an event stream read up to its first content
	index    int           // the candidate's position in the plan walked
	started  time.Time     // when the attempt began
	leasedAt time.Time     // when it got its lease (after any wait)
}

// judgement is what the verdict table needs of this attempt.
func (a *attempt) judgement(now time.Time) judgement {
	j := judgement{outcome: a.outcome, silence: a.silence}
	if a.outcome == outcomeStatus {
		j.status = a.resp.StatusCode
		j.retryAfter = retry.After(a.resp.Header, now)
	}
	return j
}

// policy is the engine's part of the verdict table.
func (c *candidate) policy() policy {
	cfg := &c.rt.cfg
	return policy{retryAfterMax: time.Duration(cfg.RetryAfterMax), hangupGrace: time.Duration(cfg.HangupGrace)}
}

// label is the attempt as listed in errors: engine=503, engine=connect, …
func (a *attempt) label(v verdict) string {
	return a.c.name() + "=" + v.reason
}

// close releases everything the attempt holds. Safe to call twice.
func (a *attempt) close() {
	if a.idle != nil {
		a.idle.Stop()
	}
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.stream != nil {
		a.stream.events.Release()
	}
	if a.cancel != nil {
		a.cancel(context.Canceled)
	}
	if a.lease != nil {
		a.lease.Release()
	}
}

var (
	errHeaderTimeout     = errors.New("header_timeout")
	errRequestTimeout    = errors.New("request_timeout")
	errFirstTokenTimeout = errors.New("first_token_timeout")
	errStreamIdleTimeout = errors.New("stream_idle_timeout")
)

// try makes one attempt of c: ask its breakers, get a base URL (leasing and
// starting the engine when c.acquire, waiting at most fallback_after when
// c.slow could take over), send the request through the engine's transport,
// and for an event stream read up to the first content event. Nothing but
// SSE comments reaches the client here. The breakers hear the verdict in
// the loop, through the attempt's ticket.
func (g *Gateway) try(rp *reply, req *request, c candidate) *attempt {
	a := &attempt{c: c, req: req, sent: req.model, started: g.clock.Now()}
	if c.model != "" {
		a.sent = c.model
	}
	t, ok := c.admit(a.sent)
	a.ticket = t
	if !ok {
		a.outcome = outcomeOpen
		return a
	}
	g.send(rp, req, a)
	return a
}

func (g *Gateway) send(rp *reply, req *request, a *attempt) {
	c := a.c
	cfg := &c.rt.cfg
	ctx := req.r.Context()
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
	base := a.lease.Base()

	ctx, a.cancel = context.WithCancelCause(ctx)
	a.ctx = ctx
	if d := time.Duration(cfg.RequestTimeout); d > 0 {
		t := g.clock.AfterFunc(d, func() { a.cancel(errRequestTimeout) })
		context.AfterFunc(ctx, func() { t.Stop() })
	}

	body := req.bodyFor(a.sent)
	if fs := c.rt.filters; len(fs) > 0 && req.json() {
		body = jsonmember.ApplyFilters(body, fs)
	}
	body = g.warmSlot(req, a, body) // slots save: the session's slot (warmswap.go)
	up := upstream.NewRequest(ctx, req.r, base, cfg, body)

	sentAt := g.clock.Now()
	rp.during(func() {
		header := g.clock.AfterFunc(time.Duration(cfg.HeaderTimeout), func() { a.cancel(errHeaderTimeout) })
		a.resp, a.err = c.rt.eng.Transport().RoundTrip(up)
		header.Stop()
		a.outcome = classify(ctx, a.resp, a.err)
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
		if !req.keptError {
			limit, req.keptError = maxErrorBody, true
		}
		a.errBody, _ = io.ReadAll(io.LimitReader(resp.Body, limit))
		resp.Body.Close()
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

// awaitFirstContent reads a fresh event stream up to its first content
// event, holding back comments and role-only chunks (bounded), so that a
// stream that fails before saying anything can still go elsewhere. This is
// what makes the commit point "first content", not "first byte".
func (g *Gateway) awaitFirstContent(a *attempt) {
	cfg := &a.c.rt.cfg
	st := &stream{events: sse.NewReader(a.resp.Body), rule: grammar.EndRule(a.req.r.URL.Path)}
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
		kind := grammar.Classify(ev, true)
		if a.req.api == apierror.Anthropic {
			kind = grammar.ClassifyAnthropic(ev)
		}
		switch kind {
		case grammar.Malformed:
			g.droppedEvent(a)
			continue
		case grammar.ErrorEvent:
			a.outcome, a.err = outcomeStreamError, errors.New(strings.TrimSpace(string(ev)))
			a.errBody = append([]byte(nil), ev...)
			return
		case grammar.Comment, grammar.Preamble:
			st.held = append(st.held, ev...)
			if len(st.held) < maxHeld {
				continue
			}
			return // enough held: commit
		}
		st.held = append(st.held, ev...)
		return // content or [DONE]: commit
	}
}

// broke classifies a stream that broke: why its read failed.
func (a *attempt) broke(err error) {
	a.err = err
	switch cause := context.Cause(a.ctx); {
	case cause == errFirstTokenTimeout || cause == errStreamIdleTimeout || cause == errRequestTimeout:
		a.outcome, a.timeout = outcomeTimeout, cause
	case a.ctx.Err() != nil && cause == context.Canceled:
		a.outcome = outcomeCanceled
	default:
		a.outcome = outcomeClosed
	}
}

// classify is the one place that decides what a round trip's result means.
func classify(ctx context.Context, resp *http.Response, err error) outcome {
	if cause := context.Cause(ctx); cause == errHeaderTimeout || cause == errRequestTimeout {
		return outcomeTimeout
	}
	if err != nil {
		if ctx.Err() != nil {
			return outcomeCanceled
		}
		return classifyError(err)
	}
	if resp.StatusCode >= 400 {
		return outcomeStatus
	}
	return outcomeGood
}

func classifyError(err error) outcome {
	var dnsErr *net.DNSError
	if errors.As(err, &dnsErr) {
		return outcomeDNS
	}
	var dialErr reverseproxy.DialError
	if errors.As(err, &dialErr) {
		// Caddy's DialError hides the *net.DNSError it wraps (it has no
		// Unwrap); a failed lookup still says so in its text
		if strings.Contains(dialErr.Error(), "lookup ") {
			return outcomeDNS
		}
		return outcomeConnect
	}
	var opErr *net.OpError
	if errors.As(err, &opErr) && opErr.Op == "dial" {
		return outcomeConnect
	}
	if errors.Is(err, context.DeadlineExceeded) || isTimeout(err) {
		return outcomeTimeout
	}
	if errors.Is(err, syscall.ECONNREFUSED) || tlsReason(err) != "" {
		return outcomeConnect
	}
	// EOF, reset, "server closed idle connection": the engine accepted the
	// connection and hung up before any response headers
	return outcomeClosed
}

func isTimeout(err error) bool {
	var t interface{ Timeout() bool }
	return errors.As(err, &t) && t.Timeout()
}

// contextTooLong reports whether a is a 400 saying the prompt does not fit
// the model's context: OpenAI's code, or the wording of llama.cpp, vLLM and
// others.
func (a *attempt) contextTooLong() bool {
	if a.outcome != outcomeStatus || a.resp.StatusCode != 400 {
		return false
	}
	body := strings.ToLower(string(a.errBody))
	for _, s := range []string{"context_length_exceeded", "maximum context length", "context length",
		"context window", "exceeds the available context", "prompt is too long", "too many tokens"} {
		if strings.Contains(body, s) {
			return true
		}
	}
	return false
}

// budget is the length of the budget that ran out.
func (a *attempt) budget() time.Duration {
	cfg := &a.c.rt.cfg
	switch a.timeout {
	case errRequestTimeout:
		return time.Duration(cfg.RequestTimeout)
	case errFirstTokenTimeout:
		return time.Duration(cfg.FirstTokenTimeout)
	case errStreamIdleTimeout:
		return time.Duration(cfg.StreamIdleTimeout)
	}
	return time.Duration(cfg.HeaderTimeout)
}

// startIdle arms the attempt's stream-idle budget.
func (g *Gateway) startIdle(a *attempt) {
	a.idle = idle.New(g.clock, time.Duration(a.c.rt.cfg.StreamIdleTimeout), func() { a.cancel(errStreamIdleTimeout) })
}
