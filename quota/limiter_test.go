package quota

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(runHelper())
	}
	goleak.VerifyTestMain(m)
}

func rules(t *testing.T, rate []string, tokens []string) Rules {
	t.Helper()
	var r Rules
	for _, s := range rate {
		l, err := ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Rate = append(r.Rate, l)
	}
	for _, s := range tokens {
		l, err := ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Tokens = append(r.Tokens, l)
	}
	return r
}

// clockAt is a fake clock standing at 2026-01-01 00:00:00 UTC plus d.
func clockAt(d time.Duration) *clock.Fake {
	c := clock.NewFake()
	c.Advance(d)
	return c
}

// openFile opens a Limiter on a fresh embedded store and closes it at the
// end of the test.
func openFile(t *testing.T, clock clock.Clock) (*Limiter, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "llm_gateway", "quota.db")
	l, err := Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l, path
}

func TestRateFiveAMinuteThenHonestRetryAfter(t *testing.T) {
	clock := clockAt(20 * time.Second) // 00:00:20
	l, _ := openFile(t, clock)
	r := rules(t, []string{"5/m"}, nil)
	for i := range 5 {
		tk, d := l.Admit("team-a", r, 0)
		if !d.OK {
			t.Fatalf("request %d refused: %+v", i+1, d)
		}
		if d.Requests != (Headroom{Limit: 5, Remaining: int64(4 - i), Reset: 40 * time.Second}) {
			t.Errorf("request %d headroom %+v", i+1, d.Requests)
		}
		tk.Done(0)
	}
	tk, d := l.Admit("team-a", r, 0)
	if d.OK || d.Reason != ReasonRate || tk != nil {
		t.Fatalf("sixth request: %+v, ticket %v", d, tk)
	}
	if d.RetryAfter != 40*time.Second {
		t.Errorf("RetryAfter %v at 00:00:20 for a minute window, want 40s", d.RetryAfter)
	}
	if d.Requests.Remaining != 0 || d.Requests.Limit != 5 {
		t.Errorf("headroom of a refusal: %+v", d.Requests)
	}

	clock.Advance(39*time.Second + 500*time.Millisecond) // 00:00:59.5
	if _, d := l.Admit("team-a", r, 0); d.OK || d.RetryAfter != time.Second {
		t.Errorf("at 00:00:59.5: %+v, want refused with RetryAfter 1s (rounded up)", d)
	}
	// the refused requests were not counted: the next window has all five
	clock.Advance(500 * time.Millisecond)
	for i := range 5 {
		if _, d := l.Admit("team-a", r, 0); !d.OK {
			t.Fatalf("new window, request %d refused: %+v", i+1, d)
		}
	}
	if _, d := l.Admit("team-a", r, 0); d.OK {
		t.Fatal("sixth request of the new window admitted")
	}
	// another key has counters of its own
	if _, d := l.Admit("team-b", r, 0); !d.OK {
		t.Fatal("another key refused")
	}
}

func TestRetryAfterWaitsForEveryWindowThatRefused(t *testing.T) {
	clock := clockAt(10*time.Minute + 15*time.Second) // 00:10:15
	l, _ := openFile(t, clock)
	r := rules(t, []string{"3/m", "3/h"}, nil)
	for range 3 {
		l.Admit("k", r, 0)
	}
	// both windows are full: the hour resets last
	if _, d := l.Admit("k", r, 0); d.OK || d.RetryAfter != 49*time.Minute+45*time.Second {
		t.Errorf("%+v, want RetryAfter 49m45s", d)
	}
	// tightest limit in the headers: the hour's (same remaining, later reset)
	if _, d := l.Admit("k", r, 0); d.Requests.Reset != 49*time.Minute+45*time.Second {
		t.Errorf("headroom %+v", d.Requests)
	}
	clock.Advance(45 * time.Second) // a new minute, the same hour
	if _, d := l.Admit("k", r, 0); d.OK || d.RetryAfter != 49*time.Minute {
		t.Errorf("%+v, want refused by the hour alone", d)
	}
}

