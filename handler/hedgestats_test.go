package handler

import (
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestTheHedgeBudgetIsAShareOfTheMinutesRequests(t *testing.T) {
	fake := clock.NewFake()
	var b hedgeBudget
	for range 10 {
		b.request(fake.Now())
	}
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("the first hedge of 10 requests at 10% was refused")
	}
	if b.take(fake.Now(), 0.1) {
		t.Fatal("a second hedge of 10 requests at 10% was allowed")
	}
	for range 10 {
		b.request(fake.Now())
	}
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("the second hedge of 20 requests was refused")
	}
	fake.Advance(3 * time.Minute)
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("one hedge a minute is always allowed")
	}
}

func TestAutoHedgeGoesByTheEnginesFirstTokens(t *testing.T) {
	var ft firstTokens
	if d := ft.auto(); d != hedgeAutoDefault {
		t.Fatalf("no samples: %v", d)
	}
	for i := range 100 {
		ft.add(time.Duration(i+1) * 10 * time.Millisecond) // 10ms … 1s
	}
	if d := ft.auto(); d < 900*time.Millisecond || d > time.Second {
		t.Fatalf("p99 of 10ms…1s: %v", d)
	}
	var fast firstTokens
	for range 50 {
		fast.add(time.Millisecond)
	}
	if d := fast.auto(); d != engines.HedgeAutoFloor {
		t.Fatalf("fast engine: %v, want the floor", d)
	}
}
