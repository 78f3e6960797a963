package quota

import (
	"sync"
	"sync/atomic"
	"time"
)

// counter is one (kind, window) count of a key. Two limits of one kind and
// window ("rate 5/m 10/m") share it; a change of a limit's count on reload
// keeps it, so the window's usage carries over.
type counter struct {
	start    int64 // unix seconds: the window used and unsynced belong to
	used     int64 // the local view: last shared/persisted total + unsynced
	unsynced int64 // counted here and not yet pushed to a shared store
	reserved int64 // tokens (money) reserved by requests in flight, of no window
	active   bool  // some rule has used it: persist and sync it
}

// keyState is everything counted for one key name. Its mutex is held only
// for arithmetic on its counters, never across I/O.
type keyState struct {
	name   string
	mu     sync.Mutex
	c      [numRows][numWindows]counter // [requestsRow|tokensRow|spendRow][window]
	dirty  bool                         // changed since the embedded store last saw it
	pulled sync.Once                    // Redis's counts read on first sight (core.pull)
	told   [numRows][numWindows]told    // the budget thresholds told (thresholds.go)
}

// roll returns the counter of row and w, moved to the window holding now
// (unix seconds): a counter of an older window starts again from zero. Only
// reservations stay, since their requests are still in flight and will end
// in the new window. Call with mu held.
func (ks *keyState) roll(row int, w Window, now int64) (ctr *counter, end int64) {
	ctr = &ks.c[row][w]
	start, end := w.bounds(now)
	if ctr.start != start {
		ctr.start, ctr.used, ctr.unsynced = start, 0, 0
	}
	ctr.active = true
	return ctr, end
}

// Admit asks whether a request of key may go ahead under rules, estimate
// being the tokens it is expected to use (its reservation while in flight).
//
//   - Rate limits are checked first. A request over one is refused with
//     ReasonRate and counted nowhere; the ticket is nil.
//   - Then token limits: usage so far + reservations of requests in flight +
//     max(estimate, 1) must stay within every token limit; a request whose
//     estimate alone is larger than a limit passes it only alone: nothing
//     reserved in flight and usage still under the limit. A request over
//     one gets ReasonTokens and reserves nothing, but it is counted against
//     the rate limits (it is a request: refused with insufficient_quota, or
//     served by the key's over_budget fallback) and it gets a ticket, so
//     that a fallback's answer is counted too.
//   - Admitted, it is counted against every rate limit, its estimate is
//     reserved against every token limit, and the ticket carries the
//     reservation.
//
// Whenever the ticket is not nil the caller must end it with Done (an answer
// came, with its usage) or Cancel (none came); both are nil-safe and
// idempotent, so `defer t.Cancel()` after Admit is always right. The ticket
// is nil when there is nothing to settle: rules without token limits, or a
// refusal by a rate limit. Rules that limit nothing cost nothing: a nil
// ticket and OK.
//
// With a Redis store, rate limits are decided by Redis in one round trip
// (see the package doc); everything else runs on the key's local counters
// under a mutex held for a few additions, never across I/O.
func (l *Limiter) Admit(key string, rules Rules, estimate int64) (*Ticket, Decision) {
	return l.admit(key, rules, Cost{Tokens: estimate}, false)
}

// AdmitCost is Admit with what the request may cost in tokens and in money
// (spend.go): its reservation against the token budgets and the money
// budgets alike; alone as AdmitAlone. A money budget is checked after the
// token budgets and refuses with ReasonSpend.
func (l *Limiter) AdmitCost(key string, rules Rules, estimate Cost, alone bool) (*Ticket, Decision) {
	return l.admit(key, rules, estimate, alone)
}

// AdmitAlone is Admit for a request whose answer nothing bounds (issue
// 51): estimate, the least it is expected to use, must fit what is left of
// every token budget with nothing else in flight, and, admitted, it holds
// the whole of every budget until it ends, so that nothing is admitted
// beside it. Its usage then passes a budget by what its answer uses beyond
// what was left, and no other request adds to that.
func (l *Limiter) AdmitAlone(key string, rules Rules, estimate int64) (*Ticket, Decision) {
	return l.admit(key, rules, Cost{Tokens: estimate}, true)
}

func (l *Limiter) admit(key string, rules Rules, estimate Cost, alone bool) (*Ticket, Decision) {
	if rules.Empty() {
		return nil, Decision{OK: true}
	}
	c := l.core
	ks := c.state(key)
	estimate.Tokens, estimate.Money = max(estimate.Tokens, 0), max(estimate.Money, 0)
	push := true
	if len(rules.Rate) > 0 && c.redis != nil && c.redis.exactRates() && !c.degraded.Load() {
		t, d, outcome := c.admitShared(ks, rules, estimate, alone)
		if outcome == decided {
			return t, d
		}
		// Redis did not answer: the local counters decide, as below. A
		// script Redis received may still run there (a stalled Redis runs
		// what it was sent when the stall ends) and count this request
		// itself: then pushing the local count too would count it twice
		//. So it is counted here and left out of the
		// push; the next sync brings Redis's total, with it or without.
		push = outcome == unsent
	}
	now := c.clock.Now()
	unix := now.Unix()
	ks.mu.Lock()
	defer ks.mu.Unlock()
	if end := ks.rateBlocked(rules.Rate, unix); end != 0 {
		return nil, ks.refusal(ReasonRate, rules, end, now)
	}
	ks.countRequest(rules.Rate, unix, 1, push)
	return ks.reserve(c, rules, estimate, alone, now)
}

