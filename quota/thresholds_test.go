package quota

import (
	"fmt"
	"testing"
	"time"
)

// A budget's thresholds are told once each per window, the highest a
// request passes only; a new window tells them again.
func TestEachBudgetThresholdIsToldOncePerWindow(t *testing.T) {
	clock := clockAt(time.Hour)
	l, _ := openFile(t, clock)
	r := spendRules(t, "1/d")
	r.Tokens = rules(t, nil, []string{"1000/d"}).Tokens
	spend := func(money int64, tokens int64) string {
		t.Helper()
		tk, d := l.AdmitCost("k", r, Cost{Tokens: 1, Money: 1}, false)
		if !d.OK {
			t.Fatalf("%+v", d)
		}
		tk.DoneCost(Cost{Tokens: tokens, Money: money})
		var out []string
		for _, c := range l.Crossings("k", r) {
			out = append(out, fmt.Sprintf("%s %d%% %d", c.Kind, c.Percent, c.Used))
		}
		return fmt.Sprint(out)
	}
	for _, step := range []struct {
		money, tokens int64
		want          string
	}{
		{400_000_000, 100, "[]"},
		{100_000_000, 100, "[spend 50% 500000000]"},                // exactly half
		{100_000_000, 100, "[]"},                                   // told already
		{350_000_000, 600, "[tokens 80% 900 spend 80% 950000000]"}, // tokens are told first
	} {
		if got := spend(step.money, step.tokens); got != step.want {
			t.Fatalf("spent %d: %s, want %s", step.money, got, step.want)
		}
	}
	if got := spend(50_000_000, 0); got != "[spend 100% 1000000000]" {
		t.Fatalf("all of it: %s", got)
	}
	if got := l.Crossings("k", r); got != nil {
		t.Fatalf("asked again: %+v", got)
	}
	// the next day, from nothing again
	clock.Advance(24 * time.Hour)
	if got := spend(800_000_000, 0); got != "[spend 80% 800000000]" {
		t.Fatalf("the next day: %s", got)
	}
	if got := l.Crossings("unseen", r); got != nil {
		t.Fatalf("a key never admitted: %+v", got)
	}
}