func TestTokenBudgetWithReservations(t *testing.T) {
	clock := clockAt(time.Hour)
	l, _ := openFile(t, clock)
	r := rules(t, nil, []string{"1000/d"})

	// a burst of 20 requests estimated at 100 tokens each, all in flight at
	// once: reservations admit exactly 10
	var (
		mu      sync.Mutex
		tickets []*Ticket
		refused int
		wg      sync.WaitGroup
	)
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, d := l.Admit("k", r, 100)
			mu.Lock()
			defer mu.Unlock()
			if d.OK {
				tickets = append(tickets, tk)
				return
			}
			if d.Reason != ReasonTokens || tk == nil {
				t.Errorf("refusal %+v ticket %v", d, tk)
			}
			tk.Cancel()
			refused++
		}()
	}
	wg.Wait()
	if len(tickets) != 10 || refused != 10 {
		t.Fatalf("admitted %d, refused %d; want 10 and 10", len(tickets), refused)
	}
	u := l.Usage("k", r).Limits[0]
	if u.Used != 0 || u.Reserved != 1000 || u.Remaining != 0 {
		t.Errorf("while in flight: %+v", u)
	}
	// each answer used 130 tokens, 30 more than its estimate: the overshoot
	// is at most what the in-flight answers used beyond their estimates
	for _, tk := range tickets {
		tk.Done(130)
	}
	u = l.Usage("k", r).Limits[0]
	if u.Used != 1300 || u.Reserved != 0 || u.Remaining != 0 {
		t.Errorf("after the answers: %+v", u)
	}
	tk, d := l.Admit("k", r, 1)
	if d.OK || d.Reason != ReasonTokens || d.RetryAfter != 23*time.Hour {
		t.Errorf("budget spent: %+v, want tokens with RetryAfter 23h", d)
	}
	if d.Tokens != (Headroom{Limit: 1000, Remaining: 0, Reset: 23 * time.Hour}) {
		t.Errorf("token headroom %+v", d.Tokens)
	}
	// the over-budget ticket counts what a fallback answer used
	tk.Done(40)
	if u := l.Usage("k", r).Limits[0]; u.Used != 1340 {
		t.Errorf("fallback usage not counted: %+v", u)
	}
	// a zero estimate cannot slip through a spent budget
	if _, d := l.Admit("k", r, 0); d.OK {
		t.Error("a request estimated at 0 tokens passed a spent budget")
	}
	clock.Advance(23 * time.Hour)
	if _, d := l.Admit("k", r, 1000); !d.OK {
		t.Errorf("next day: %+v", d)
	}
}

func TestOverBudgetRequestsStillCountAgainstTheRate(t *testing.T) {
	l, _ := openFile(t, clockAt(0))
	r := rules(t, []string{"3/m"}, []string{"100/d"})
	tk, d := l.Admit("k", r, 100)
	if !d.OK {
		t.Fatal(d)
	}
	tk.Done(100)
	for range 2 {
		tk, d := l.Admit("k", r, 10)
		if d.OK || d.Reason != ReasonTokens {
			t.Fatalf("%+v", d)
		}
		tk.Done(5) // served by the fallback
	}
	if _, d := l.Admit("k", r, 10); d.Reason != ReasonRate {
		t.Errorf("fourth request: %+v, want the rate limit", d)
	}
}

func TestDoneAndCancelAreIdempotent(t *testing.T) {
	l, _ := openFile(t, clockAt(0))
	r := rules(t, nil, []string{"1000/m", "5000/d"})
	used := func() (int64, int64) {
		u := l.Usage("k", r)
		if u.Limits[0].Used != u.Limits[1].Used || u.Limits[0].Reserved != u.Limits[1].Reserved {
			t.Fatalf("windows disagree: %+v", u)
		}
		return u.Limits[0].Used, u.Limits[0].Reserved
	}
	tk, _ := l.Admit("k", r, 300)
	if u, res := used(); u != 0 || res != 300 {
		t.Fatalf("after Admit: used %d reserved %d", u, res)
	}
	tk.Done(250)
	tk.Done(250)
	tk.Cancel()
	if u, res := used(); u != 250 || res != 0 {
		t.Fatalf("after Done twice and Cancel: used %d reserved %d", u, res)
	}
	tk, _ = l.Admit("k", r, 300)
	tk.Cancel()
	tk.Cancel()
	tk.Done(999)
	if u, res := used(); u != 250 || res != 0 {
		t.Fatalf("after Cancel twice and Done: used %d reserved %d", u, res)
	}
	var nilTicket *Ticket
	nilTicket.Done(1)
	nilTicket.Cancel()
	// rules that limit nothing cost nothing
	if tk, d := l.Admit("k", Rules{}, 100); tk != nil || !d.OK || d.Requests.Limit != 0 || d.Tokens.Limit != 0 {
		t.Errorf("no rules: %v %+v", tk, d)
	}
}

