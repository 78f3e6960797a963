package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// outcome is the verdict on one attempt, decided in one place (classify and
// the first-token read) and acted on by the loop.
type outcome int

const (
	outcomeGood        outcome = iota // an answer to commit
	outcomeConnect                    // could not connect (refused, unreachable, TLS)
	outcomeDNS                        // the engine's host did not resolve
	outcomeClosed                     // connected, then hung up before an answer
	outcomeTimeout                    // a time budget ran out before any content
	outcomeStatus                     // the engine answered an error status
	outcomeStreamError                // the stream's first event was an error
	outcomeStart                      // the engine could not be started
	outcomeNotRunning                 // stopped, and the gateway may not start it
	outcomeOpen                       // the engine's breaker is open
	outcomeSlow                       // still starting after fallback_after: switched
	outcomeCanceled                   // the client went away
)

// maxErrorBody bounds how much of an upstream's error body is kept to pass
// on when the request moves to another candidate.
const maxErrorBody = 1 << 20

// maxHeld bounds the events held back before the first content event.
const maxHeld = 64 << 10

// attempt is one try of one candidate: its lease, its response, and how to
// let go of both.
type attempt struct {
	c       candidate
	outcome outcome
	resp    *http.Response
	err     error
	timeout error  // which budget ran out
	sent    string // the model sent upstream
	trial   bool   // the breaker's trial request
	lease   *engines.Lease
	ctx     context.Context
	cancel  context.CancelCauseFunc
	timer   *time.Timer // the header budget
	idleT   atomic.Pointer[time.Timer]
	idle    time.Duration
	last    atomic.Int64 // when the last event arrived, in ns since t0
	t0      time.Time
	events  *sseReader // an event stream's reader, after the held events
	held    []byte     // events read before the first content event
	errBody []byte     // an error answer's body, kept to pass on
	waited  time.Duration
	index   int // the candidate's position in the plan
	req     *request
	tr      *transcript // what a resumable stream sent so far
	rewrite *rewriteIDs // a resumed stream's id and created
}

// label is the attempt as listed in errors: engine=503, engine=connect, …
func (a *attempt) label() string {
	name := a.c.name()
	switch a.outcome {
	case outcomeStatus, outcomeGood:
		return name + "=" + strconv.Itoa(a.resp.StatusCode)
	case outcomeConnect:
		return name + "=connect"
	case outcomeDNS:
		return name + "=dns"
	case outcomeClosed:
		return name + "=closed"
	case outcomeTimeout:
		return name + "=timeout"
	case outcomeStreamError:
		return name + "=stream-error"
	case outcomeStart:
		return name + "=start"
	case outcomeNotRunning:
		return name + "=stopped"
	case outcomeOpen:
		return name + "=open"
	case outcomeSlow:
		return name + "=slow"
	}
	return name + "=canceled"
}

