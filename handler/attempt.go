package handler

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/idle"
	"github.com/llmgateway/caddy-llm-gateway/internal/retry"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
	"github.com/llmgateway/caddy-llm-gateway/providers"
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
// the attempt has one, is the relay's (stream, in relay.go). The request
// is shared by every attempt of it; what an attempt has of its own is
// here, so that a race (race.go) runs its attempts side by side without
// copying the request.
type attempt struct {
	c   candidate
	req *request
	// parent is the context the attempt runs within: the request's, or a
	// race's own for this attempt, which abandon cancels when it loses
	parent  context.Context
	abandon context.CancelFunc
	// leased is set once the attempt holds a lease (past any wait for a
	// start): a race reads it while the attempt runs
	leased   atomic.Bool
	outcome  outcome
	resp     *http.Response
	err      error
	timeout  error       // which budget ran out
	sent     string      // the model sent upstream
	pass     breakerPass // what the breakers allowed
	lease    *engines.Lease
	ctx      context.Context
	cancel   context.CancelCauseFunc
	idle     *idle.Watchdog
	deadline clock.Timer        // request_timeout's, when set
	errBody  []byte             // an error answer's body, kept to pass on
	failure  *providers.Failure // an error answer as its provider reads it (providers.go)
	waited   time.Duration      // a slow start: how long the request waited
	silence  time.Duration      // from sending to a failure without an answer
	stream   *stream            // an event stream read up to its first content
	index    int                // the candidate's position in the plan walked
	started  time.Time          // when the attempt began
	leasedAt time.Time          // when it got its lease (after any wait)
	ended    time.Time          // when its try returned
	tr       translation        // an engine reading another API than the client's (translate.go)
	hedge    bool               // started beside an older attempt that had no content yet (race.go)
	resume   bool               // it continues a stream cut on the attempt before (resume.go)
	fault    *requestFault      // the engine's answer is the request's fault (requestfault.go)
	// lostUsage is what a JSON answer that lost a race reported (race.go)
	lostUsage api.Usage
	lostUsed  bool
}

// newAttempt is an attempt of c for req, begun at started, within ctx:
// the request's context, or a race's own for the attempt, which cancels
// it alone when it loses.
func (g *Gateway) newAttempt(req *request, c candidate, ctx context.Context, started time.Time) *attempt {
	a := &attempt{c: c, req: req, parent: ctx, sent: req.model, started: started}
	if c.model != "" {
		a.sent = c.model
	}
	return a
}

// judgement is what the verdict table needs of this attempt, as it was
// when it ended.
func (a *attempt) judgement() judgement {
	j := judgement{outcome: a.outcome, silence: a.silence}
	switch {
	case a.outcome != outcomeStatus:
	case a.failure != nil:
		j.status, j.retryAfter = a.failure.Status, a.failure.RetryAfter
	default:
		j.status = a.resp.StatusCode
		j.retryAfter = a.retryAfter(a.ended)
	}
	return j
}

// status is the status of a's error answer as the failure table reads it:
// its provider's reading (providers.go), else the answer's.
func (a *attempt) status() int {
	if a.failure != nil {
		return a.failure.Status
	}
	return a.resp.StatusCode
}

// sentBody is about what a's engine was sent, enough to say whether it
// had tools: the translated request, else the client's.
func (a *attempt) sentBody(req *request) []byte {
	if a.tr.body != nil {
		return a.tr.body
	}
	return req.body
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
	if a.deadline != nil {
		a.deadline.Stop()
	}
	if a.resp != nil {
		a.resp.Body.Close()
	}
	if a.stream != nil {
		a.stream.release()
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

// contextTooLong reports whether a's engine said the prompt does not fit
// the model's context: OpenAI's code, or the wording of llama.cpp, vLLM and
// others (requestfault.go).
func (a *attempt) contextTooLong() bool {
	return a.outcome == outcomeRequestFault && a.fault.kind == faultContext
}

// timeoutLength is the length of the timeout that ran out.
func (a *attempt) timeoutLength() time.Duration {
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

// failure is a failed attempt and its verdict, kept for the final error.
type failure struct {
	a *attempt
	v verdict
}

// respHeader is the attempt's response headers, if it has a response.
func (a *attempt) respHeader() http.Header {
	if a.resp == nil {
		return nil
	}
	return a.resp.Header
}

// answer is how the attempt ended, for its engine's state when that is its
// answers (a provider's): ok is false for an attempt that sent nothing (an
// open breaker, a full queue, the client gone), but one for which no
// credentials could be had, which is the provider failing.
func (a *attempt) answer(v verdict) (engines.Answer, bool) {
	if !v.attempt && a.outcome != outcomeAuth {
		return engines.Answer{}, false
	}
	ans := engines.Answer{At: a.ended, Reason: v.reason, Failed: v.effect != effectSuccess}
	if a.resp != nil {
		ans.Status = a.resp.StatusCode
	}
	return ans, true
}

// retryAfter is the wait before a retry the answer asked for: as its
// provider read it, else its Retry-After.
func (a *attempt) retryAfter(now time.Time) time.Duration {
	if a.failure != nil {
		return a.failure.RetryAfter
	}
	return retry.After(a.respHeader(), now)
}

// stream is an event stream's state, owned by the relay: the reader, the
// events held back before the first content, whether the answer said it is
// whole, and what a resumable stream has said so far.
type stream struct {
	events  *sse.Reader
	gram    grammar.Grammar  // how its events are read, and how it says it is whole
	held    []byte           // events read before the first content event
	whole   bool             // an event said the answer is complete
	seq     int              // a Responses stream's next sequence_number, after the events seen
	usage   api.Usage        // what the held events reported
	used    bool             // a held event reported usage
	tr      *transcript      // what a resumable stream sent so far
	rewrite *grammar.Rewrite // a resumed stream's id, created and usage
	// out holds the events of a rewritten stream between their read and
	// their write: pooled, so that a rewrite allocates nothing per event
	out *[]byte
	// carry is the completion tokens sent before this stream took over a
	// cut answer; textAtStart the transcript's length then
	carry, textAtStart int
}

// errEndedUnfinished is a stream whose connection ended at an event
// boundary before the answer said it was complete.
var errEndedUnfinished = errors.New("the stream ended before the answer was complete (no [DONE], no finish_reason)")

// see takes in what the one pass over an event (grammar.Scan) found:
// whether the answer says it is whole ([DONE], or the route's sign).
func (st *stream) see(e *grammar.Event) {
	st.whole = st.whole || e.Whole || e.Kind == grammar.Done
	if e.HasSeq {
		st.seq = e.Seq + 1
	}
}

// hold keeps an event read before the first content, with what its scan
// found, so that the commit writes the held events without reading them
// again.
func (st *stream) hold(ev []byte, e *grammar.Event) {
	st.held = append(st.held, ev...)
	st.see(e)
	if e.HasUsage {
		st.usage, st.used = st.usage.Update(e.Usage), true
	}
}

// ended reports whether a stream that reached the end of its body is a
// whole answer.
func (st *stream) ended() bool {
	return st.whole || st.gram.API.End() == api.EndConnection
}

// release gives the stream's buffers back.
func (st *stream) release() {
	st.events.Release()
	if st.out != nil {
		*st.out = (*st.out)[:0]
		outPool.Put(st.out)
		st.out = nil
	}
}

// outPool holds the buffers of rewritten streams.
var outPool = sync.Pool{New: func() any { b := make([]byte, 0, 1<<10); return &b }}

// tlsReason says why a TLS handshake with the engine failed, naming the
// transport option that fixes it, or "" for another error.
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
