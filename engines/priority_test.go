package engines

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Priority protects warm engines, on engines without processes
// (a state set by hand) and a fake clock: a lower-priority start does not
// stop an engine of a higher-priority use within priority_grace, and does
// once the grace or its max_wait has passed.

// warmAndCold is a box of one place holding warm, ready and last used at
// priority 10 just now, and cold, stopped, whose start a request of
// priority startPrio of key batch waits for.
func warmAndCold(clk *clock.Fake, maxWait, grace time.Duration, startPrio int) (b *box, warm, cold *Engine) {
	managed := func(c *Config) { c.Cmd = []string{"engine"} }
	warm = fakeEngine("chat", clk, Ready, managed)
	warm.usePrio, warm.lastUsed = 10, clk.Now()
	cold = fakeEngine("batch", clk, Stopped, managed)
	cold.waiting, cold.waitPrios, cold.startKey = 1, map[int]int{startPrio: 1}, "batch"
	b = testBox(1, maxWait, warm, cold)
	b.grace = grace
	return b, warm, cold
}

// claimAsync claims e's share of b in the background.
func claimAsync(b *box, e *Engine) <-chan error {
	got := make(chan error, 1)
	go func() { got <- b.claim(context.Background(), e) }()
	return got
}

// waitsForTime fails t unless the claim reaches a wait on the clock
// (rather than ending at once).
func waitsForTime(t *testing.T, clk *clock.Fake, got <-chan error) {
	t.Helper()
	armed := make(chan struct{})
	go func() { clk.WaitForTimers(1); close(armed) }()
	select {
	case <-armed:
	case err := <-got:
		t.Fatalf("the start did not wait: claim returned %v", err)
	case <-time.After(10 * time.Second):
		t.Fatal("the claim neither waits nor ends")
	}
}

func stateOf(e *Engine) State {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.state
}

func TestALowerPriorityStartWaitsOutTheGraceOfAHigherPriorityEngine(t *testing.T) {
	clk := clock.NewFake()
	b, warm, cold := warmAndCold(clk, time.Minute, 30*time.Second, 0)
	got := claimAsync(b, cold)
	waitsForTime(t, clk, got) // until the grace ends
	if u := b.use(); len(u.Queue) != 1 || !strings.HasPrefix(u.Queue[0].Why, "waiting for room: chat (used at priority 10, priority_grace for 30s more)") {
		t.Fatalf("the queue says %+v", u.Queue)
	}
	clk.Advance(29 * time.Second)
	clk.WaitForTimers(1)
	if s := stateOf(warm); s != Ready {
		t.Fatalf("within the grace chat is %v, want ready", s)
	}
	clk.Advance(time.Second) // chat has been idle for the grace: the start may stop it
	if err := <-got; err != nil {
		t.Fatalf("claim: %v", err)
	}
	if s := stateOf(warm); s != Stopped {
		t.Fatalf("after the grace chat is %v, want stopped for batch", s)
	}
	if u := b.use(); u.Swaps != 1 || len(u.SwapsByKey) != 1 || u.SwapsByKey["batch"] != 1 {
		t.Fatalf("swaps %d by key %v, want 1 by batch", u.Swaps, u.SwapsByKey)
	}
}

func TestALowerPriorityStartStopsAWarmEngineOnceItWaitedMaxWait(t *testing.T) {
	clk := clock.NewFake()
	b, warm, cold := warmAndCold(clk, 10*time.Second, time.Hour, 0)
	got := claimAsync(b, cold)
	waitsForTime(t, clk, got)
	if s := stateOf(warm); s != Ready {
		t.Fatalf("before max_wait chat is %v, want ready", s)
	}
	clk.Advance(10 * time.Second) // max_wait: the grace no longer holds it
	if err := <-got; err != nil {
		t.Fatalf("claim: %v", err)
	}
	if s := stateOf(warm); s != Stopped {
		t.Fatalf("after max_wait chat is %v, want stopped for batch", s)
	}
}

func TestAStartOfEqualPriorityIsNotHeldByTheGrace(t *testing.T) {
	clk := clock.NewFake()
	b, warm, cold := warmAndCold(clk, time.Minute, 30*time.Second, 10)
	if r := b.turnFor(cold, clk.Now()); len(r.victims) != 1 || r.victims[0].e != warm {
		t.Fatalf("%+v: want chat stopped at once for a start of the same priority", r)
	}
}

func TestPriorityGraceZeroProtectsNothing(t *testing.T) {
	clk := clock.NewFake()
	b, warm, cold := warmAndCold(clk, time.Minute, 0, 0)
	if r := b.turnFor(cold, clk.Now()); len(r.victims) != 1 || r.victims[0].e != warm {
		t.Fatalf("%+v: want chat stopped at once without a grace", r)
	}
}
