package handler

import (
	"net/http"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/retry"
)

// The rule at the heart of the gateway: walk a plan of candidates, judge
// each attempt (verdict.go), and never switch after the commit point. run
// is the walk; planner decides each step of it, from the verdict alone, and
// is tested without a network (verdict_test.go walks planners through
// scripted verdicts).

// step is what the planner says to do after an attempt.
type step int

const (
	stepCommit  step = iota // the attempt has an answer: give it to the client
	stepRetry               // the same candidate again, after a back-off
	stepNext                // the next candidate of the walk
	stepStop                // nothing more to try: answer with the failures
	stepAbandon             // the client went away: answer nothing
	// the same candidate again after its back-off, and the next one now
	// beside it: a hedged candidate's transient failure (race.go)
	stepRetryBeside
)

func (s step) String() string {
	return [...]string{"commit", "retry", "next", "stop", "abandon", "retry-beside"}[s]
}

// planner walks a plan. The plan it is given is shared (a route's plan is
// built once); the walk it keeps is its own copy once it has to change.
type planner struct {
	walk     []candidate
	owned    bool // walk is a copy of the plan
	i        int  // the candidate being tried
	retries  int  // retries made on walk[i]
	attempts int  // upstream attempts made, across candidates
	flying   int  // attempts of a hedged request still running beside the current one (race.go)
	failed   []failure
	failover *failover // a pool's bounds, or nil
	rewaited bool      // the engine was waited for again after its fallback failed a slow start
	clock    clock.Clock
	max      int       // upstream attempts allowed in all (max_attempts)
	op       operation // the request's: candidates that cannot read it are skipped
	route    string    // a named route's path: candidates that do not name it are skipped (v1routes.go)
	// may is the caller's key's check of each candidate (reach.go); nil
	// for a key that may use every model
	may func(candidate) bool
	// beside, when set (a race's), says that c's retry after a
	// transient failure runs beside the next candidate, started at once
	// (race.go)
	beside func(c candidate) bool
}

func newPlanner(plan []candidate, fo *failover, clock clock.Clock, maxAttempts int) *planner {
	p := makePlanner(plan, fo, clock, maxAttempts)
	return &p
}

func makePlanner(plan []candidate, fo *failover, clock clock.Clock, maxAttempts int) planner {
	return planner{walk: plan, failover: fo, clock: clock, i: -1, max: maxAttempts, op: opChat}
}

// next moves to the next candidate worth trying: a pool member is skipped
// once the pool's failover budget is spent (body fallbacks may follow), and
// nothing is left once the request's max_attempts are spent.
func (p *planner) next() (candidate, bool) {
	i, c, ok := p.scan()
	p.i, p.retries = i, 0
	return c, ok
}

// peek is the candidate next would move to, without moving: what a hedge
// would start (race.go).
func (p *planner) peek() (candidate, bool) {
	_, c, ok := p.scan()
	return c, ok
}

// scan finds the candidate after the current one worth trying, and its
// place in the walk (past the end when there is none). Attempts still in
// flight (a hedged request's, race.go) count against the budgets.
func (p *planner) scan() (int, candidate, bool) {
	spent := p.attempts + p.flying
	if spent >= p.max {
		return p.i, candidate{}, false
	}
	i := p.i + 1
	for ; i < len(p.walk); i++ {
		c := p.walk[i]
		if _, ok := p.op.readsNow(&c.rt.cfg, c.rt.eng); !ok || p.route != "" && !c.rt.servesRoute(p.route) {
			continue // a pool member or body fallback that cannot read this request
		}
		if !p.allowed(c) {
			continue // a model the caller's key may not use
		}
		if c.slow != nil && !p.allowed(candidate{rt: c.slow, model: c.rt.cfg.FallbackModel, role: roleFallback}) {
			c.slow = nil // no slow start may leave for a fallback the key cannot reach
		}
		if c.role == rolePool && p.failover != nil &&
			(spent >= p.failover.attempts || p.clock.Now().After(p.failover.deadline)) {
			continue
		}
		return i, c, true
	}
	return i, candidate{}, false
}

// allowed reports whether the caller's key may reach c.
func (p *planner) allowed(c candidate) bool { return p.may == nil || p.may(c) }

// current is the candidate being tried.
func (p *planner) current() candidate { return p.walk[p.i] }