func TestUsageIsCountedInTheWindowTheAnswerEnds(t *testing.T) {
	clock := clockAt(59 * time.Second)
	l, _ := openFile(t, clock)
	r := rules(t, nil, []string{"100/m"})
	tk, _ := l.Admit("k", r, 60)
	clock.Advance(2 * time.Second) // the answer ends in the next minute
	tk.Done(70)
	u := l.Usage("k", r).Limits[0]
	if u.Used != 70 || u.Reserved != 0 || !u.Reset.Equal(time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)) {
		t.Errorf("%+v", u)
	}
}

func TestMonthBudgetResetsOnTheFirstUTC(t *testing.T) {
	clock := clockAt(31*24*time.Hour - 30*time.Second) // 2026-01-31 23:59:30
	l, _ := openFile(t, clock)
	r := rules(t, nil, []string{"1k/mo"})
	tk, _ := l.Admit("k", r, 900)
	tk.Done(1000)
	_, d := l.Admit("k", r, 1)
	if d.OK || d.RetryAfter != 30*time.Second {
		t.Fatalf("%+v, want refused until February", d)
	}
	clock.Advance(30 * time.Second)
	if _, d := l.Admit("k", r, 1000); !d.OK || d.Tokens.Reset != 28*24*time.Hour {
		t.Errorf("February 1st: %+v (February has 28 days)", d)
	}
}

func TestUsageAndReset(t *testing.T) {
	clock := clockAt(90 * time.Second)
	l, _ := openFile(t, clock)
	ra := rules(t, []string{"10/m", "100/d"}, []string{"50k/d"})
	rb := rules(t, nil, []string{"1k/h"})
	for range 3 {
		tk, _ := l.Admit("a", ra, 500)
		tk.Done(400)
	}
	held, _ := l.Admit("a", ra, 500)
	defer held.Cancel()
	all := l.All(map[string]Rules{"b": rb, "a": ra})
	if len(all) != 2 || all[0].Key != "a" || all[1].Key != "b" {
		t.Fatalf("All: %+v", all)
	}
	want := []LimitUsage{
		{Kind: Requests, Limit: Limit{10, Minute}, Used: 4, Remaining: 6, Reset: time.Date(2026, 1, 1, 0, 2, 0, 0, time.UTC)},
		{Kind: Requests, Limit: Limit{100, Day}, Used: 4, Remaining: 96, Reset: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
		{Kind: Tokens, Limit: Limit{50_000, Day}, Used: 1200, Reserved: 500, Remaining: 48_300, Reset: time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC)},
	}
	for i, w := range want {
		if got := all[0].Limits[i]; got != w {
			t.Errorf("limit %d: %+v, want %+v", i, got, w)
		}
	}
	if got := all[1].Limits[0]; got.Used != 0 || got.Remaining != 1000 {
		t.Errorf("an unused key: %+v", got)
	}
	if err := l.Reset("a"); err != nil {
		t.Fatal(err)
	}
	u := l.Usage("a", ra)
	if u.Limits[0].Used != 0 || u.Limits[2].Used != 0 || u.Limits[2].Reserved != 500 {
		t.Errorf("after Reset (the request in flight keeps its reservation): %+v", u)
	}
}