// close releases everything the attempt holds. Safe to call twice.
func (a *attempt) close() {
	if a.timer != nil {
		a.timer.Stop()
	}
	if t := a.idleT.Load(); t != nil {
		t.Stop()
	}
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.events != nil {
		a.events.release()
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

// try makes one attempt of c: check its breaker, get a base URL (leasing and
// starting the engine when c.acquire, waiting at most fallback_after when a
// fallback could take over), send the request through the engine's
// transport, and for an event stream read up to the first content event.
// Nothing but SSE comments reaches the client here.
func (g *Gateway) try(rp *reply, req *request, c candidate, fallback *route) *attempt {
	a := &attempt{c: c, req: req}
	brk := c.breaker()
	ok, trial := brk.Allow()
	if !ok {
		a.outcome = outcomeOpen
		return a
	}
	a.trial = trial
	g.send(rp, req, a, fallback)
	switch a.outcome {
	case outcomeGood:
		brk.Success()
	case outcomeConnect, outcomeDNS, outcomeClosed, outcomeTimeout, outcomeStreamError:
		brk.Failure()
	case outcomeStatus:
		switch a.resp.StatusCode {
		case 500, 502, 503, 504:
			brk.Failure()
		case 400, 422:
			brk.Success() // the engine is fine; the request is not
		default:
			brk.Abandon(trial)
		}
	default:
		brk.Abandon(trial)
	}
	return a
}

func (g *Gateway) send(rp *reply, req *request, a *attempt, fallback *route) {
	c := a.c
	cfg := &c.rt.cfg
	ctx := req.r.Context()

	var base *url.URL
	if c.acquire {
		if !g.lease(rp, req, a, fallback) {
			return
		}
		base = a.lease.Base()
	} else if base = c.rt.eng.Peek(); base == nil {
		a.outcome = outcomeNotRunning
		a.err = fmt.Errorf("fallback engine %s is not running (the gateway never starts a fallback)", cfg.Name)
		return
	}

	ctx, a.cancel = context.WithCancelCause(ctx)
	a.ctx = ctx
	if d := time.Duration(cfg.RequestTimeout); d > 0 {
		t := time.AfterFunc(d, func() { a.cancel(errRequestTimeout) })
		context.AfterFunc(ctx, func() { t.Stop() })
	}

	body := req.body
	a.sent = req.model
	if c.model != "" && c.model != req.model {
		body = applyEdits(req.body, replaceValue(req.fields.model, c.model))
		a.sent = c.model
	}
	up := newUpstreamRequest(ctx, req.r, base, cfg, body)

	a.timer = time.AfterFunc(time.Duration(cfg.HeaderTimeout), func() { a.cancel(errHeaderTimeout) })
	resp, err := c.rt.eng.Transport().RoundTrip(up)
	a.timer.Stop()
	a.resp, a.err = resp, err
	a.outcome = classify(ctx, resp, err)
	switch a.outcome {
	case outcomeGood:
		if isEventStream(resp.Header.Get("Content-Type")) {
			g.awaitFirstContent(a)
		}
	case outcomeStatus:
		a.errBody, _ = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
		resp.Body.Close()
	default:
		if resp != nil {
			resp.Body.Close()
			a.resp = nil
		}
	}
	if a.outcome == outcomeTimeout {
		a.timeout = context.Cause(ctx)
	}
}

// nextEvent reads the next event of the attempt's stream. The idle budget
// is kept lazily: reading an event only stores the time, and the timer,
// when it fires, re-arms itself for the rest of the gap, so a busy stream
// costs no timer operation per event.
func (a *attempt) nextEvent() ([]byte, error) {
	ev, err := a.events.next()
	a.touch()
	return ev, err
}

// touch restarts the idle budget.
func (a *attempt) touch() { a.last.Store(max(1, int64(time.Since(a.t0)))) }

// startIdleTimer arms the stream-idle budget.
func (a *attempt) startIdleTimer() {
	a.idle = time.Duration(a.c.rt.cfg.StreamIdleTimeout)
	a.t0 = time.Now()
	a.idleT.Store(time.AfterFunc(a.idle, a.idleCheck))
}

func (a *attempt) idleCheck() {
	last := a.last.Load()
	gap := time.Since(a.t0) - time.Duration(last)
	if last == 0 {
		// no event yet: the wait for the first one is first_token_timeout's
		gap = 0
	}
	if gap >= a.idle {
		a.cancel(errStreamIdleTimeout)
		return
	}
	if t := a.idleT.Load(); t != nil {
		t.Reset(a.idle - gap)
	}
}

// awaitFirstContent reads a fresh event stream up to its first content
// event, holding back comments and role-only chunks (bounded), so that a
// stream that fails before saying anything can still go elsewhere. This is
// what makes the commit point "first content", not "first byte".
func (g *Gateway) awaitFirstContent(a *attempt) {
	cfg := &a.c.rt.cfg
	a.events = newSSEReader(a.resp.Body)
	a.startIdleTimer()
	if d := time.Duration(cfg.FirstTokenTimeout); d > 0 {
		t := time.AfterFunc(d, func() { a.cancel(errFirstTokenTimeout) })
		defer t.Stop()
	}
	for {
		ev, err := a.nextEvent()
		if err != nil {
			if err == io.EOF {
				return // an empty stream that ended cleanly: an answer, commit it
			}
			a.fail(err)
			return
		}
		switch classifyEvent(ev, true) {
		case eventMalformed:
			g.droppedEvent(a)
			continue
		case eventError:
			a.outcome, a.err = outcomeStreamError, errors.New(strings.TrimSpace(string(ev)))
			a.errBody = append([]byte(nil), ev...)
			return
		case eventComment, eventPreamble:
			a.held = append(a.held, ev...)
			if len(a.held) < maxHeld {
				continue
			}
			return // enough held: commit
		}
		a.held = append(a.held, ev...)
		return // content or [DONE]: commit
	}
}

// fail classifies a stream that broke before its first content.
func (a *attempt) fail(err error) {
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
	if errors.Is(err, syscall.ECONNREFUSED) {
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

// movesOn reports whether the next candidate may be tried after a: the
// engine was unreachable, hung up, timed out, could not start, is guarded
// by its breaker, or answered a status that says "try elsewhere" (auth,
// model not found, rate limit, server errors). A 400 or 422 is the caller's
// to fix and goes back untouched (a context-too-long 400 has its own route).
func (a *attempt) movesOn() bool {
	switch a.outcome {
	case outcomeGood, outcomeCanceled:
		return false
	case outcomeStatus:
		switch a.resp.StatusCode {
		case 401, 403, 404, 408, 429, 500, 502, 503, 504:
			return true
		}
		return false
	}
	return true
}

// retryable reports whether a may be retried on the same engine: a
// transient failure (closed before headers, 429, 500, 502, 503, 504), with
// a Retry-After no longer than the engine's retry_after_max. A silent
// engine (timeouts) is not retried: that only multiplies the wait.
func (a *attempt) retryable() bool {
	switch a.outcome {
	case outcomeClosed:
		return true
	case outcomeStatus:
		switch a.resp.StatusCode {
		case 429, 500, 502, 503, 504:
			return a.retryAfter() <= time.Duration(a.c.rt.cfg.RetryAfterMax)
		}
	}
	return false
}

func (a *attempt) retryAfter() time.Duration {
	if a.resp == nil {
		return 0
	}
	return retryAfter(a.resp.Header, time.Now())
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
			fmt.Sprintf("engine %s could not be reached: %s; check that it is running", name, connectReason(a.err))}
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
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_start_failed", a.err.Error()}
	case outcomeNotRunning:
		msg := fmt.Sprintf("engine %s is not running and wake is off for it; start it with POST /llm_gateway/engines/%s/start on Caddy's admin API", name, name)
		if !a.c.acquire {
			msg = a.err.Error()
		}
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_not_running", msg}
	case outcomeOpen:
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_circuit_open",
			fmt.Sprintf("engine %s failed %d times in a row; its breaker keeps requests away for another %s",
				name, a.c.rt.cfg.BreakerFailures, a.c.breaker().RetryIn().Round(time.Second))}
	case outcomeSlow:
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_starting",
			fmt.Sprintf("engine %s was still starting after %s", name, a.waited.Round(time.Millisecond))}
	}
	return &Error{499, typeInvalidRequest, "client_closed_request", "the client went away"}
}

// connectReason is why a connection failed, without the address (an
// internal one is none of the client's business).
func connectReason(err error) string {
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return "connection refused"
	case errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH):
		return "host unreachable"
	case isTimeout(err):
		return "dial timeout"
	}
	return "connection failed"
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
