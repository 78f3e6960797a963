package handler

import (
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestTheHedgeBudgetIsAShareOfTheMinutesRequestsAndAFloor(t *testing.T) {
	fake := clock.NewFake()
	var b hedgeBudget
	for range 10 {
		b.request(fake.Now())
	}
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("the first hedge of 10 requests at 10% was refused")
	}
	for i := range hedgeFloorBurst {
		if !b.take(fake.Now(), 0.1) {
			t.Fatalf("hedge %d beyond the share was refused: the floor has %d", i+1, hedgeFloorBurst)
		}
	}
	if b.take(fake.Now(), 0.1) {
		t.Fatal("a hedge beyond the share and the floor's burst was allowed")
	}
	fake.Advance(hedgeFloorEvery)
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("the floor did not refill")
	}
	if b.take(fake.Now(), 0.1) {
		t.Fatal("the floor refilled more than one hedge in its period")
	}
	for range 100 {
		b.request(fake.Now())
	}
	if !b.take(fake.Now(), 0.1) {
		t.Fatal("the sixth hedge of 110 requests at 10% was refused")
	}
}

// The floor, measured: requests that may hedge arrive every `every`,
// those silent() want a hedge; how many get one. The old floor (one hedge
// a minute) hedged 6 of 12 silent requests when they came in pairs on a
// quiet gateway (the second of each pair waited its whole first token),
// and 10 of 20 at 2 requests a minute; a stall at 20 requests/s was held
// to 240 hedges in 2 minutes (10 %). The floor of three, one more every
// 20 s, hedges every silent request of a quiet gateway, and holds the
// stall to the same share.
func TestTheHedgeBudgetsFloorHedgesAQuietGatewayAndHoldsAStall(t *testing.T) {
	for _, tc := range []struct {
		name         string
		every, total time.Duration
		silent       func(i int) bool
		hedged       int
	}{
		{"quiet: 4 a minute, 2 silent in a row every 5 minutes", 15 * time.Second, 30 * time.Minute, func(i int) bool { return i%20 < 2 }, 12},
		{"quiet: 2 a minute, every third silent", 30 * time.Second, 30 * time.Minute, func(i int) bool { return i%3 == 0 }, 20},
		{"busy: 20/s, 1 in 20 silent", 50 * time.Millisecond, 10 * time.Minute, func(i int) bool { return i%20 == 0 }, 600},
		{"a stall on a quiet gateway: 1 in 10s, all silent", 10 * time.Second, 10 * time.Minute, func(int) bool { return true }, 33},
		{"a stall on a busy gateway: 20/s, all silent", 50 * time.Millisecond, 2 * time.Minute, func(int) bool { return true }, 240},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake()
			var b hedgeBudget
			silent, hedged, i := 0, 0, 0
			for at := time.Duration(0); at < tc.total; at += tc.every {
				b.request(fake.Now())
				if tc.silent(i) {
					silent++
					if b.take(fake.Now(), 0.1) {
						hedged++
					}
				}
				i++
				fake.Advance(tc.every)
			}
			if hedged != tc.hedged {
				t.Fatalf("%d of %d silent requests hedged (of %d), want %d", hedged, silent, i, tc.hedged)
			}
		})
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
