package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
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
	c       candidate
	req     *request
	outcome outcome
	resp    *http.Response
	err     error
	timeout error  // which budget ran out
	sent    string // the model sent upstream
	ticket  ticket // what the breakers allowed
	lease   *engines.Lease
	ctx     context.Context
	cancel  context.CancelCauseFunc
	idle    *watchdog
	errBody []byte        // an error answer's body, kept to pass on
	waited  time.Duration // a slow start: how long the request waited
	silence time.Duration // from sending to a failure without an answer
	stream  *stream       // an event stream read up to its first content
	index   int           // the candidate's position in the plan walked
}

// judgement is what the verdict table needs of this attempt.
func (a *attempt) judgement(now time.Time) judgement {
	j := judgement{outcome: a.outcome, silence: a.silence}
	if a.outcome == outcomeStatus {
		j.status = a.resp.StatusCode
		j.retryAfter = retryAfter(a.resp.Header, now)
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
		a.idle.stop()
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
	a := &attempt{c: c, req: req, sent: req.model}
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
	up := newUpstreamRequest(ctx, req.r, base, cfg, body)

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

// mayWakeNode decides for a models_from node whose model is unloaded: with
// wake off the request does not go (the gateway never makes a node load a
// model then); with wake on it goes, and the node counts as loading the
// model from now on, so that the next requests wait for it rather than
// wake another node.
func (g *Gateway) mayWakeNode(ctx context.Context, a *attempt) bool {
	rt := a.c.rt
	if g.nodeState(g.fleet(ctx), rt, a.sent) != nodeUnloaded {
		return true
	}
	if !rt.wake {
		a.outcome = outcomeNotRunning
		a.err = fmt.Errorf("model %s is not loaded on engine %s and wake is off for it: the gateway does not make a node load a model", a.sent, rt.cfg.Name)
		return false
	}
	g.wakeNode(rt, a.sent)
	return true
}

// borrow takes a place on a fallback, which is used only if it is up: never
// started or leased, but its max_concurrent holds. It reports whether a
// holds the place.
func (a *attempt) borrow() bool {
	l, err := a.c.rt.eng.Borrow()
	switch {
	case err != nil:
		a.outcome, a.err = outcomeBusy, err
	case l == nil:
		a.outcome = outcomeNotRunning
		a.err = fmt.Errorf("fallback engine %s is not running (the gateway never starts a fallback)", a.c.rt.cfg.Name)
	default:
		a.lease = l
		return true
	}
	return false
}

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

// awaitFirstContent reads a fresh event stream up to its first content
// event, holding back comments and role-only chunks (bounded), so that a
// stream that fails before saying anything can still go elsewhere. This is
// what makes the commit point "first content", not "first byte".
func (g *Gateway) awaitFirstContent(a *attempt) {
	cfg := &a.c.rt.cfg
	st := &stream{events: sse.NewReader(a.resp.Body), rule: endRule(a.req)}
	a.stream = st
	g.startIdle(a)
	if d := time.Duration(cfg.FirstTokenTimeout); d > 0 {
		t := g.clock.AfterFunc(d, func() { a.cancel(errFirstTokenTimeout) })
		defer t.Stop()
	}
	for {
		ev, err := st.events.Next()
		a.idle.touch()
		if err != nil {
			if err == io.EOF {
				return // an empty stream that ended cleanly: an answer, commit it
			}
			a.broke(err)
			return
		}
		kind := classifyEvent(ev, true)
		if a.req.api == apiAnthropic {
			kind = classifyAnthropic(ev)
		}
		switch kind {
		case eventMalformed:
			g.droppedEvent(a)
			continue
		case eventError:
			a.outcome, a.err = outcomeStreamError, errors.New(strings.TrimSpace(string(ev)))
			a.errBody = append([]byte(nil), ev...)
			return
		case eventComment, eventPreamble:
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

// failureError is the error made for a failed attempt that has no upstream
// answer to pass on.
func (a *attempt) failureError() *Error {
	name := a.c.rt.cfg.Name
	switch a.outcome {
	case outcomeConnect:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_unreachable",
			fmt.Sprintf("engine %s could not be reached: %s", name, connectReason(a.err))}
	case outcomeDNS:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_dns",
			fmt.Sprintf("engine %s: its host did not resolve: %s", name, rootCause(a.err))}
	case outcomeClosed:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_closed",
			fmt.Sprintf("engine %s closed the connection before answering: %s", name, rootCause(a.err))}
	case outcomeTimeout:
		return &Error{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout",
			fmt.Sprintf("engine %s did not answer within its %s of %s", name, a.timeout, a.budget())}
	case outcomeStreamError:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_stream_error",
			fmt.Sprintf("engine %s answered with an error event: %s", name, a.err)}
	case outcomeStart:
		// never the engine's output: engines print their keys (vLLM's
		// --api-key); the output is in Caddy's log and the admin API
		reason := rootCause(a.err)
		var se *engines.StartError
		if errors.As(a.err, &se) {
			reason = se.Reason
		}
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_start_failed",
			fmt.Sprintf("engine %s failed to start: %s; its output is in Caddy's log and at GET /llm_gateway/engines/%s on the admin API", name, reason, name)}
	case outcomeNotRunning:
		msg := fmt.Sprintf("engine %s is not running and wake is off for it; start it with POST /llm_gateway/engines/%s/start on Caddy's admin API", name, name)
		if !a.c.acquire || a.c.rt.cfg.ModelsFrom != "" {
			msg = a.err.Error()
		}
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_not_running", msg}
	case outcomeOpen:
		if !a.c.rt.eng.Healthy() {
			return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_down",
				fmt.Sprintf("engine %s is down: it failed its health checks (GET %s); requests go elsewhere until it passes them", name, a.c.rt.cfg.HealthPath)}
		}
		b := a.c.breaker(a.sent)
		what := "engine " + name
		if a.c.brk == nil && b != a.c.rt.eng.Breaker() {
			what += " (model " + a.sent + ")"
		}
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_circuit_open",
			fmt.Sprintf("%s failed %d times in a row; its breaker keeps requests away for another %s",
				what, a.c.rt.cfg.BreakerFailures, b.RetryIn().Round(time.Second))}
	case outcomeSlow:
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_starting",
			fmt.Sprintf("engine %s was still starting after %s", name, a.waited.Round(time.Millisecond))}
	case outcomeBusy:
		msg := fmt.Sprintf("engine %s is busy: the request waited %s in its queue", name, a.waited.Round(time.Millisecond))
		if a.err != nil {
			msg = a.err.Error()
		}
		return &Error{http.StatusTooManyRequests, typeRateLimit, "engine_busy", msg + "; retry later"}
	}
	return &Error{499, typeInvalidRequest, "client_closed_request", "the client went away"}
}

