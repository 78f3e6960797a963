package engines

import (
	"context"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
)

// The scheduler's rule (claim.go, on the table of box.go), below the engines: decide is a pure
// function, tested row by row and then over randomized traces.

func TestDecide(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a, b, c, self := &Engine{}, &Engine{}, &Engine{}, &Engine{}
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	for _, row := range []struct {
		name     string
		budget   int64
		views    []view
		need     int64
		starving bool
		victims  []*Engine
		ok       bool
	}{
		{"fits beside what runs", 4, []view{{e: a, need: 2, holds: true, ready: true}}, 2, false, nil, true},
		{"the least recently used idle engine makes room", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(5)}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(1)}},
			2, false, []*Engine{b}, true},
		{"as many as it takes", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(5)}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(1)}},
			4, false, []*Engine{b, a}, true},
		{"never a busy engine", 2, []view{{e: a, need: 2, holds: true, ready: true, busy: true}}, 2, false, nil, false},
		{"a busy engine for a starving claim, after the idle ones", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, busy: true, lastUsed: at(1)}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(9)}},
			4, true, []*Engine{b, a}, true},
		{"never one within min_loaded or evict never, even starving", 2,
			[]view{{e: a, need: 1, holds: true, ready: true, keep: true}, {e: b, need: 1, holds: true, ready: true, busy: true, keep: true}},
			1, true, nil, false},
		{"never one that is starting or stopping", 2, []view{{e: a, need: 2, holds: true}}, 1, true, nil, false},
		{"a stopped engine holds nothing", 2, []view{{e: a, need: 2}}, 2, false, nil, true},
		{"its own earlier share is not counted", 2, []view{{e: self, need: 2, holds: true, ready: true}}, 2, false, nil, true},
		{"a group: the one running peer, once idle", 1,
			[]view{{e: a, need: 1, holds: true, ready: true}, {e: c, need: 1}}, 1, false, []*Engine{a}, true},
		// cheapest loss first (evictOrder)
		{"the lower priority of its last use goes first, however recent", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(1), usePrio: 10}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(9)}},
			2, false, []*Engine{b}, true},
		{"a slow start is kept over a quick one used earlier", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(1), startTook: 60 * time.Second}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(8), startTook: 2 * time.Second}},
			2, false, []*Engine{b}, true},
		{"unless it has been idle much longer than its start takes", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(-3600), startTook: 10 * time.Second}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(9), startTook: 2 * time.Second}},
			2, false, []*Engine{a}, true},
		{"no more than it takes: a cheap small one is kept when the big one frees enough", 12,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(1)}, {e: b, need: 10, holds: true, ready: true, lastUsed: at(5)}},
			10, false, []*Engine{b}, true},
		{"priority before loss: a high-priority quick start stays, a low-priority slow one goes", 4,
			[]view{{e: a, need: 2, holds: true, ready: true, lastUsed: at(9), usePrio: 5, startTook: time.Second}, {e: b, need: 2, holds: true, ready: true, lastUsed: at(9), usePrio: 0, startTook: time.Minute}},
			2, false, []*Engine{b}, true},
	} {
		t.Run(row.name, func(t *testing.T) {
			victims, ok := decide(row.budget, row.views, self, row.need, row.starving, at(10))
			var got []*Engine
			for _, v := range victims {
				got = append(got, v.e)
			}
			if ok != row.ok || !slices.Equal(got, row.victims) {
				t.Fatalf("victims %v ok %v, want %v %v", got, ok, row.victims, row.ok)
			}
		})
	}
}