// rateBlocked is the latest end of a window whose rate limit one more
// request would exceed, or 0 when all pass. Call with mu held.
func (ks *keyState) rateBlocked(rate []Limit, now int64) (end int64) {
	for _, l := range rate {
		ctr, e := ks.roll(requestsRow, l.Window, now)
		if ctr.used+1 > l.N && e > end {
			end = e
		}
	}
	return end
}

// countRequest adds n to each window's request counter once, however many
// limits share the window; with push, also to what the next sync pushes to
// Redis. Call with mu held.
func (ks *keyState) countRequest(rate []Limit, now int64, n int64, push bool) {
	if len(rate) == 0 {
		return
	}
	var seen uint8
	for _, l := range rate {
		if seen&(1<<l.Window) != 0 {
			continue
		}
		seen |= 1 << l.Window
		ctr, _ := ks.roll(requestsRow, l.Window, now)
		ctr.used += n
		if push {
			ctr.unsynced += n
		}
	}
	ks.dirty = true
}

// reserve runs the budget checks of a request already counted against the
// rate limits, token budgets first, then money budgets: it reserves its
// estimate of each when every one passes (the whole of every budget for a
// request alone), and makes its ticket. Call with mu held.
func (ks *keyState) reserve(c *core, rules Rules, estimate Cost, alone bool, now time.Time) (*Ticket, Decision) {
	unix := now.Unix()
	t := &Ticket{core: c, ks: ks}
	var reason Reason
	var end int64
	held := true // every refusing window would fit but for what is in flight
	for i, b := range budgetRows {
		limits, est := b.limits(rules), b.of(estimate)
		need := max(est, 1)
		var kindEnd int64
		for _, l := range limits {
			ctr, e := ks.roll(b.row, l.Window, unix)
			t.windows[i] |= 1 << l.Window
			if alone {
				est = max(est, need, l.N) // every budget whole: nothing fits beside it
			}
			if !fits(ctr, need, l.N, alone) && e > kindEnd {
				kindEnd = e
			}
			if !fits(ctr, need, l.N, alone) && !fits(&counter{used: ctr.used}, need, l.N, alone) {
				held = false
			}
		}
		t.reserved[i] = est
		if kindEnd != 0 && reason == "" {
			reason = b.reason
		}
		end = max(end, kindEnd)
	}
	if end != 0 {
		d := ks.refusal(reason, rules, end, now)
		d.Held = held
		return &Ticket{core: c, ks: ks, windows: t.windows}, d
	}
	d := Decision{OK: true, Requests: ks.headroom(requestsRow, rules.Rate, now)}
	if t.windows == [len(budgetRows)]uint8{} {
		return nil, d // no budget: nothing to settle
	}
	for i, b := range budgetRows {
		for w := Window(0); w < numWindows; w++ {
			if t.windows[i]&(1<<w) != 0 {
				ks.c[b.row][w].reserved += t.reserved[i]
			}
		}
	}
	d.Tokens = ks.headroom(tokensRow, rules.Tokens, now)
	d.Spend = ks.headroom(spendRow, rules.Spend, now)
	return t, d
}

// fits says whether a reservation of need tokens may join a counter under
// a limit of n tokens: used + reserved + need must stay within n, except
// that a request whose reservation alone is larger than n goes alone, when
// nothing is reserved in flight and the window is not spent (item
// 4). Refused by the plain rule it could never pass, however long it
// waited; admitted alone, it reserves its whole estimate, so every other
// request waits for it and the overshoot is bounded by that one request.
// A request asked alone (AdmitAlone) needs nothing in flight and its need
// within what is left.
func fits(ctr *counter, need, n int64, alone bool) bool {
	switch {
	case need > n:
		return ctr.reserved == 0 && ctr.used < n
	case alone:
		return ctr.reserved == 0 && ctr.used+need <= n
	}
	return ctr.used+ctr.reserved+need <= n
}

// refusal is the decision for a request refused by reason until end (unix
// seconds). Call with mu held.
func (ks *keyState) refusal(reason Reason, rules Rules, end int64, now time.Time) Decision {
	return Decision{
		Reason:     reason,
		RetryAfter: ceilSecond(time.Unix(end, 0).Sub(now)),
		Requests:   ks.headroom(requestsRow, rules.Rate, now),
		Tokens:     ks.headroom(tokensRow, rules.Tokens, now),
		Spend:      ks.headroom(spendRow, rules.Spend, now),
	}
}

