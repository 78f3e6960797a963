package handler

import "time"

// The attempts of a walk. The loop (loop.go) decides which candidate is
// tried and when; a runner makes the attempts and hands back each one that
// ends. A request that cannot hedge runs them one at a time on its own
// goroutine (sequence, here); one that may hedge runs each on a goroutine
// of its own, so that the next candidate can start beside one that has
// said nothing yet (race, race.go). The loop calls both the same way, and
// every attempt that ends, whoever ran it, is judged once (judged).

// runner makes a walk's attempts.
type runner interface {
	// start makes an attempt of c, the walk's current candidate, after
	// wait (a retry's back-off; 0 for none).
	start(c candidate, wait time.Duration)
	// next is the next attempt that ended, and whether it is the current
	// candidate's (an attempt of a race may end beside it); nil when none
	// is running, or when the client went away during a back-off.
	next() (a *attempt, current bool)
	// prefer makes the current attempt (a retry of the candidate asked
	// for) the one the walk would rather have: while it runs, the answer
	// of an attempt started beside it waits for it until it has had its
	// hedge_after. Only a race runs attempts side by side.
	prefer()
	// end is told how the walk ends, before anything is written: a, the
	// attempt that answers (the others are cancelled), or nil for none.
	end(a *attempt)
	// settle runs when the request has ended (its answer relayed): the
	// attempts that lost are told in its story and charged.
	settle()
}

// runner is the walk's runner: a race when the request may hedge.
func (w *walk) runner(hedges bool) runner {
	if hedges {
		rc := newRace(w)
		w.p.beside = rc.hedges
		return rc
	}
	w.seq.w = w
	return &w.seq
}

// sequence runs a walk's attempts one at a time, on the request's
// goroutine: what every request that cannot hedge does.
type sequence struct {
	w       *walk
	c       candidate
	wait    time.Duration
	pending bool
}

func (s *sequence) start(c candidate, wait time.Duration) {
	s.c, s.wait, s.pending = c, wait, true
}

func (s *sequence) next() (*attempt, bool) {
	if !s.pending {
		return nil, false
	}
	s.pending = false
	w := s.w
	ctx := w.req.r.Context()
	if s.wait > 0 && !w.rp.pause(ctx, s.wait) {
		return nil, false
	}
	a := w.g.newAttempt(w.req, s.c, ctx, w.g.clock.Now())
	a.index = w.p.i
	w.g.try(w.rp, a)
	return a, true
}

func (s *sequence) prefer()      {}
func (s *sequence) end(*attempt) {}
func (s *sequence) settle()      {}
