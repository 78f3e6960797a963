package engines

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"
)

// The scheduler's claim loop: a start waits its turn for room in a box, and
// idle engines are stopped for it. The rules, and the table they read (box,
// view), are in box.go.

// claim waits until e's share is granted, stopping idle (or, for a claim
// that waited max_wait, busy) engines to make room. It returns a
// *BusyError when the start is refused: it waited max_wait and what the
// rules protect leaves it no room.
func (b *box) claim(ctx context.Context, e *Engine) error {
	key := e.starter()
	b.mu.Lock()
	delete(b.granted, e) // a share of an earlier run is history
	c := &claim{e: e, need: b.need(e), since: e.now()}
	b.claims = append(b.claims, c)
	b.mu.Unlock()
	b.sig.poke()
	defer func() {
		b.mu.Lock()
		if i := slices.Index(b.claims, c); i >= 0 {
			b.claims = slices.Delete(b.claims, i, i+1)
		}
		b.mu.Unlock()
		b.sig.poke()
	}()
	var stopped []string
	for {
		wake := b.sig.channel()
		b.mu.Lock()
		t := b.turn(c)
		if t.granted {
			b.granted[e] = c.need
			if len(stopped) > 0 {
				b.swaps.add(e.now())
				b.byKey.add(key)
			}
		}
		b.mu.Unlock()
		switch {
		case t.granted:
			e.noteGranted(b, e.now().Sub(c.since), stopped)
			return nil
		case t.refused != nil:
			return t.refused
		}
		// the victims stop side by side: each one's drain, slot saves and
		// stop_timeout would otherwise add up before the claim's start
		var wg sync.WaitGroup
		for _, v := range t.victims {
			why := fmt.Sprintf("room for %s (needs %s of the %s)", e.Name(), b.size(c.need), b.what())
			reason := StopRoom
			if b.group {
				reason = StopGroup
			}
			if v.busy {
				why = fmt.Sprintf("drained for %s, which waited max_wait (%s in flight)", e.Name(), v.inUse())
			}
			e.log.Info("stopping an engine to make room", zap.String("box", b.name), zap.String("engine", v.e.Name()), zap.Bool("busy", v.busy), zap.String("why", why))
			b.swaps.stopped(v.busy)
			wg.Add(1)
			go func() {
				defer wg.Done()
				_ = v.e.stopFor(ctx, why, reason)
			}()
			stopped = append(stopped, v.e.Name())
		}
		wg.Wait()
		if len(t.victims) > 0 {
			continue
		}
		if err := e.awaitTurn(ctx, wake, t.next); err != nil {
			return err
		}
	}
}

// awaitTurn waits for the box to change (wake), for next to pass (when next
// > 0) or for ctx to end. Its timer is stopped when it returns: the claim
// loop arms one each round, and a round's timer left armed until the claim
// ended would fire for a round long gone, and be counted among a test
// clock's timers.
func (e *Engine) awaitTurn(ctx context.Context, wake <-chan struct{}, next time.Duration) error {
	var tick <-chan time.Time
	if next > 0 {
		timer := e.clock.NewTimer(next)
		defer timer.Stop()
		tick = timer.C()
	}
	select {
	case <-wake:
	case <-tick:
	case <-ctx.Done():
		return ctx.Err()
	}
	return nil
}

// turnResult is what one look at the queue decided for a claim.
type turnResult struct {
	granted bool
	victims []view        // to stop first
	refused *BusyError    // the start is refused
	next    time.Duration // when to look again (0: at the next change)
}

// turn decides for claim c, with mu held: granted, or the engines to stop
// first, or refused, or nothing yet (and when to look again: a claim
// reaching max_wait, an engine's min_loaded ending).
func (b *box) turn(c *claim) turnResult {
	now := c.e.now()
	views := b.views(now)
	maxWait := b.maxWaitOr()
	head := b.head(now, maxWait, views)
	if head != c {
		return turnResult{} // one claim at a time, in order
	}
	waited := now.Sub(c.since)
	starving := waited >= maxWait
	if !starving {
		protectWarm(views, startPrio(views, c.e), b.grace, now)
	}
	victims, ok := decide(b.budget, views, c.e, c.need, starving, now)
	switch {
	case ok && len(victims) == 0:
		c.why = ""
		return turnResult{granted: true}
	case ok:
		names := make([]string, len(victims))
		for i, v := range victims {
			names[i] = v.e.Name()
		}
		c.why = "stopping " + strings.Join(names, ", ") + " to make room"
		return turnResult{victims: victims}
	}
	held := heldBy(views, c.e)
	c.why = "waiting for room: " + strings.Join(held, ", ")
	if starving && !fitsBesideKept(b.budget, views, c.e, c.need) || !starving && keptPastWait(b.budget, views, c.e, c.need, maxWait-waited) {
		return turnResult{refused: &BusyError{Engine: c.e.Name(), Waited: waited, WaitingFor: held,
			Need: b.size(c.need), Box: b.what(), RetryAfter: roomRetry(views, c.e)}}
	}
	next := maxWait - waited
	if starving {
		next = 0
	}
	for _, v := range views {
		if !v.holds {
			continue
		}
		for _, d := range []time.Duration{v.keepFor, v.grace} {
			if d > 0 && (next <= 0 || d < next) {
				next = d
			}
		}
	}
	return turnResult{next: next}
}