// TestSchedulerPropertiesOverRandomTraces plays 10,000 requests of random
// engines, sizes, arrival times and lengths through the scheduler's rule
// on a simulated clock (the model of box.claim: one claim served at a time,
// in order, stopping what decide names), and checks at every instant: the
// memory loaded never exceeds the budget, no engine with a request in
// flight is stopped before it was starving's turn and drained, and no
// request waits longer than max_wait plus a swap (stops, then a start) plus
// the requests ahead of it.
func TestSchedulerPropertiesOverRandomTraces(t *testing.T) {
	const (
		requests = 10000
		startT   = 2 * time.Second
		maxWait  = 30 * time.Second
	)
	rng := rand.New(rand.NewPCG(29, 1))
	type eng struct {
		e        *Engine
		need     int64
		loaded   bool
		starting time.Duration // when it became ready, while starting
		inFlight int
		lastUsed time.Duration
		keep     time.Duration // min_loaded
		queue    []int         // requests waiting for it
		prio     int           // the priority of its requests
		took     time.Duration // its start, as measured
	}
	const budget = 8
	engs := make([]*eng, 6)
	for i := range engs {
		engs[i] = &eng{e: &Engine{}, need: int64(1 + rng.IntN(4)), keep: time.Duration(rng.IntN(3)) * time.Second,
			prio: rng.IntN(3), took: time.Duration(500+rng.IntN(5000)) * time.Millisecond}
	}
	arrive := make([]time.Duration, requests)
	which := make([]int, requests)
	length := make([]time.Duration, requests)
	var now time.Duration
	for i := range requests {
		now += time.Duration(rng.IntN(400)) * time.Millisecond
		arrive[i], which[i] = now, rng.IntN(len(engs))
		length[i] = time.Duration(50+rng.IntN(1500)) * time.Millisecond
	}
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	type claimAt struct {
		en    *eng
		since time.Duration
	}
	var claims []claimAt
	type running struct {
		en  *eng
		end time.Duration
	}
	var inFlight []running
	waited := time.Duration(0)
	next := 0
	tick := 10 * time.Millisecond
	served := 0
	for now = 0; served < requests; now += tick {
		// requests that end
		inFlight = slices.DeleteFunc(inFlight, func(r running) bool {
			if r.end > now {
				return false
			}
			r.en.inFlight--
			r.en.lastUsed = now
			return true
		})
		// arrivals
		for next < requests && arrive[next] <= now {
			en := engs[which[next]]
			en.queue = append(en.queue, next)
			if !en.loaded && !slices.ContainsFunc(claims, func(c claimAt) bool { return c.en == en }) {
				claims = append(claims, claimAt{en, now})
			}
			next++
		}
		// the head claim's turn
		if len(claims) > 0 {
			views := make([]view, 0, len(engs))
			waiting := map[*Engine]int{}
			for _, en := range engs {
				ready := en.loaded && en.starting <= now
				// a drained engine holds its memory until its requests end
				v := view{e: en.e, need: en.need, holds: en.loaded || en.inFlight > 0, ready: ready,
					busy: en.inFlight > 0 || (ready && len(en.queue) > 0), lastUsed: base.Add(en.lastUsed),
					usePrio: en.prio, startTook: en.took}
				if en.keep > 0 && en.lastUsed+en.keep > now {
					v.keep = true
				}
				views = append(views, v)
				waiting[en.e] = len(en.queue)
			}
			b := &box{}
			for _, c := range claims {
				b.claims = append(b.claims, &claim{e: c.en.e, since: base.Add(c.since)})
			}
			h := b.head(base.Add(now), maxWait, views)
			i := slices.IndexFunc(claims, func(c claimAt) bool { return c.en.e == h.e })
			c := claims[i]
			starving := now-c.since >= maxWait
			victims, ok := decide(budget, views, c.en.e, c.en.need, starving, base.Add(now))
			switch {
			case ok && len(victims) == 0:
				c.en.loaded, c.en.starting = true, now+startT
				claims = slices.Delete(claims, i, i+1)
			case ok:
				for _, v := range victims {
					for _, en := range engs {
						if en.e != v.e {
							continue
						}
						if en.inFlight > 0 && !starving {
							t.Fatalf("at %v: an engine with %d requests in flight was stopped", now, en.inFlight)
						}
						en.loaded = false // a drain: the requests in flight finish, new ones wait
						if len(en.queue) > 0 {
							claims = append(claims, claimAt{en, now})
						}
					}
				}
			}
		}
		// memory loaded (starting engines hold theirs; drained ones until their requests end)
		var used int64
		for _, en := range engs {
			if en.loaded || en.inFlight > 0 {
				used += en.need
			}
		}
		if used > budget {
			t.Fatalf("at %v: %d loaded of a budget of %d", now, used, budget)
		}
		// ready engines serve their queues
		for _, en := range engs {
			if !en.loaded || en.starting > now {
				continue
			}
			for _, r := range en.queue {
				w := now - arrive[r]
				waited = max(waited, w)
				inFlight = append(inFlight, running{en, now + length[r]})
				en.inFlight++
				served++
			}
			en.queue = en.queue[:0]
		}
	}
	// a starving claim waits for the drain of what it stops (the longest
	// request) and a start, after at most the claims ahead of it
	bound := maxWait + time.Duration(len(engs))*(startT+1600*time.Millisecond)
	if waited > bound {
		t.Fatalf("a request waited %v, more than max_wait plus the swaps ahead of it (%v)", waited, bound)
	}
	t.Logf("%d requests, longest wait %v", requests, waited)
}