// headroom is the tightest limit of a kind: the one with least remaining
// (the longer wait on a tie). Call with mu held, after roll.
func (ks *keyState) headroom(row int, limits []Limit, now time.Time) Headroom {
	var h Headroom
	unix := now.Unix()
	for i, l := range limits {
		ctr := &ks.c[row][l.Window]
		_, end := l.Window.bounds(unix)
		left := max(l.N-ctr.used-ctr.reserved, 0)
		reset := time.Unix(end, 0).Sub(now)
		if i == 0 || left < h.Remaining || (left == h.Remaining && reset > h.Reset) {
			h = Headroom{Limit: l.N, Remaining: left, Reset: reset}
		}
	}
	return h
}

// ceilSecond rounds d up to a whole second: a Retry-After that is honest
// never sends a client back before its window has reset.
func ceilSecond(d time.Duration) time.Duration {
	if r := d % time.Second; r != 0 {
		d += time.Second - r
	}
	return d
}

// Ticket is an admitted request's hold on its key's budgets: the
// estimate reserved at Admit, released by Done or Cancel; and, joined to
// it, another name's (a team's) ticket, which ends with it.
type Ticket struct {
	core     *core
	ks       *keyState
	reserved [len(budgetRows)]int64 // per budget kind
	windows  [len(budgetRows)]uint8 // the windows of the key's limits of each kind at Admit
	also     *Ticket                // a ticket joined to this one (Join)
	closed   atomic.Bool
}

// Done ends the request with its actual usage (prompt + completion tokens):
// the reservation is released and the usage counted against every token
// window of the key, in the window current now (usage is counted when the
// answer ends). Only the first Done or Cancel counts.
func (t *Ticket) Done(actualTokens int64) { t.DoneCost(Cost{Tokens: actualTokens}) }

// DoneCost is Done with what the request cost in tokens and in money: each
// counted against the key's budgets of its kind.
func (t *Ticket) DoneCost(actual Cost) {
	if t == nil {
		return
	}
	t.also.DoneCost(actual)
	if t.closed.Swap(true) {
		return
	}
	t.settle(Cost{Tokens: max(actual.Tokens, 0), Money: max(actual.Money, 0)})
}

// Cancel ends a request that got no answer: the reservation is released and
// nothing is counted. Only the first Done or Cancel counts.
func (t *Ticket) Cancel() {
	if t == nil {
		return
	}
	t.also.Cancel()
	if t.closed.Swap(true) {
		return
	}
	t.settle(Cost{})
}

func (t *Ticket) settle(used Cost) {
	now := t.core.clock.Now().Unix()
	ks := t.ks
	ks.mu.Lock()
	for i, b := range budgetRows {
		n := b.of(used)
		for w := Window(0); w < numWindows; w++ {
			if t.windows[i]&(1<<w) == 0 {
				continue
			}
			ctr, _ := ks.roll(b.row, w, now)
			ctr.reserved -= t.reserved[i]
			ctr.used += n
			ctr.unsynced += n
			if n != 0 {
				ks.dirty = true
			}
		}
	}
	ks.mu.Unlock()
}

// Usage is key's counters under rules in their current windows.
func (l *Limiter) Usage(key string, rules Rules) KeyUsage {
	u := KeyUsage{Key: key, Limits: []LimitUsage{}}
	c := l.core
	now := c.clock.Now().Unix()
	var ks *keyState
	if c.redis != nil {
		// another gateway may be counting a key this one has not seen:
		// read it from Redis, and keep its counters in the sync from now on
		ks = c.state(key)
		ks.mu.Lock()
		defer ks.mu.Unlock()
		for _, lim := range rules.Rate {
			ks.roll(requestsRow, lim.Window, now)
		}
		for _, lim := range rules.Tokens {
			ks.roll(tokensRow, lim.Window, now)
		}
		for _, lim := range rules.Spend {
			ks.roll(spendRow, lim.Window, now)
		}
	} else if v, ok := c.keys.Load(key); ok {
		ks = v.(*keyState)
		ks.mu.Lock()
		defer ks.mu.Unlock()
	}
	add := func(kind Kind, row int, limits []Limit) {
		for _, lim := range limits {
			start, end := lim.Window.bounds(now)
			var used, reserved int64
			if ks != nil {
				ctr := &ks.c[row][lim.Window]
				if ctr.start == start {
					used = ctr.used
				}
				reserved = ctr.reserved
			}
			u.Limits = append(u.Limits, LimitUsage{
				Kind: kind, Limit: lim, Used: used, Reserved: reserved,
				Remaining: max(lim.N-used-reserved, 0),
				Reset:     time.Unix(end, 0).UTC(),
			})
		}
	}
	add(Requests, requestsRow, rules.Rate)
	add(Tokens, tokensRow, rules.Tokens)
	add(Spend, spendRow, rules.Spend)
	return u
}