// connectReason is why a connection failed, without the address (an
// internal one is none of the client's business).
func connectReason(err error) string {
	if r := tlsReason(err); r != "" {
		return r
	}
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused; check that it is running"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable; check that it is running"
	case isTimeout(err):
		return "dial timeout; check that it is running"
	}
	return "connection failed; check that it is running"
}

// tlsReason says why a TLS handshake with the engine failed, naming the
// transport option that fixes it (issue 16), or "" for another error.
func tlsReason(err error) string {
	var unknownCA x509.UnknownAuthorityError
	var badName x509.HostnameError
	var verify *tls.CertificateVerificationError
	var alert tls.AlertError
	var header tls.RecordHeaderError
	switch {
	case errors.As(err, &unknownCA):
		return "TLS handshake failed: its certificate is signed by an authority the gateway does not trust (trust it with transport http { tls_trust_pool file <ca.pem> })"
	case errors.As(err, &badName):
		return "TLS handshake failed: its certificate is not valid for the name in 'to' (transport http { tls_server_name <name> } sets the name to check)"
	case errors.As(err, &verify):
		return "TLS handshake failed: its certificate did not verify: " + rootCause(verify.Err)
	case errors.As(err, &alert):
		return "TLS handshake failed: the engine refused it (" + rootCause(alert) + ")"
	case errors.As(err, &header):
		return "TLS handshake failed: the engine does not speak TLS on that port"
	}
	return ""
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

// rootCause strips the layers Go's net/http and Caddy wrap around a network
// error, for a message that reads well.
func rootCause(err error) string {
	if err == nil {
		return "unknown error"
	}
	for {
		u := errors.Unwrap(err)
		if u == nil {
			break
		}
		err = u
	}
	s := err.Error()
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		s = "connection closed"
	}
	return strings.TrimSpace(s)
}