// decide records an attempt of the current candidate and says what comes
// next. Its transitions, in order:
//
//   - an answer: commit;
//   - the client left: abandon;
//   - a transient failure with retries left (not for pool members, which
//     replay on the next member instead): retry here, and when the
//     candidate hedges and another follows it, start that one at once
//     beside the retry (its answer waits for the retry, race.go);
//   - a context-too-long 400 of an engine with a context_fallback: insert
//     it next, once;
//   - a failure that does not move on (a 400, …): stop;
//   - the fallback failed a slow start: wait for the engine again, once;
//   - otherwise: the next candidate.
func (p *planner) decide(a *attempt, v verdict) step {
	p.record(a, v)
	if a.outcome == outcomeGood {
		return stepCommit
	}
	if a.outcome == outcomeCanceled {
		return stepAbandon
	}
	c := p.current()
	if v.retry && c.role != rolePool && p.retries < *c.rt.cfg.Retries && p.attempts < p.max {
		p.retries++
		if p.beside != nil && p.beside(c) {
			if _, ok := p.peek(); ok {
				return stepRetryBeside
			}
		}
		return stepRetry
	}
	if a.contextTooLong() {
		if cc, ok := c.contextCandidate(); ok && !p.has(roleContext) && p.allowed(cc) {
			p.insert(cc)
			return stepNext
		}
	}
	if !v.moveOn {
		return stepStop
	}
	if c.role == roleFallback && p.i > 0 && !p.rewaited && p.slowBefore() {
		// the fallback took over a slow start and failed: go back to
		// waiting for the engine, which is still starting
		p.rewaited = true
		p.insert(p.walk[p.i-1].again())
	}
	return stepNext
}

// record books an attempt that ended: an upstream call made, a failure
// for the final error. decide records the current candidate's; the walk
// records those of a race that end beside it.
func (p *planner) record(a *attempt, v verdict) {
	if v.attempt {
		p.attempts++
	}
	if a.outcome != outcomeGood {
		p.failed = append(p.failed, failure{a, v})
	}
}

// insert puts c right after the current candidate.
func (p *planner) insert(c candidate) {
	if !p.owned {
		p.walk = append(make([]candidate, 0, len(p.walk)+1), p.walk...)
		p.owned = true
	}
	p.walk = append(p.walk[:p.i+1], append([]candidate{c}, p.walk[p.i+1:]...)...)
}

func (p *planner) has(r role) bool {
	for _, c := range p.walk {
		if c.role == r {
			return true
		}
	}
	return false
}

// slowBefore reports whether an earlier attempt left a slow start.
func (p *planner) slowBefore() bool {
	for _, f := range p.failed {
		if f.a.outcome == outcomeSlow {
			return true
		}
	}
	return false
}

// upcoming is the candidate after the current one, if any.
func (p *planner) upcoming() (candidate, bool) {
	if p.i+1 < len(p.walk) {
		return p.walk[p.i+1], true
	}
	return candidate{}, false
}

// spend takes one upstream attempt for a call after commit (a resume);
// false when max_attempts are spent.
func (p *planner) spend() bool {
	if p.attempts >= p.max {
		return false
	}
	p.attempts++
	return true
}

// walk is one request's walk of its plan: the planner that decides each
// step, and what its attempts are made for (the client's reply, the
// request). A runner (runner.go) makes the attempts.
type walk struct {
	g   *Gateway
	rp  *reply
	req *request
	p   planner
	seq sequence // the runner of a request that does not hedge: no allocation of its own
}

func (g *Gateway) newWalk(rp *reply, req *request, plan []candidate) *walk {
	w := &walk{g: g, rp: rp, req: req, p: makePlanner(plan, req.failover, g.clock, g.maxAttempts)}
	w.p.op, w.p.route = req.op, req.route
	w.p.may = g.reachFilter(req)
	rp.spend = w.p.spend
	return w
}

