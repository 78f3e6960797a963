package handler

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// candidate is one way to serve a request: an engine and the model to send it.
type candidate struct {
	rt    *route
	model string // the body's model is rewritten to this; "" leaves it alone
}

// plan is the ordered list of candidates a request may be served by.
// Later issues add fallbacks, pool members and body fallbacks here; the loop
// that walks it does not change.
func (g *Gateway) plan(req *request, rt *route) []candidate {
	return []candidate{{rt: rt, model: rt.cfg.ModelName}}
}

// outcome is the verdict on one attempt, decided in one place (classify).
type outcome int

const (
	outcomeGood       outcome = iota // a response to give the client
	outcomeConnect                   // could not connect (refused, unreachable, TLS)
	outcomeDNS                       // the engine's host did not resolve
	outcomeClosed                    // connected, closed before response headers
	outcomeTimeout                   // header or request budget ran out
	outcomeStatus                    // the engine answered an error status
	outcomeStart                     // the engine could not be started
	outcomeNotRunning                // stopped, and wake is off
	outcomeCanceled                  // the client went away
)

// attempt is one try of one candidate: its lease, its response, and how to
// let go of both.
type attempt struct {
	c       candidate
	outcome outcome
	resp    *http.Response
	err     error
	timeout error  // which budget ran out: errHeaderTimeout or errRequestTimeout
	sent    string // the model sent upstream
	lease   *engines.Lease
	cancel  context.CancelCauseFunc
	started time.Time
}

// label is the attempt as listed in errors: engine=503, engine=connect, …
func (a *attempt) label() string {
	name := a.c.rt.cfg.Name
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
	case outcomeStart:
		return name + "=start"
	case outcomeNotRunning:
		return name + "=stopped"
	}
	return name + "=canceled"
}

// close releases everything the attempt holds. Safe to call twice.
func (a *attempt) close() {
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.cancel != nil {
		a.cancel(context.Canceled)
	}
	if a.lease != nil {
		a.lease.Release()
	}
}

var (
	errHeaderTimeout  = errors.New("header_timeout")
	errRequestTimeout = errors.New("request_timeout")
)

// try makes one attempt: lease the engine (starting it if allowed), send the
// request through the engine's transport, and classify what came back.
// Nothing is written to the client here.
func (g *Gateway) try(req *request, c candidate) *attempt {
	a := &attempt{c: c, started: time.Now()}
	cfg := &c.rt.cfg
	ctx := req.r.Context()

	lease, err := c.rt.eng.Acquire(ctx, c.rt.wake)
	if err != nil {
		a.err = err
		switch {
		case ctx.Err() != nil:
			a.outcome = outcomeCanceled
		case errors.Is(err, engines.ErrNotRunning):
			a.outcome = outcomeNotRunning
		default:
			a.outcome = outcomeStart
		}
		return a
	}
	a.lease = lease

	ctx, a.cancel = context.WithCancelCause(ctx)
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
	up := newUpstreamRequest(ctx, req.r, lease.Base(), cfg, body)

	headerTimer := time.AfterFunc(time.Duration(cfg.HeaderTimeout), func() { a.cancel(errHeaderTimeout) })
	resp, err := c.rt.eng.Transport().RoundTrip(up)
	headerTimer.Stop()
	a.resp, a.err = resp, err
	a.outcome = classify(ctx, resp, err)
	if a.outcome == outcomeTimeout {
		a.timeout = context.Cause(ctx)
	}
	if a.outcome != outcomeGood && a.outcome != outcomeStatus && resp != nil {
		resp.Body.Close()
		a.resp = nil
	}
	return a
}

// classify is the one place that decides what an attempt's result means.
func classify(ctx context.Context, resp *http.Response, err error) outcome {
	if cause := context.Cause(ctx); cause != nil && cause != context.Canceled {
		if cause == errHeaderTimeout || cause == errRequestTimeout {
			return outcomeTimeout
		}
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

// retryable reports whether another candidate may be tried after a: the
// engine was unreachable, hung up, timed out, could not start, or answered a
// status that says "try elsewhere". 400/422 are the caller's to fix and are
// never retried.
func (a *attempt) retryable() bool {
	switch a.outcome {
	case outcomeConnect, outcomeDNS, outcomeClosed, outcomeTimeout, outcomeStart, outcomeNotRunning:
		return true
	case outcomeStatus:
		switch a.resp.StatusCode {
		case 401, 403, 404, 408, 429, 500, 502, 503, 504:
			return true
		}
	}
	return false
}

// failureError is the error made for a failed attempt that has no upstream
// response to pass on.
func (a *attempt) failureError() *Error {
	name := a.c.rt.cfg.Name
	switch a.outcome {
	case outcomeConnect:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_unreachable",
			fmt.Sprintf("engine %s could not be reached at %s: %s; check that it is running", name, a.c.rt.cfg.To, rootCause(a.err))}
	case outcomeDNS:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_dns",
			fmt.Sprintf("engine %s: its host did not resolve: %s", name, rootCause(a.err))}
	case outcomeClosed:
		return &Error{http.StatusBadGateway, typeUpstream, "upstream_closed",
			fmt.Sprintf("engine %s closed the connection before answering: %s", name, rootCause(a.err))}
	case outcomeTimeout:
		budget, d := "header_timeout", a.c.rt.cfg.HeaderTimeout
		if a.timeout == errRequestTimeout {
			budget, d = "request_timeout", a.c.rt.cfg.RequestTimeout
		}
		return &Error{http.StatusGatewayTimeout, typeTimeout, "upstream_timeout",
			fmt.Sprintf("engine %s did not answer within its %s of %s", name, budget, time.Duration(d))}
	case outcomeStart:
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_start_failed", a.err.Error()}
	case outcomeNotRunning:
		return &Error{http.StatusServiceUnavailable, typeUnavailable, "engine_not_running",
			fmt.Sprintf("engine %s is not running and wake is off for it; start it with POST /llm_gateway/engines/%s/start on Caddy's admin API", name, name)}
	}
	return &Error{499, typeInvalidRequest, "client_closed_request", "the client went away"}
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
