package handler

import (
	"time"
)

// A request's story: every upstream attempt it made, in order, with the
// verdict that moved it on. The caddy module reads it from Result when the
// request ends (the stream's last byte) to write the history and the
// OpenTelemetry spans; the core's one hook is tell, called where a verdict
// is known (judged).

// maxTries bounds a story: max_attempts bounds the upstream calls, but
// waits that never reach an engine (open breakers, busy queues) add tries.
const maxTries = 32

// judged judges an attempt that ended, the one way every attempt is judged
// (the walk's, one of a race that ends beside it, a resume's): by the
// verdict table (verdict.go), then the breakers that let it through hear
// the verdict, then the request's story tells it. The planner books it
// (decide, record); a resume books its own.
func judged(res *Result, a *attempt) verdict {
	v := judge(a.judgement(), a.c.policy())
	a.pass.apply(v)
	if a.c.rt.provider != nil {
		// a provider's engine's state is its answers (engines/answers.go)
		if ans, ok := a.answer(v); ok {
			a.c.rt.eng.Answered(ans)
		}
	}
	res.tell(a, v)
	return v
}

// tell adds a's verdict to the request's story.
func (res *Result) tell(a *attempt, v verdict) {
	if len(res.Tries) >= maxTries {
		return
	}
	t := Try{Engine: a.c.rt.cfg.Name, Model: a.sent, Start: a.started, End: a.ended, Reason: v.reason, Resume: a.resume, Hedge: a.hedge}
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

// cutShort tells that the answer was cut (why, Result.Cut) after relayed
// bytes of it; the first cut is the one told.
func (res *Result) cutShort(why string, relayed int64) {
	if res.Cut == "" {
		res.Cut, res.Relayed = why, relayed
	}
}

// cutReason is why a's committed answer broke, as Result.Cut says it.
func (a *attempt) cutReason() string {
	if a.outcome == outcomeTimeout && a.timeout != nil {
		return a.timeout.Error()
	}
	return "closed"
}

// ended closes the story when the request ends: the answer's try lasted
// until its last byte.
func (res *Result) ended(now time.Time) {
	for i := len(res.Tries) - 1; i >= 0; i-- {
		switch res.Tries[i].Reason {
		case "ok":
			res.Tries[i].End = now
			return
		case "lost": // a hedge's loser, told after the answer (race.go)
			continue
		}
		return
	}
}
