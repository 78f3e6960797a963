package handler

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"go.uber.org/zap"
)

// A hedged request's attempts (hedge.go says when a request hedges). Each
// attempt runs on a goroutine of its own, so that the next candidate can
// start beside one that has given no content after hedge_after; the first
// good answer wins and the others are cancelled at once (their connections
// closed, their leases released). The walk stays the planner's: the last
// attempt started is its current candidate, the front; older attempts
// still running stay in the race until they answer, fail or lose. Before
// commit only the race writes to the client (the preamble and keep-alive
// comments of a stream that waits): each attempt gets a quiet copy of the
// reply, which writes nothing. A hedge while the front still waits for its
// engine to start is the slow-start switch (fallback_after) by another
// name: it starts at the same delay, needs no budget, and the start goes on.

// flight is one attempt of a race, on its goroutine.
type flight struct {
	a      *attempt
	c      candidate
	index  int // its place in the walk
	cancel context.CancelFunc
	hedge  bool        // started beside an older attempt
	leased atomic.Bool // it holds a lease: it is past any wait for a start
	start  time.Time
	ended  time.Time // when its try returned
}

// race is a hedged request's attempts.
type race struct {
	g      *Gateway
	rp     *reply // the client's: only the race writes to it before commit
	quiet  *reply // what the attempts get
	req    *request
	p      *planner
	done   chan *flight
	flying []*flight // started and not returned, oldest first
	// lost are the attempts cancelled by a win; settled is closed once
	// they have all returned and let go of what they held
	lost    []*flight
	settled chan struct{}
	wonAt   time.Time
	hedged  bool           // a hedge started: the request's story and metrics say who won
	from    string         // the candidate the first hedge started beside
	counted []*hedgeBudget // the budgets this request was counted in
}

func (g *Gateway) newRace(rp *reply, req *request, p *planner) *race {
	q := *rp
	q.stream, q.preamble = false, false // writes nothing: no preamble, keep-alive or loading status
	return &race{g: g, rp: rp, quiet: &q, req: req, p: p, done: make(chan *flight, p.max+1)}
}

// start runs c's attempt on its own goroutine, as the new front.
func (rc *race) start(c candidate, hedge bool) *flight {
	g := rc.g
	if h, b := g.hedgeOf(rc.req, c); h != nil {
		c.slow = nil // the hedge is its slow-start switch
		if !slices.Contains(rc.counted, b) {
			rc.counted = append(rc.counted, b)
			b.request(g.clock.Now())
		}
	}
	ctx, cancel := context.WithCancel(rc.req.r.Context())
	f := &flight{c: c, index: rc.p.i, cancel: cancel, hedge: hedge, start: g.clock.Now()}
	fr := *rc.req // its own copy: the context its cancel ends, its own kept error
	fr.r, fr.leased = rc.req.r.WithContext(ctx), &f.leased
	rc.flying = append(rc.flying, f)
	rc.p.flying = len(rc.flying)
	go func() {
		a := g.try(rc.quiet, &fr, c)
		f.ended = g.clock.Now()
		if ctx.Err() != nil {
			a.close() // it lost (or the client left): let go at once
		}
		f.a = a
		rc.done <- f
	}()
	return f
}

// attempt runs c as the new front and returns the attempt to judge: a good
// answer of any attempt of the race, else the front's failure. Older
// attempts that fail meanwhile are judged and recorded here.
func (rc *race) attempt(c candidate) *attempt {
	g := rc.g
	front := rc.start(c, false)
	var hedgeAt <-chan time.Time
	if len(rc.flying) == 1 {
		if h, _ := g.hedgeOf(rc.req, c); h != nil {
			t := g.clock.NewTimer(max(0, hedgeDelay(h, c.rt)-g.clock.Now().Sub(front.start)))
			defer t.Stop()
			hedgeAt = t.C()
		}
	}
	wt := rc.rp.streamTimers()
	defer wt.stop()
	for {
		select {
		case f := <-rc.done:
			a := rc.landed(f)
			if a.outcome == outcomeGood || f == front {
				return a
			}
			rc.record(f, a)
		case <-hedgeAt:
			hedgeAt = nil
			if nf := rc.hedge(front); nf != nil {
				front = nf
			}
		case <-wt.preambleC():
			wt.onPreamble()
		case <-wt.keepAliveC():
			wt.onKeepAlive()
		}
	}
}

// landed takes a returned flight out of the race.
func (rc *race) landed(f *flight) *attempt {
	for i, o := range rc.flying {
		if o == f {
			rc.flying = append(rc.flying[:i], rc.flying[i+1:]...)
			break
		}
	}
	rc.p.flying = len(rc.flying)
	a := f.a
	a.index, a.hedge = f.index, f.hedge
	if a.outcome == outcomeGood && !a.leasedAt.IsZero() {
		f.c.rt.firsts.add(f.ended.Sub(a.leasedAt))
	}
	return a
}

