package handler

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
)

// The final error: when no candidate gave an answer, the client gets the
// first upstream error as it was sent (the primary's, normally), or the
// first failure as an error of the gateway's own, with every attempt listed
// when there were several.

// maxListedAttempts bounds the attempts named in an error and in
// X-LLM-Attempts.
const maxListedAttempts = 12

// fail answers when no candidate gave an answer: with the first upstream
// error (the primary's, normally) as it was sent, or the first failure as an
// error of ours, with every attempt listed when there were several.
func (g *Gateway) fail(rp *reply, failed []failure) {
	first := failed[0].a
	for _, f := range failed {
		if f.a.outcome == outcomeStatus {
			first = f.a
			break
		}
	}
	for _, f := range failed {
		if f.a.outcome == outcomeRequestFault {
			first = f.a // the request's own fault is its answer
			break
		}
	}
	var labels []string
	if len(failed) > 1 {
		for i, f := range failed {
			if i == maxListedAttempts {
				labels = append(labels, fmt.Sprintf("… %d more", len(failed)-i))
				break
			}
			labels = append(labels, f.a.label(f.v))
		}
	}
	if first.outcome == outcomeStatus {
		g.passUpstreamError(rp, first, labels)
		return
	}
	e := first.failureError()
	if labels != nil {
		e.Message += " (attempts: " + strings.Join(labels, ", ") + ")"
	}
	if rp.preamble {
		rp.errorEvent(e)
		return
	}
	if labels != nil {
		rp.w.Header().Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	if first.outcome == outcomeBusy {
		rp.w.Header().Set("Retry-After", strconv.Itoa(int(first.busyRetryAfter()/time.Second)))
	}
	rp.firstByte(e.Status)
	e.WriteAs(rp.w, rp.api)
}

// busyRetryAfter is when a request refused by an engine's max_concurrent may
// come back: the engine's estimate, else a second.
func (a *attempt) busyRetryAfter() time.Duration {
	var busy *engines.BusyError
	if errors.As(a.err, &busy) && busy.RetryAfter >= time.Second {
		return busy.RetryAfter
	}
	return time.Second
}

// passUpstreamError sends an upstream's error answer: status, headers and
// body as the upstream sent them, except that the attempts, when there were
// several, are added to the error's message.
func (g *Gateway) passUpstreamError(rp *reply, a *attempt, labels []string) {
	body := a.errBody
	if labels != nil {
		body = apierror.WithAttempts(body, strings.Join(labels, ", "))
	}
	if rp.preamble {
		rp.errorEvent(&apierror.Error{Status: a.resp.StatusCode, Type: apierror.TypeUpstream, Code: "upstream_error", Message: apierror.UpstreamMessage(body)})
		return
	}
	h := rp.w.Header()
	upstream.CopyHeader(h, a.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-LLM-Engine", a.c.rt.cfg.Name)
	if labels != nil {
		h.Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	rp.firstByte(a.resp.StatusCode)
	rp.w.WriteHeader(a.resp.StatusCode)
	_, _ = rp.w.Write(body)
}

// failureError is the error made for a failed attempt that has no upstream
// answer to pass on.
func (a *attempt) failureError() *apierror.Error {
	name := a.c.rt.cfg.Name
	switch a.outcome {
	case outcomeConnect:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_unreachable", Message: fmt.Sprintf("engine %s could not be reached: %s", name, connectReason(a.err))}
	case outcomeDNS:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_dns", Message: fmt.Sprintf("engine %s: its host did not resolve: %s", name, rootCause(a.err))}
	case outcomeClosed:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_closed", Message: fmt.Sprintf("engine %s closed the connection before answering: %s", name, rootCause(a.err))}
	case outcomeTimeout:
		return &apierror.Error{Status: http.StatusGatewayTimeout, Type: apierror.TypeTimeout, Code: "upstream_timeout", Message: fmt.Sprintf("engine %s did not answer within its %s of %s", name, a.timeout, a.timeoutLength())}
	case outcomeStreamError:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_stream_error", Message: fmt.Sprintf("engine %s answered with an error event: %s", name, a.err)}
	case outcomeStart:
		// never the engine's output: engines print their keys (vLLM's
		// --api-key); the output is in Caddy's log and the admin API
		reason := rootCause(a.err)
		var se *engines.StartError
		if errors.As(a.err, &se) {
			reason = se.Reason
		}
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_start_failed", Message: fmt.Sprintf("engine %s failed to start: %s; its output is in Caddy's log and at GET /llm_gateway/engines/%s on the admin API", name, reason, name)}
	case outcomeNotRunning:
		msg := fmt.Sprintf("engine %s is not running and wake is off for it; start it with POST /llm_gateway/engines/%s/start on Caddy's admin API", name, name)
		if !a.c.acquire || a.c.rt.cfg.ModelsFrom != "" {
			msg = a.err.Error()
		}
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_not_running", Message: msg}
	case outcomeOpen:
		if !a.c.rt.eng.Healthy() {
			return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_down", Message: fmt.Sprintf("engine %s is down: it failed its health checks (GET %s); requests go elsewhere until it passes them", name, a.c.rt.cfg.HealthPath)}
		}
		b := a.c.breaker(a.sent)
		what := "engine " + name
		if a.c.brk == nil && b != a.c.rt.eng.Breaker() {
			what += " (model " + a.sent + ")"
		}
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_circuit_open", Message: fmt.Sprintf("%s failed %d times in a row; its breaker keeps requests away for another %s",
			what, a.c.rt.cfg.BreakerFailures, b.RetryIn().Round(time.Second))}
	case outcomeMedia:
		return a.mediaError()
	case outcomeUntranslatable:
		return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "untranslatable", Message: fmt.Sprintf("engine %s speaks %s, and the request cannot be translated into it: %s", name, a.tr.via, rootCause(a.err))}
	case outcomeAuth:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_credentials", Message: fmt.Sprintf("engine %s (provider %s): no credentials could be had for it: %s", name, a.c.rt.cfg.ProviderName(), rootCause(a.err))}
	case outcomeBadAnswer:
		return &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_bad_answer", Message: fmt.Sprintf("engine %s answered in a shape its API (%s) does not have: %s", name, a.tr.via, rootCause(a.err))}
	case outcomeRequestFault:
		return &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: a.fault.kind.code(),
			Message: fmt.Sprintf("engine %s refused the request: %s; to have it accepted, %s", name, a.fault.what, a.fault.fix)}
	case outcomeSlow:
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_starting", Message: fmt.Sprintf("engine %s was still starting after %s", name, a.waited.Round(time.Millisecond))}
	case outcomeBusy:
		msg := fmt.Sprintf("engine %s is busy: the request waited %s in its queue", name, a.waited.Round(time.Millisecond))
		if a.err != nil {
			msg = a.err.Error()
		}
		// the scheduler found no room for its start: the box is full, not
		// the caller too fast
		if busy := (*engines.BusyError)(nil); errors.As(a.err, &busy) && busy.Room() {
			return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "engine_busy", Message: msg + "; retry later"}
		}
		return &apierror.Error{Status: http.StatusTooManyRequests, Type: apierror.TypeRateLimit, Code: "engine_busy", Message: msg + "; retry later"}
	}
	return &apierror.Error{Status: 499, Type: apierror.TypeInvalidRequest, Code: "client_closed_request", Message: "the client went away"}
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
