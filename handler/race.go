package handler

import (
	"context"
	"io"
	"slices"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// A hedged request's runner (hedge.go says when a request hedges). Each
// attempt runs on a goroutine of its own, so that the next candidate can
// start beside one that has given no content after hedge_after; the first
// good answer wins and the others are cancelled at once (their connections
// closed, their leases released). The walk stays the planner's: the last
// attempt started is its current candidate's; older attempts still running
// stay in the race until they answer, fail or lose, and the walk takes
// each that ends (next) and judges it like any other. Before commit only
// the race writes to the client (the preamble and keep-alive comments of a
// stream that waits): each attempt gets a quiet copy of the reply, which
// writes nothing. A hedge while the current attempt still waits for its
// engine to start is the slow-start switch (fallback_after) by another
// name: it starts at the same delay, needs no budget, and the start goes
// on.
//
// A hedged candidate's transient failure (a 500, a 429 with a short
// Retry-After) is retried after its back-off as any other's, and the next
// candidate starts at once beside the retry: the model asked for keeps the
// request when its retry answers, and the next one has been warming up in
// case it does not. The next candidate's answer waits (held) for the
// retry until the retry has been sent and had its hedge_after, or has
// failed; the first of them to answer then wins.
//
// An attempt of a race is a flight: what it has of its own (its context,
// which a loss cancels alone; whether it holds a lease yet; when it
// ended) is in its attempt, and it shares the request with the others.

// race is a hedged request's attempts.
type race struct {
	w       *walk
	quiet   *reply        // what the attempts get: writes nothing
	done    chan *attempt // each flight, once its try returned
	flying  []*attempt    // started and not returned, oldest first
	current *attempt      // the walk's current candidate's
	// hedgeAt is the current attempt's hedge_after, while it runs alone
	hedgeAt clock.Timer
	wt      *waitTimers // the client's, while the race waits
	// preferred is a retry of the candidate asked for while the answers
	// of the attempts beside it wait for it (held), until keepAt
	preferred *attempt
	keepAt    clock.Timer
	held      []*attempt
	// lost are the attempts cancelled by a win; settled is closed once
	// they have all returned and let go of what they held
	lost    []*attempt
	settled chan struct{}
	won     *attempt
	wonAt   time.Time
	hedged  bool           // a hedge started: the request's story and metrics say who won
	from    string         // the candidate the first hedge started beside
	counted []*hedgeBudget // the budgets this request was counted in
}

func newRace(w *walk) *race {
	q := *w.rp
	q.stream, q.preamble = false, false // writes nothing: no preamble, keep-alive or loading status
	return &race{w: w, quiet: &q, done: make(chan *attempt, w.p.max+1)}
}

// start runs c's attempt on its own goroutine, as the current one; its
// hedge_after starts when it is sent (after wait), if it runs alone.
func (rc *race) start(c candidate, wait time.Duration) {
	g := rc.w.g
	// started beside a retry that answers would rather have: its hedge
	beside := rc.preferred != nil
	if beside && !rc.hedged {
		rc.hedged, rc.from = true, rc.preferred.c.name()
	}
	rc.stopHedge()
	// the hedge is armed before the flight starts, in order: a clock that
	// moves once the engine was asked (a test's) sees it, however late this
	// goroutine runs after the go statement
	if h, _ := g.hedgeOf(rc.w.req, c); h != nil && len(rc.flying) == 0 {
		rc.hedgeAt = g.clock.NewTimer(wait + hedgeDelay(h, c.rt))
	}
	rc.current = rc.launch(c, wait, beside)
}

// launch starts a flight of c after wait.
func (rc *race) launch(c candidate, wait time.Duration, hedge bool) *attempt {
	g, req := rc.w.g, rc.w.req
	if h, b := g.hedgeOf(req, c); h != nil {
		c.slow = nil // the hedge is its slow-start switch
		if !slices.Contains(rc.counted, b) {
			rc.counted = append(rc.counted, b)
			b.request(g.clock.Now())
		}
	}
	ctx, cancel := context.WithCancel(req.r.Context())
	a := g.newAttempt(req, c, ctx, g.clock.Now().Add(wait))
	a.index, a.hedge, a.abandon = rc.w.p.i, hedge, cancel
	rc.flying = append(rc.flying, a)
	rc.w.p.flying = len(rc.flying)
	var backOff clock.Timer
	if wait > 0 {
		backOff = g.clock.NewTimer(wait) // armed here, in order: a test's clock sees it
	}
	go rc.fly(a, backOff)
	return a
}

// fly is a flight's goroutine: its back-off, then its try.
func (rc *race) fly(a *attempt, backOff clock.Timer) {
	g := rc.w.g
	if backOff != nil {
		select {
		case <-backOff.C():
		case <-a.parent.Done():
			backOff.Stop()
			a.outcome, a.ended = outcomeCanceled, g.clock.Now()
			rc.done <- a
			return
		}
	}
	g.try(rc.quiet, a)
	if a.parent.Err() != nil {
		a.close() // it lost (or the client left): let go at once
	}
	rc.done <- a
}

// next waits for the next flight that ends, hedging the current attempt
// at its hedge_after and keeping a waiting stream alive meanwhile. An
// answer that waits for a preferred retry is handed out once the retry has
// failed or had its time.
func (rc *race) next() (*attempt, bool) {
	if rc.wt == nil {
		rc.wt = rc.w.rp.streamTimers()
	}
	wt := rc.wt
	for {
		if len(rc.held) > 0 && rc.preferred == nil {
			a := rc.held[0]
			rc.held = rc.held[1:]
			return a, a == rc.current
		}
		if len(rc.flying) == 0 {
			return nil, false
		}
		select {
		case a := <-rc.done:
			rc.landed(a)
			if rc.holds(a) {
				continue
			}
			return a, a == rc.current
		case <-rc.hedgeC():
			rc.stopHedge()
			rc.hedge()
		case <-timerC(rc.keepAt):
			rc.unprefer() // the retry had its time: the answers waiting go
		case <-wt.preambleC():
			wt.onPreamble()
		case <-wt.keepAliveC():
			wt.onKeepAlive()
		}
	}
}

// landed takes a returned flight out of the race.
func (rc *race) landed(a *attempt) {
	if i := slices.Index(rc.flying, a); i >= 0 {
		rc.flying = slices.Delete(rc.flying, i, i+1)
	}
	rc.w.p.flying = len(rc.flying)
	if a == rc.current {
		rc.stopHedge() // nothing is left to hedge
	}
	if a == rc.preferred && a.outcome != outcomeGood {
		rc.unprefer() // the retry failed: the answers waiting for it go
	}
	if a.outcome == outcomeGood && !a.leasedAt.IsZero() {
		a.c.rt.firsts.add(a.ended.Sub(a.leasedAt))
	}
}

// prefer makes the current attempt, a retry of the candidate asked for,
// the one the race would rather have, until it has been sent and had its
// hedge_after.
func (rc *race) prefer() {
	g, a := rc.w.g, rc.current
	h, _ := g.hedgeOf(rc.w.req, a.c)
	if h == nil {
		return
	}
	rc.unprefer()
	rc.preferred = a
	rc.keepAt = g.clock.NewTimer(max(0, a.started.Sub(g.clock.Now())) + hedgeDelay(h, a.c.rt))
}

// holds keeps a's answer back while a preferred retry runs beside it.
func (rc *race) holds(a *attempt) bool {
	if rc.preferred == nil || a == rc.preferred || a.outcome != outcomeGood {
		return false
	}
	rc.held = append(rc.held, a)
	return true
}

// unprefer ends the wait for a preferred retry.
func (rc *race) unprefer() {
	if rc.keepAt != nil {
		rc.keepAt.Stop()
		rc.keepAt = nil
	}
	rc.preferred = nil
}

func (rc *race) hedgeC() <-chan time.Time { return timerC(rc.hedgeAt) }

// timerC is t's channel, or nil (never ready) for no timer.
func timerC(t clock.Timer) <-chan time.Time {
	if t == nil {
		return nil
	}
	return t.C()
}

func (rc *race) stopHedge() {
	if rc.hedgeAt != nil {
		rc.hedgeAt.Stop()
		rc.hedgeAt = nil
	}
}

// hedge starts the next candidate beside the current attempt, when the
// plan has one and the budget allows it (an attempt still waiting for its
// engine's start needs none); the hedge becomes the current attempt.
func (rc *race) hedge() {
	g, req, p := rc.w.g, rc.w.req, &rc.w.p
	cur := rc.current
	next, ok := p.peek()
	if !ok {
		return
	}
	h, b := g.hedgeOf(req, cur.c)
	if h == nil || !next.mayHedgeTo(req.model) {
		return
	}
	starting := !cur.leased.Load()
	if !starting && !b.take(g.clock.Now(), h.Share()) {
		g.log.Debug("hedge budget spent: no hedge", zap.String("engine", cur.c.name()))
		return
	}
	p.next()
	if !rc.hedged {
		rc.hedged, rc.from = true, cur.c.name()
	}
	rc.w.rp.switched = true
	g.log.Info("no content yet: a hedge starts beside the attempt", zap.String("engine", cur.c.name()),
		zap.String("hedge", next.name()), zap.Bool("starting", starting),
		zap.Duration("after", g.clock.Now().Sub(cur.started)))
	rc.current = rc.launch(next, 0, true)
}

// hedges reports whether c hedges: then its retry after a transient
// failure (a 503, a 429 with a short Retry-After, a reset) runs beside
// the next candidate, started at once (the planner asks only when there is
// one). A request that hedges wants the first answer soonest, and the
// model it asked for: the back-off alone (125-250 ms, then more) costs it
// more than the next candidate takes to answer, and moving on at once
// would give a single 500 to another model.
func (rc *race) hedges(c candidate) bool {
	h, _ := rc.w.g.hedgeOf(rc.w.req, c)
	return h != nil
}

// end cancels every attempt but w at once; they let go of their
// connections and leases as they return, on a goroutine of their own, and
// settle tells them when the request ends. A loser that held a lease sent
// its request: it counts as an attempt.
//
// An answer held for a preferred retry that won loses too: it answered,
// so its breakers hear a success, and it is charged what it reported.
func (rc *race) end(w *attempt) {
	rc.stop()
	rc.report(w)
	if w == nil {
		return
	}
	rc.won, rc.wonAt = w, rc.w.g.clock.Now()
	flying, held := rc.flying, slices.DeleteFunc(rc.held, func(a *attempt) bool { return a == w })
	rc.flying, rc.w.p.flying, rc.held = nil, 0, nil
	rc.lost = append(flying, held...)
	if len(rc.lost) == 0 {
		return
	}
	rc.settled = make(chan struct{})
	for _, a := range rc.lost {
		a.abandon()
		if a.leased.Load() {
			rc.w.p.attempts++
		}
	}
	go func() {
		for _, a := range held {
			a.readLostAnswer()
			a.close()
			a.pass.apply(verdict{answered: true, effect: effectSuccess, scope: scopeModel})
		}
		for range flying {
			a := <-rc.done
			a.close()
			a.pass.apply(verdict{effect: effectAbandon, scope: scopeModel}) // a loser tells its breakers nothing
		}
		close(rc.settled)
	}()
}

// stop stops the race's timers.
func (rc *race) stop() {
	rc.stopHedge()
	rc.unprefer()
	if rc.wt != nil {
		rc.wt.stop()
	}
}

// report counts a hedged request's end: whether the hedge or the attempt
// it started beside won, or neither (w nil).
func (rc *race) report(w *attempt) {
	if !rc.hedged || rc.w.g.Hooks.Hedge == nil {
		return
	}
	winner := "none"
	switch {
	case w == nil:
	case w.hedge:
		winner = "hedge"
	default:
		winner = "first"
	}
	rc.w.g.Hooks.Hedge(rc.from, winner)
}

// settle tells the attempts that lost, once they have returned: in the
// request's story (reason "lost", how long each ran after the win) and in
// what the key is charged (loserUsage).
func (rc *race) settle() {
	if rc.won != nil {
		rc.won.abandon() // its context's resources: the answer has ended
	}
	rc.stop()
	for _, a := range rc.held {
		a.close() // held for a retry when the client left
	}
	if rc.settled == nil {
		return
	}
	<-rc.settled
	res := rc.w.rp.res
	for _, a := range rc.lost {
		res.tell(a, verdict{reason: "lost"})
		if n := len(res.Tries); n > 0 && res.Tries[n-1].Reason == "lost" {
			res.Tries[n-1].LostFor = max(0, a.ended.Sub(rc.wonAt))
		}
		u := loserUsage(rc.w.req, a)
		res.HedgeUsage = plus(res.HedgeUsage, u)
		rc.w.g.chargeLoser(res, a, u) // spend.go
	}
}

// loserUsage is what an attempt that lost is charged: what it reported,
// else its prompt (it was cancelled before any content, so it answered
// nothing; a prompt it was sent was processed, and paid for). An attempt
// that never held a lease sent nothing and costs nothing.
func loserUsage(req *request, a *attempt) api.Usage {
	switch {
	case a.leasedAt.IsZero():
		return api.Usage{}
	case a.stream != nil && a.stream.used:
		return a.stream.usage
	case a.lostUsed:
		return a.lostUsage
	}
	return api.Usage{Input: int(promptTokens(req))}
}

// plus is the usage of two answers together.
func plus(u, v api.Usage) api.Usage {
	return api.Usage{Input: u.Input + v.Input, CacheRead: u.CacheRead + v.CacheRead, CacheWrite: u.CacheWrite + v.CacheWrite,
		Output: u.Output + v.Output, Reasoning: u.Reasoning + v.Reasoning}
}

// readLostAnswer reads the usage of a JSON answer that lost while held for
// a retry (bounded as any answer read whole): the engine made the whole
// answer, and its tokens are charged.
func (a *attempt) readLostAnswer() {
	if a.stream != nil || a.resp == nil || !isJSON(a.resp.Header) {
		return
	}
	body, err := io.ReadAll(io.LimitReader(a.resp.Body, maxWholeAnswer+1))
	if err != nil || len(body) > maxWholeAnswer {
		return
	}
	a.lostUsage, a.lostUsed = grammar.AnswerUsage(a.req.op.api(), body)
}

// mayHedgeTo reports whether a hedge may start on c: never on a candidate
// that is down or whose breaker is open (the hedge would be refused, and
// would have spent the budget on nothing).
func (c *candidate) mayHedgeTo(asked string) bool {
	if !c.rt.eng.Healthy() {
		return false
	}
	if c.brk != nil {
		return c.brk.Ready()
	}
	model := asked
	if c.model != "" {
		model = c.model
	}
	return c.rt.eng.Breaker().Ready() && c.rt.eng.ModelBreaker(model).Ready()
}
