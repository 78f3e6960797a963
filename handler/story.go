package handler

import (
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// A request's story: every upstream attempt it made, in order, with the
// verdict that moved it on. The caddy module reads it from Result when the
// request ends (the stream's last byte) to write the history and the
// OpenTelemetry spans; the core's one hook is tell, called where a verdict
// is known.

// Try is one upstream attempt of a request.
type Try struct {
	Engine  string        // the candidate's engine
	Model   string        // the model it was sent
	Address string        // the engine's host:port, once it was leased
	Start   time.Time     // when the attempt began (before any wait)
	End     time.Time     // its verdict; for the answer, the answer's last byte
	Waited  time.Duration // waiting for the engine: its start or a queue place
	Status  int           // the upstream's status, 0 without one
	Reason  string        // the verdict: ok, connect, 503, timeout, slow, busy…
	Scope   string        // whose health a failure speaks of: engine, model or ""
	Resume  bool          // it continued a stream cut on the try before
}

// maxTries bounds a story: max_attempts bounds the upstream calls, but
// waits that never reach an engine (open breakers, busy queues) add tries.
const maxTries = 32

// tell adds a's verdict to the request's story.
func (res *Result) tell(a *attempt, v verdict, now time.Time, resume bool) {
	if len(res.Tries) >= maxTries {
		return
	}
	t := Try{Engine: a.c.rt.cfg.Name, Model: a.sent, Start: a.started, End: now, Reason: v.reason, Resume: resume}
	if !a.leasedAt.IsZero() {
		t.Waited = a.leasedAt.Sub(a.started)
	} else if a.waited > 0 {
		t.Waited = a.waited
	}
	if a.lease != nil {
		t.Address = a.lease.Base().Host
	}
	if a.resp != nil {
		t.Status = a.resp.StatusCode
	}
	switch v.scope {
	case scopeEngine:
		t.Scope = "engine"
	case scopeModel:
		t.Scope = "model"
	}
	res.Tries = append(res.Tries, t)
}

// ended closes the story when the request ends: the answer's try lasted
// until its last byte.
func (res *Result) ended(now time.Time) {
	if n := len(res.Tries); n > 0 && res.Tries[n-1].Reason == "ok" {
		res.Tries[n-1].End = now
	}
}

// Usage is the token count an answer reports (internal/grammar reads it).
type Usage = grammar.Usage