// Real engines (the test binary as the demo engine): a memory budget that
// holds two of three, a busy engine never stopped for room, the least
// recently used idle one stopped instead, and evict never kept.
func TestMemoryBudgetStopsTheLeastRecentlyUsedIdleEngine(t *testing.T) {
	SetMemoryBudget(2<<30, time.Hour)
	defer SetMemoryBudget(0, 0)
	mem := func(c *Config) { c.Memory = 1 << 30 }
	a := testEngine(t, "mem-a", mem)
	b := testEngine(t, "mem-b", mem)
	c := testEngine(t, "mem-c", mem)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	busy, err := a.Acquire(ctx, true) // a stays busy throughout
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Release()
	lb, err := b.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	lb.Release() // b is idle now
	lc, err := c.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	if a.State() != Ready || b.State() != Stopped {
		t.Fatalf("starting c: a is %s (busy), b is %s (idle)", a.State(), b.State())
	}
	if why := b.Why().Stopped; why != "room for mem-c (needs 1.0 GiB of the memory_budget)" {
		t.Fatalf("b stopped for %q", why)
	}
	if why := c.Why().Started; !strings.HasPrefix(why, "request; ") || !strings.HasSuffix(why, "stopped mem-b for it") {
		t.Fatalf("c started for %q", why)
	}
	if u := Memory(); u.Swaps == 0 || u.SwapsLastHour == 0 || u.Stops["room"] == 0 {
		t.Fatalf("no swap counted: %+v", u)
	}
	// b again: a is busy and c is busy: b waits until c goes idle
	got := make(chan error, 1)
	go func() {
		l, err := b.Acquire(ctx, true)
		if err == nil {
			l.Release()
		}
		got <- err
	}()
	for b.waitingNow() == 0 {
		time.Sleep(time.Millisecond)
	}
	select {
	case err := <-got:
		t.Fatalf("b started beside two busy engines: %v", err)
	case <-time.After(100 * time.Millisecond):
	}
	lc.Release()
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if c.State() != Stopped || a.State() != Ready {
		t.Fatalf("after c went idle: a %s, c %s", a.State(), c.State())
	}
}

func TestEvictNeverKeepsAnEngineAndTheOtherWaits(t *testing.T) {
	SetMemoryBudget(1<<30, time.Hour)
	defer SetMemoryBudget(0, 0)
	keep := testEngine(t, "keep", func(c *Config) { c.Memory = 1 << 30; c.Evict = EvictNever })
	other := testEngine(t, "other", func(c *Config) { c.Memory = 1 << 30 })
	l, err := keep.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	if _, err := other.Acquire(ctx, true); err == nil {
		t.Fatal("other started by evicting an engine with evict never")
	}
	if keep.State() != Ready {
		t.Fatalf("keep is %s", keep.State())
	}
	_ = zap.NewNop()
}
