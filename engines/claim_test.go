package engines

import (
	"context"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A claim that must stop two engines stops them side by side: each one's
// drain (and slot saves, and stop_timeout) would otherwise add up before
// the claimed engine's start. Here both victims hold a request past
// max_wait, and both drain at once.
func TestAClaimStopsItsVictimsSideBySide(t *testing.T) {
	clk := clock.NewFake()
	managed := func(c *Config) { c.Cmd = []string{"llama-server"} }
	a := fakeEngine("a", clk, Ready, managed)
	b := fakeEngine("b", clk, Ready, managed)
	for _, e := range []*Engine{a, b} {
		e.leases, e.life = 1, context.Background()
	}
	cold := fakeEngine("big", clk, Stopped, func(c *Config) { c.Memory = 2 })
	bx := testBox(2, time.Second, a, b, cold)

	got := make(chan error, 1)
	go func() { got <- bx.claim(context.Background(), cold) }()
	clk.WaitForTimers(1) // waiting for max_wait
	clk.Advance(time.Second)
	for _, e := range []*Engine{a, b} {
		awaitDraining(t, e)
	}
	for _, e := range []*Engine{a, b} {
		e.mu.Lock()
		e.leases = 0
		e.broadcast()
		e.mu.Unlock()
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	if a.State() != Stopped || b.State() != Stopped {
		t.Fatalf("a %v, b %v", a.State(), b.State())
	}
}

// awaitDraining waits for e to drain, failing after a generous bound.
func awaitDraining(t *testing.T, e *Engine) {
	t.Helper()
	bound := time.After(10 * time.Second)
	for {
		ch := e.Changed()
		if e.State() == Draining {
			return
		}
		select {
		case <-ch:
		case <-bound:
			t.Fatalf("%s did not drain: the victims stop one after another", e.Name())
		}
	}
}