// An estimate larger than the budget itself is not
// refused forever. It goes alone, when nothing is reserved and the window
// is not spent, and everything else waits for it.
func TestAnEstimateLargerThanTheBudgetGoesAlone(t *testing.T) {
	clock := clockAt(time.Hour)
	l, _ := openFile(t, clock)
	r := rules(t, nil, []string{"1000/d"})

	// beside a request in flight, it waits
	small, d := l.Admit("k", r, 100)
	if !d.OK {
		t.Fatal(d)
	}
	if _, d := l.Admit("k", r, 4000); d.OK || d.Reason != ReasonTokens {
		t.Fatalf("an oversized request admitted beside one in flight: %+v", d)
	}
	small.Done(200)

	// alone, with the window under its limit, it passes and reserves all
	big, d := l.Admit("k", r, 4000)
	if !d.OK {
		t.Fatalf("an oversized request refused with nothing in flight and 200 of 1000 used: %+v", d)
	}
	if u := l.Usage("k", r).Limits[0]; u.Used != 200 || u.Reserved != 4000 || u.Remaining != 0 {
		t.Errorf("while it runs: %+v", u)
	}
	// everything else waits for it: the overshoot is one request
	if _, d := l.Admit("k", r, 1); d.OK {
		t.Error("a small request admitted beside the oversized one")
	}
	if _, d := l.Admit("k", r, 4000); d.OK {
		t.Error("a second oversized request admitted beside the first")
	}
	big.Done(3000)
	if u := l.Usage("k", r).Limits[0]; u.Used != 3200 || u.Reserved != 0 {
		t.Errorf("after it: %+v", u)
	}
	// a spent window admits nothing, however large or small
	if _, d := l.Admit("k", r, 4000); d.OK || d.RetryAfter != 23*time.Hour {
		t.Errorf("an oversized request on a spent window: %+v", d)
	}
	if _, d := l.Admit("k", r, 1); d.OK {
		t.Error("a small request on a spent window")
	}
	// the next window admits it again, alone
	clock.Advance(23 * time.Hour)
	big, d = l.Admit("k", r, 4000)
	if !d.OK {
		t.Fatalf("next day: %+v", d)
	}
	defer big.Cancel()
	if _, d := l.Admit("k", r, 1); d.OK {
		t.Error("next day, a small request admitted beside the oversized one")
	}
}

// The exception is per limit: an estimate over the minute's budget but
// within the day's still needs the day's room.
func TestAnOversizedEstimateStillFitsTheOtherLimits(t *testing.T) {
	l, _ := openFile(t, clockAt(time.Hour))
	r := rules(t, nil, []string{"100/m", "1000/d"})
	tk, d := l.Admit("k", r, 900) // over the minute's 100, alone: admitted
	if !d.OK {
		t.Fatal(d)
	}
	tk.Done(50)
	// the minute has 50 of 100 used and nothing in flight; the day 50 of 1000
	tk, d = l.Admit("k", r, 960)
	if d.OK {
		tk.Cancel()
		t.Fatalf("admitted 960 tokens on a day with 950 left: %+v", d)
	}
	tk.Cancel()
	tk, d = l.Admit("k", r, 950)
	if !d.OK {
		t.Fatalf("an estimate over the minute's budget and within the day's refused: %+v", d)
	}
	tk.Cancel()
}

// A request whose answer nothing bounds (AdmitAlone) needs what it is
// expected to use within what is left and nothing in flight; admitted, it
// holds every budget whole, so nothing runs beside it. A refusal that only
// what is in flight makes says so (Held): the budget is not spent.
func TestARequestAloneHoldsEveryBudget(t *testing.T) {
	clock := clockAt(time.Hour)
	l, _ := openFile(t, clock)
	r := rules(t, nil, []string{"20000/d", "1M/mo"})

	small, d := l.Admit("k", r, 100)
	if !d.OK {
		t.Fatal(d)
	}
	if _, d := l.AdmitAlone("k", r, 1000); d.OK || !d.Held {
		t.Fatalf("admitted beside a request in flight, or not told it is held: %+v", d)
	}
	small.Done(5000)

	alone, d := l.AdmitAlone("k", r, 1000)
	if !d.OK {
		t.Fatalf("refused with nothing in flight and 5000 of 20000 used: %+v", d)
	}
	u := l.Usage("k", r)
	if day, month := u.Limits[0], u.Limits[1]; day.Reserved != 1_000_000 || day.Remaining != 0 || month.Remaining != 0 {
		t.Errorf("while it runs: %+v", u.Limits)
	}
	if _, d := l.Admit("k", r, 1); d.OK || !d.Held {
		t.Errorf("a small request beside it: %+v", d)
	}
	alone.Done(14_000)

	// 19000 of 20000 used: what it is expected to use no longer fits
	if _, d := l.AdmitAlone("k", r, 1001); d.OK || d.Held {
		t.Errorf("admitted past what is left, or told the budget is only held: %+v", d)
	}
	last, d := l.AdmitAlone("k", r, 1000)
	if !d.OK {
		t.Fatalf("what is left fits it: %+v", d)
	}
	last.Cancel()
	if u := l.Usage("k", r).Limits[0]; u.Used != 19000 || u.Reserved != 0 {
		t.Errorf("after a cancel: %+v", u)
	}
}