// head is the claim to serve first: those that waited max_wait, then the
// highest priority waiting, then the oldest.
func (b *box) head(now time.Time, maxWait time.Duration, views []view) *claim {
	waiting := map[*Engine]view{}
	for _, v := range views {
		waiting[v.e] = v
	}
	var best *claim
	for _, c := range b.claims {
		if best == nil || before(c, best, now, maxWait, waiting) {
			best = c
		}
	}
	return best
}

func before(a, b *claim, now time.Time, maxWait time.Duration, waiting map[*Engine]view) bool {
	sa, sb := now.Sub(a.since) >= maxWait, now.Sub(b.since) >= maxWait
	wa, wb := waiting[a.e], waiting[b.e]
	switch {
	case sa != sb:
		return sa
	case sa:
	case wa.prio != wb.prio:
		return wa.prio > wb.prio
	case !a.since.Equal(b.since):
		return a.since.Before(b.since)
	}
	return wa.waiting > wb.waiting
}

// decide is the rule of one claim, as a pure function of what the engines
// hold (tested on its own): the engines to stop so that need fits the
// budget, and whether it can fit now. An engine that keeps its share
// (min_loaded, evict never) is never chosen, nor one that is starting or
// stopping, nor one within the priority_grace of a higher-priority use
// (protectWarm marks them, for a claim that is not starving); a busy one
// only for a claim that waited max_wait (starving), and after every idle
// one. Among the rest, cheapest loss first
// (evictOrder), and no more than it takes: a victim whose share the later
// ones free anyway is kept.
func decide(budget int64, views []view, self *Engine, need int64, starving bool, now time.Time) ([]view, bool) {
	var used int64
	var candidates []view
	for _, v := range views {
		if !v.holds || v.e == self {
			continue
		}
		used += v.need
		if v.ready && !v.keep && v.grace == 0 && (!v.busy || starving) {
			candidates = append(candidates, v)
		}
	}
	if used+need <= budget {
		return nil, true
	}
	slices.SortFunc(candidates, func(a, b view) int { return evictOrder(a, b, now) })
	var victims []view
	for _, v := range candidates {
		if used+need <= budget {
			break
		}
		victims = append(victims, v)
		used -= v.need
	}
	if used+need > budget {
		return nil, false
	}
	// the last victim was needed; an earlier one may not be once the later,
	// bigger ones go: keep it (the dearest first)
	for i := len(victims) - 2; i >= 0; i-- {
		if used+victims[i].need+need <= budget {
			used += victims[i].need
			victims = slices.Delete(victims, i, i+1)
		}
	}
	return victims, true
}

// evictOrder orders the engines a claim may stop, the cheapest loss first:
//
//  1. idle before busy (a busy one only for a claim that waited max_wait)
//  2. the lower priority of its last use first (the highest priority among
//     the requests it served then): a batch model goes before an
//     interactive one
//  3. the smaller loss first: what a restart would cost, its last start's
//     duration, discounted by how long it has been idle compared with that
//     duration (loss = start² / (start + idle)), so a model that takes a
//     minute to load is kept over one that takes two seconds unless it has
//     been idle much longer. Starts are compared by their power of two (a
//     50 s and a 60 s start are alike; under 2.8 s, all are), so that the
//     noise of a measure never outweighs recency
//  4. the least recently used first
func evictOrder(a, b view, now time.Time) int {
	if a.busy != b.busy {
		if a.busy {
			return 1
		}
		return -1
	}
	if a.usePrio != b.usePrio {
		return cmp.Compare(a.usePrio, b.usePrio)
	}
	if la, lb := a.loss(now), b.loss(now); la != lb {
		return cmp.Compare(la, lb)
	}
	return a.lastUsed.Compare(b.lastUsed)
}

// heldBy names the engines that hold room a claim of self cannot take now,
// and why: "qwen (in use, 2 in flight)", "llama (min_loaded for 40s more)".
func heldBy(views []view, self *Engine) []string {
	var held []string
	for _, v := range views {
		if !v.holds || v.e == self {
			continue
		}
		if why := v.heldBecause(); why != "" {
			held = append(held, v.e.Name()+" ("+why+")")
		}
	}
	slices.Sort(held)
	return held
}

// fitsBesideKept reports whether need would fit if every engine the rules
// let the scheduler stop (idle or busy, not within min_loaded or evict
// never) were stopped: when it would not, waiting longer does not help
// until a rule lets go.
func fitsBesideKept(budget int64, views []view, self *Engine, need int64) bool {
	var kept int64
	for _, v := range views {
		if v.holds && v.e != self && v.keep {
			kept += v.need
		}
	}
	return kept+need <= budget
}

// roomRetry is when room may come for a refused start: the first
// min_loaded to end, or the idle stop of an evict never engine, else
// defaultRoomRetry; in whole seconds, between 1 s and maxRetryAfter.
func roomRetry(views []view, self *Engine) time.Duration {
	d := time.Duration(0)
	for _, v := range views {
		if !v.holds || v.e == self || !v.keep {
			continue
		}
		in := v.keepFor
		if v.never {
			in = v.idleFor
		}
		if in > 0 && (d == 0 || in < d) {
			d = in
		}
	}
	if d == 0 {
		d = defaultRoomRetry
	}
	d = (d + time.Second - 1).Truncate(time.Second)
	return min(max(d, time.Second), maxRetryAfter)
}

// fitsNow reports whether e's share fits without stopping anything, for a
// preload, which never evicts.
func (b *box) fitsNow(e *Engine) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := e.now()
	var used int64
	for o := range b.members {
		if o == e {
			continue
		}
		v := o.view(now)
		if v.holds {
			used += max(b.granted[o], b.need(o))
		}
	}
	return used+b.need(e) <= b.budget
}