// run walks the plan. Nothing but SSE comments reaches the client before
// commit; after it, nothing switches. The runner makes the attempts: one
// at a time for a request that may not hedge, as a race (race.go) for one
// that may; run takes every attempt that ends from it the same way,
// judges it, and decides the next step with the planner.
func (g *Gateway) run(w http.ResponseWriter, req *request, plan []candidate, res *Result) {
	rp := g.newReply(w, req.stream, req.op.api(), res)
	wk := g.newWalk(rp, req, plan)
	p := &wk.p
	rn := wk.runner(g.hedges(req, plan))
	defer rn.settle()
	if c, ok := p.next(); ok {
		rn.start(c, 0)
	}
	for {
		a, current := rn.next()
		if a == nil {
			if req.r.Context().Err() != nil {
				return // the client left during a back-off: nobody is listening
			}
			break // nothing is running, and nothing is left to start
		}
		v := judged(res, a)
		if !current && a.outcome != outcomeGood {
			// an attempt beside the current one failed (a race's): it
			// is booked, and the walk goes on where it is
			p.record(a, v)
			a.close()
			continue
		}
		s := p.decide(a, v)
		if s == stepCommit {
			rn.end(a)
			res.Attempts = p.attempts // a race's losers that sent their request count too
			g.answer(rp, p, a)
			return
		}
		res.Attempts = p.attempts
		if ce := g.log.Check(zapcore.DebugLevel, "attempt failed"); ce != nil {
			ce.Write(zap.String("attempt", a.label(v)), zap.Error(a.err), zap.Stringer("next", s))
		}
		// let go of the lease now: a later candidate may be a group peer
		// whose start drains this engine (the error body is kept)
		a.close()
		switch s {
		case stepAbandon:
			return // nobody is listening
		case stepStop:
			continue // nothing more starts; an attempt still running may answer
		case stepRetry, stepRetryBeside:
			if g.Hooks.Retry != nil {
				g.Hooks.Retry(a.c.rt.cfg.Name)
			}
			wait := max(retry.Backoff(p.retries-1), a.retryAfter(a.ended))
			rn.start(p.current(), wait)
			if s == stepRetry {
				continue
			}
			// the model asked for is retried after its back-off; the next
			// candidate starts now, and its answer waits for the retry's
			rn.prefer()
			g.log.Info("transient failure: the engine is retried after its back-off, the next candidate starts beside it",
				zap.String("engine", a.c.name()), zap.String("failure", a.label(v)), zap.Duration("back_off", wait))
		default:
			g.logMove(req, p, a, v)
		}
		rp.switched = true
		if c, ok := p.next(); ok {
			rn.start(c, 0)
		}
	}
	rn.end(nil)
	res.Attempts = p.attempts
	if len(p.failed) == 0 {
		return // cannot happen: a plan has a candidate and a budget an attempt
	}
	g.fail(rp, p.failed)
}

// logMove says why the request leaves the current candidate for the next.
func (g *Gateway) logMove(req *request, p *planner, a *attempt, v verdict) {
	c := p.current()
	next, ok := p.upcoming()
	if !ok {
		return
	}
	switch {
	case next.role == roleContext:
		g.log.Info("context too long: request goes to the context fallback",
			zap.String("engine", c.rt.cfg.Name), zap.String("fallback", next.rt.cfg.Name))
	case c.role == rolePool:
		if g.Hooks.Replay != nil {
			g.Hooks.Replay(req.pool)
		}
	case next.role == roleFallback && a.outcome != outcomeSlow:
		g.log.Info("engine failed: request goes to its fallback", zap.String("engine", c.rt.cfg.Name),
			zap.String("fallback", next.rt.cfg.Name), zap.String("failure", a.label(v)))
	}
}

// answer commits a's answer, recording who gave it.
func (g *Gateway) answer(rp *reply, p *planner, a *attempt) {
	c := a.c
	rp.res.Engine, rp.res.ModelSent = c.rt.cfg.Name, a.sent
	rp.res.EngineAPI = rp.res.API
	if a.tr.on {
		rp.res.EngineAPI = a.tr.via.String()
	}
	if len(a.req.blocks) > 0 {
		g.pools[a.req.pool].answered(c.label, a.req.blocks)
	}
	switch {
	case c.isFallback():
		rp.res.Fallback = c.rt.cfg.Name
		g.countFallback(p.walk[0], c, p.failed)
	case a.req.overBudget:
		rp.res.Fallback = c.rt.cfg.Name
		if g.Hooks.Fallback != nil {
			g.Hooks.Fallback(c.rt.cfg.Name, c.rt.cfg.Name, "over_budget")
		}
	}
	g.commit(rp, a)
}

// countFallback reports that c answered instead of the plan's first
// candidate, with the reason it came to that.
func (g *Gateway) countFallback(first, c candidate, failed []failure) {
	if g.Hooks.Fallback == nil {
		return
	}
	reason := "failure"
	switch {
	case c.role == roleBody:
		reason = "body"
	case c.role == roleContext:
		reason = "context"
	case len(failed) > 0 && failed[len(failed)-1].a.outcome == outcomeSlow:
		reason = "slow_start"
	case len(failed) > 0 && failed[len(failed)-1].a.outcome == outcomeOpen:
		reason = "breaker"
	case len(failed) > 0 && failed[len(failed)-1].a.outcome == outcomeBusy:
		reason = "busy"
	}
	g.Hooks.Fallback(first.rt.cfg.Name, c.rt.cfg.Name, reason)
}