// hedge starts the next candidate beside front, when the plan has one and
// the budget allows it (a front still waiting for its engine's start needs
// none); it returns the new front, or nil.
func (rc *race) hedge(front *flight) *flight {
	g := rc.g
	next, ok := rc.p.peek()
	if !ok {
		return nil
	}
	h, b := g.hedgeOf(rc.req, front.c)
	if h == nil || !next.mayHedgeTo(rc.req.model) {
		return nil
	}
	starting := !front.leased.Load()
	if !starting && !b.take(g.clock.Now(), h.Share()) {
		g.log.Debug("hedge budget spent: no hedge", zap.String("engine", front.c.name()))
		return nil
	}
	rc.p.next()
	if !rc.hedged {
		rc.hedged, rc.from = true, front.c.name()
	}
	rc.rp.switched = true
	g.log.Info("no content yet: a hedge starts beside the attempt", zap.String("engine", front.c.name()),
		zap.String("hedge", next.name()), zap.Bool("starting", starting),
		zap.Duration("after", g.clock.Now().Sub(front.start)))
	return rc.start(next, true)
}

// skipsRetry reports whether a transient failure of c (a 503, a 429 with
// a short Retry-After, a reset) moves on to the next candidate at once
// rather than trying c again after a back-off: when c hedges and there is
// a next candidate. A request that hedges wants the first answer soonest;
// the back-off alone (125-250 ms, then more) costs it more than the next
// candidate takes to answer.
func (rc *race) skipsRetry(c candidate) bool {
	if h, _ := rc.g.hedgeOf(rc.req, c); h == nil {
		return false
	}
	_, ok := rc.p.peek()
	return ok
}

// record judges an attempt of the race that failed beside the front.
func (rc *race) record(f *flight, a *attempt) {
	v := judge(a.judgement(rc.g.clock.Now()), a.c.policy())
	a.pass.apply(v)
	rc.rp.res.tell(a, v, f.ended, false)
	if v.attempt {
		rc.p.attempts++
	}
	rc.p.failed = append(rc.p.failed, failure{a, v})
	a.close()
}

// rest waits for the attempts still running once the walk has nothing more
// to try: the first good answer is returned, the others' failures are
// recorded; nil when none answered.
func (rc *race) rest() *attempt {
	wt := rc.rp.streamTimers()
	defer wt.stop()
	for len(rc.flying) > 0 {
		select {
		case f := <-rc.done:
			a := rc.landed(f)
			if a.outcome == outcomeGood {
				return a
			}
			rc.record(f, a)
		case <-wt.preambleC():
			wt.onPreamble()
		case <-wt.keepAliveC():
			wt.onKeepAlive()
		}
	}
	return nil
}

// pause waits out a retry's back-off; an older attempt that answers
// meanwhile is returned. ok is false when the client went away.
func (rc *race) pause(ctx context.Context, d time.Duration) (*attempt, bool) {
	t := rc.g.clock.NewTimer(d)
	defer t.Stop()
	wt := rc.rp.streamTimers()
	defer wt.stop()
	for {
		select {
		case <-t.C():
			return nil, true
		case <-ctx.Done():
			return nil, false
		case f := <-rc.done:
			a := rc.landed(f)
			if a.outcome == outcomeGood {
				return a, true
			}
			rc.record(f, a)
		case <-wt.preambleC():
			wt.onPreamble()
		case <-wt.keepAliveC():
			wt.onKeepAlive()
		}
	}
}

// win cancels every attempt but w at once; they let go of their
// connections and leases as they return, on a goroutine of their own, and
// settle records them when the request ends. A loser that held a lease
// sent its request: it counts as an attempt.
func (rc *race) win(w *attempt) {
	rc.wonAt = rc.g.clock.Now()
	rc.lost = rc.flying
	rc.flying, rc.p.flying = nil, 0
	rc.report(w)
	if len(rc.lost) == 0 {
		return
	}
	rc.settled = make(chan struct{})
	for _, f := range rc.lost {
		f.cancel()
		if f.leased.Load() {
			rc.p.attempts++
		}
	}
	n := len(rc.lost)
	go func() {
		for range n {
			f := <-rc.done
			f.a.close()
			f.a.pass.apply(verdict{effect: effectAbandon, scope: scopeModel}) // a loser tells its breakers nothing
		}
		close(rc.settled)
	}()
}

// report counts a hedged request's end: whether the hedge or the attempt
// it started beside won, or neither (w nil).
func (rc *race) report(w *attempt) {
	if !rc.hedged || rc.g.Hooks.Hedge == nil {
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
	rc.g.Hooks.Hedge(rc.from, winner)
}

// settle records the attempts that lost, once they have returned: in the
// request's story (reason "lost", how long each ran after the win) and in
// what the key is charged (chargeLosers).
func (rc *race) settle() {
	if rc.settled == nil {
		return
	}
	<-rc.settled
	res := rc.rp.res
	for _, f := range rc.lost {
		a := f.a
		a.hedge = f.hedge
		v := verdict{reason: "lost"}
		res.tell(a, v, f.ended, false)
		if n := len(res.Tries); n > 0 && res.Tries[n-1].Reason == "lost" {
			res.Tries[n-1].LostFor = max(0, f.ended.Sub(rc.wonAt))
		}
		res.HedgeTokens += loserTokens(rc.req, a)
	}
}

// loserTokens is what an attempt that lost is charged: what it reported,
// else its prompt (it was cancelled before any content, so it answered
// nothing; a prompt it was sent was processed, and paid for). An attempt
// that never held a lease sent nothing and costs nothing.
func loserTokens(req *request, a *attempt) int64 {
	if a.leasedAt.IsZero() {
		return 0
	}
	if st := a.stream; st != nil && st.used {
		return int64(st.usage.Total())
	}
	return promptTokens(req)
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
