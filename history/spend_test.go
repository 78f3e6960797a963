package history

import (
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

func costing(c clock.Clock, key, model, engine string, cost price.Amount) Record {
	r := rec(c, model, 200)
	r.Key, r.Engine, r.Cost = key, engine, cost
	return r
}

// What each key spent on which model and engine this month, to the
// nano-dollar: last month's requests left out, dearest first.
func TestSpendSumsTheWindowByKeyModelAndEngine(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(100, 60*24*time.Hour)
		c.Advance(20 * 24 * time.Hour) // 21 January
		s.Add(costing(c, "alice", "claude", "anthropic", 999_999_999))
		c.Advance(14 * 24 * time.Hour) // 4 February
		for _, r := range []Record{
			costing(c, "alice", "claude", "anthropic", 175_500_000),
			costing(c, "alice", "claude", "anthropic", 175_500_001),
			costing(c, "alice", "qwen", "local", 0),
			costing(c, "bob", "claude", "bedrock", 18_800_000),
		} {
			s.Add(r)
		}
		s.Sync()
		q, err := ParseSpendQuery(url.Values{}, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		sp, err := s.Spend(q)
		if err != nil {
			t.Fatal(err)
		}
		if sp.Since != time.Date(2026, 2, 1, 0, 0, 0, 0, time.UTC) || sp.Partial || sp.Requests != 4 || sp.Cost.String() != "0.369800001" {
			t.Fatalf("%+v", sp)
		}
		want := []SpendGroup{
			{Key: "alice", Model: "claude", Engine: "anthropic", Requests: 2, TokensIn: 6, TokensOut: 10, Cost: 351_000_001},
			{Key: "bob", Model: "claude", Engine: "bedrock", Requests: 1, TokensIn: 3, TokensOut: 5, Cost: 18_800_000},
			{Key: "alice", Model: "qwen", Engine: "local", Requests: 1, TokensIn: 3, TokensOut: 5},
		}
		if len(sp.Groups) != len(want) {
			t.Fatalf("%+v", sp.Groups)
		}
		for i := range want {
			if sp.Groups[i] != want[i] {
				t.Errorf("group %d: %+v, want %+v", i, sp.Groups[i], want[i])
			}
		}
		// by model alone, for one key
		q, _ = ParseSpendQuery(url.Values{"by": {"model"}, "key": {"alice"}}, c.Now())
		sp, _ = s.Spend(q)
		if len(sp.Groups) != 2 || sp.Groups[0] != (SpendGroup{Model: "claude", Requests: 2, TokensIn: 6, TokensOut: 10, Cost: 351_000_001}) {
			t.Fatalf("%+v", sp.Groups)
		}
		// since 30 days back: January's request too
		q, _ = ParseSpendQuery(url.Values{"since": {"720h"}}, c.Now())
		if sp, _ = s.Spend(q); sp.Requests != 5 || sp.Partial {
			t.Fatalf("%+v", sp)
		}
	})
}

// Grouped by day: each request counts on the UTC day it arrived, as a
// budget's d window counts it.
func TestSpendGroupsByTheUTCDay(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(100, 60*24*time.Hour)
		c.Advance(time.Date(2026, 2, 3, 23, 59, 0, 0, time.UTC).Sub(c.Now()))
		s.Add(costing(c, "alice", "claude", "anthropic", 100_000_000))
		s.Add(costing(c, "bob", "claude", "anthropic", 1))
		c.Advance(2 * time.Minute) // 4 February, 00:01
		s.Add(costing(c, "alice", "claude", "anthropic", 20_000_000))
		s.Add(costing(c, "alice", "qwen", "local", 0))
		s.Sync()
		q, err := ParseSpendQuery(url.Values{"by": {"key,day"}, "since": {"48h"}}, c.Now())
		if err != nil {
			t.Fatal(err)
		}
		sp, err := s.Spend(q)
		if err != nil {
			t.Fatal(err)
		}
		want := []SpendGroup{
			{Key: "alice", Day: "2026-02-03", Requests: 1, TokensIn: 3, TokensOut: 5, Cost: 100_000_000},
			{Key: "alice", Day: "2026-02-04", Requests: 2, TokensIn: 6, TokensOut: 10, Cost: 20_000_000},
			{Key: "bob", Day: "2026-02-03", Requests: 1, TokensIn: 3, TokensOut: 5, Cost: 1},
		}
		if !slices.Equal(sp.Groups, want) {
			t.Fatalf("%+v\nwant %+v", sp.Groups, want)
		}
		if _, err := ParseSpendQuery(url.Values{"by": {"day,day"}}, c.Now()); err == nil {
			t.Fatal("by day twice was taken")
		}
	})
}

// A window older than the history's max_age is partial, and says from
// when it counts.
func TestSpendSaysWhenTheHistoryNoLongerHoldsTheWindow(t *testing.T) {
	each(t, func(t *testing.T, open func(int, time.Duration) *Store, c *clock.Fake) {
		s := open(100, 24*time.Hour)
		c.Advance(10*24*time.Hour + time.Hour)
		q, _ := ParseSpendQuery(url.Values{"window": {"mo"}}, c.Now())
		sp, err := s.Spend(q)
		if err != nil || !sp.Partial || sp.From != c.Now().Add(-24*time.Hour).UTC() {
			t.Fatalf("%+v %v", sp, err)
		}
	})
}

func TestParseSpendQueryRefusesWhatItCannotSum(t *testing.T) {
	now := clock.NewFake().Now()
	for _, q := range []url.Values{
		{"window": {"w"}},
		{"window": {"d"}, "since": {"1h"}},
		{"by": {"key,user"}},
		{"by": {"key,key"}},
		{"since": {"yesterday"}},
	} {
		if _, err := ParseSpendQuery(q, now); err == nil {
			t.Errorf("%v accepted", q)
		}
	}
	q, err := ParseSpendQuery(url.Values{"window": {"d"}, "by": {"engine,key"}}, now.Add(30*time.Hour))
	if err != nil || q.Filter.Since != now.Add(24*time.Hour).UnixMilli() || len(q.By) != 2 {
		t.Fatalf("%+v %v", q, err)
	}
}
