package quota

import (
	"encoding/json"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

const dollar = 1_000_000_000 // nano-dollars

func spendRules(t *testing.T, specs ...string) Rules {
	t.Helper()
	var r Rules
	for _, s := range specs {
		l, err := ParseSpend(s)
		if err != nil {
			t.Fatal(err)
		}
		r.Spend = append(r.Spend, l.Limit())
	}
	return r
}

func TestParseSpendReadsDollarsPerWindow(t *testing.T) {
	for spec, want := range map[string]SpendLimit{
		"1/d":      {N: dollar, Window: Day},
		"0.50/h":   {N: dollar / 2, Window: Hour},
		"1.5k/mo":  {N: 1500 * dollar, Window: Month},
		"$20/week": {},
	} {
		got, err := ParseSpend(spec)
		if want.N == 0 {
			if err == nil {
				t.Errorf("%s: %+v", spec, got)
			}
			continue
		}
		if err != nil || got != want {
			t.Errorf("%s: %+v %v, want %+v", spec, got, err, want)
		}
		if back, err := ParseSpend(got.String()); err != nil || back != got {
			t.Errorf("%s → %s → %+v %v", spec, got, back, err)
		}
	}
	if s := (SpendLimit{N: dollar, Window: Day}).String(); s != "1/d" {
		t.Errorf("%q", s)
	}
	for _, bad := range []string{"1", "0/d", "-1/d", "1/week", "1e3/d", "0.0000000001/d"} {
		if _, err := ParseSpend(bad); err == nil {
			t.Errorf("%s accepted", bad)
		}
	}
}

// A money budget is a token budget's twin in another row: used +
// reserved + the request's estimate must fit, the estimate is held while
// in flight, the actual cost counted when it ends, and over it the
// refusal says spend.
func TestAMoneyBudgetIsReservedAndSettled(t *testing.T) {
	clock := clockAt(time.Hour)
	l, _ := openFile(t, clock)
	r := spendRules(t, "1/d")
	t1, d := l.AdmitCost("k", r, Cost{Money: 600_000_000}, false)
	if !d.OK || d.Spend != (Headroom{Limit: dollar, Remaining: 400_000_000, Reset: 23 * time.Hour}) {
		t.Fatalf("%+v", d)
	}
	// $0.60 held: $0.50 more does not fit
	if _, d := l.AdmitCost("k", r, Cost{Money: dollar / 2}, false); d.OK || d.Reason != ReasonSpend || !d.Held {
		t.Fatalf("%+v", d)
	}
	t1.DoneCost(Cost{Tokens: 999, Money: 300_000_000}) // it cost $0.30
	t2, d := l.AdmitCost("k", r, Cost{Money: dollar / 2}, false)
	if !d.OK {
		t.Fatalf("%+v", d)
	}
	t2.DoneCost(Cost{Money: dollar / 2})
	u := l.Usage("k", r)
	if len(u.Limits) != 1 || u.Limits[0].Kind != Spend || u.Limits[0].Used != 800_000_000 || u.Limits[0].Remaining != 200_000_000 {
		t.Fatalf("%+v", u)
	}
	// spent: refused until the day ends, the request still a request
	t3, d := l.AdmitCost("k", r, Cost{Money: 300_000_000}, false)
	if d.OK || d.Reason != ReasonSpend || d.Held || d.RetryAfter != 23*time.Hour || t3 == nil {
		t.Fatalf("%+v %v", d, t3)
	}
	// its over_budget fallback's answer is counted, at its cost (free here)
	t3.DoneCost(Cost{Tokens: 50})
	if u := l.Usage("k", r); u.Limits[0].Used != 800_000_000 || u.Limits[0].Reserved != 0 {
		t.Fatalf("%+v", u)
	}
}

// Tokens are checked before money: a request over both is refused for
// its tokens; over money alone, for its spend.
func TestTokensAreCheckedBeforeMoney(t *testing.T) {
	l, _ := openFile(t, clockAt(time.Hour))
	r := rules(t, nil, []string{"100/d"})
	r.Spend = spendRules(t, "1/d").Spend
	tk, _ := l.AdmitCost("k", r, Cost{Tokens: 60, Money: 10}, false)
	tk.DoneCost(Cost{Tokens: 60, Money: 900_000_000})
	if _, d := l.AdmitCost("k", r, Cost{Tokens: 50, Money: 200_000_000}, false); d.Reason != ReasonTokens {
		t.Fatalf("%+v", d)
	}
	if _, d := l.AdmitCost("k", r, Cost{Tokens: 10, Money: 200_000_000}, false); d.Reason != ReasonSpend {
		t.Fatalf("%+v", d)
	}
}

// 50 concurrent requests each reserving $0.12 and costing $0.10 on a $1
// budget: admitted while their reservations fit, so at most the budget is
// used (the overshoot of a burst is bounded by what answers cost beyond
// their reservations, here nothing).
func TestABurstOnAMoneyBudgetStaysWithinIt(t *testing.T) {
	l, _ := openFile(t, clockAt(time.Hour))
	r := spendRules(t, "1/d")
	var wg sync.WaitGroup
	var mu sync.Mutex
	var tickets []*Ticket
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if tk, d := l.AdmitCost("k", r, Cost{Money: 120_000_000}, false); d.OK {
				mu.Lock()
				tickets = append(tickets, tk)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(tickets) != 8 { // 8 × $0.12 = $0.96
		t.Fatalf("%d admitted", len(tickets))
	}
	for _, tk := range tickets {
		tk.DoneCost(Cost{Money: 100_000_000})
	}
	if u := l.Usage("k", r).Limits[0]; u.Used != 800_000_000 {
		t.Fatalf("%+v", u)
	}
}

// A request alone (its answer unbounded) holds every money budget whole,
// as it holds every token budget.
func TestARequestAloneHoldsTheWholeMoneyBudget(t *testing.T) {
	l, _ := openFile(t, clockAt(time.Hour))
	r := spendRules(t, "1/d")
	tk, d := l.AdmitCost("k", r, Cost{Money: 10_000_000}, true)
	if !d.OK {
		t.Fatal(d)
	}
	if _, d := l.AdmitCost("k", r, Cost{Money: 1}, false); d.OK || !d.Held {
		t.Fatalf("%+v", d)
	}
	tk.DoneCost(Cost{Money: 30_000_000})
	if _, d := l.AdmitCost("k", r, Cost{Money: 1}, false); !d.OK {
		t.Fatalf("%+v", d)
	}
}

// A key's ticket and its team's end together.
func TestJoinedTicketsEndTogether(t *testing.T) {
	l, _ := openFile(t, clockAt(time.Hour))
	r := spendRules(t, "1/d")
	a, _ := l.AdmitCost("alice", r, Cost{Money: 100}, false)
	team, _ := l.AdmitCost("team:eng", r, Cost{Money: 100}, false)
	tk := Join(a, team)
	tk.DoneCost(Cost{Money: 70})
	tk.DoneCost(Cost{Money: 70}) // once only
	for _, name := range []string{"alice", "team:eng"} {
		if u := l.Usage(name, r).Limits[0]; u.Used != 70 || u.Reserved != 0 {
			t.Errorf("%s: %+v", name, u)
		}
	}
	if Join(nil, team) != team || Join(a, nil) != a {
		t.Error("Join with nil")
	}
}

// The admin API writes a money budget's counts in dollars, exactly, and
// reads them back.
func TestAMoneyBudgetsUsageIsWrittenInDollars(t *testing.T) {
	u := LimitUsage{Kind: Spend, Limit: Limit{N: dollar, Window: Day}, Used: 800_000_001, Reserved: 5, Remaining: 199_999_994, Reset: time.Unix(86400, 0).UTC()}
	b, err := json.Marshal(u)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"kind":"spend","limit":"1/d","used":0.800000001,"reserved":0.000000005,"remaining":0.199999994,"reset":"1970-01-02T00:00:00Z"}`; string(b) != want {
		t.Fatalf("%s\nwant %s", b, want)
	}
	var back LimitUsage
	if err := json.Unmarshal(b, &back); err != nil || back != u {
		t.Fatalf("%+v %v", back, err)
	}
	tokens := LimitUsage{Kind: Tokens, Limit: Limit{N: 200_000, Window: Day}, Used: 5, Remaining: 199_995}
	b, _ = json.Marshal(tokens)
	if !strings.Contains(string(b), `"limit":"200k/d","used":5,"remaining":199995`) {
		t.Fatalf("%s", b)
	}
	if err := json.Unmarshal(b, &back); err != nil || back != tokens {
		t.Fatalf("%+v %v", back, err)
	}
}

// The embedded store keeps money counters across a restart, in their own
// row.
func TestMoneySurvivesARestartOfTheEmbeddedStore(t *testing.T) {
	clock := clockAt(time.Hour)
	l, path := openFile(t, clock)
	r := spendRules(t, "1/d")
	r.Tokens = rules(t, nil, []string{"1M/d"}).Tokens
	tk, _ := l.AdmitCost("k", r, Cost{Tokens: 10, Money: 10}, false)
	tk.DoneCost(Cost{Tokens: 123, Money: 456_000_000})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	again, err := Open(Config{Path: path, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	defer again.Close()
	u := again.Usage("k", r)
	if u.Limits[0].Kind != Tokens || u.Limits[0].Used != 123 || u.Limits[1].Kind != Spend || u.Limits[1].Used != 456_000_000 {
		t.Fatalf("%+v", u)
	}
}

// Two front doors on one Redis share a money budget as they share a token
// budget: what one spent, the other refuses once it has synced.
func TestTwoFrontDoorsShareAMoneyBudget(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name()}
	a := frontDoor(t, rc, clock, nil)
	b := frontDoor(t, rc, clock, nil)
	r := spendRules(t, "1/d")
	tk, d := a.AdmitCost("k", r, Cost{Money: dollar / 10}, false)
	if !d.OK {
		t.Fatal(d)
	}
	tk.DoneCost(Cost{Money: 700_000_000})
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	b.AdmitCost("k", r, Cost{Money: 1}, false)
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, d := b.AdmitCost("k", r, Cost{Money: 400_000_000}, false); d.OK || d.Reason != ReasonSpend {
		t.Errorf("b admitted $0.40 on a $1 budget with $0.70 spent at a: %+v", d)
	}
	start, _ := Day.bounds(clock.Now().Unix())
	if n := srv.get(rc.Prefix + ":{k}:s:d:" + strconv.FormatInt(start, 10)); n != 700_000_000 {
		t.Errorf("Redis holds %d nano-dollars, want 700000000", n)
	}
	if ua, ub := a.Usage("k", r).Limits[0].Used, b.Usage("k", r).Limits[0].Used; ua != 700_000_000 || ub != 700_000_000 {
		t.Errorf("the doors disagree: %d and %d", ua, ub)
	}
}
