package statuspage

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// The spend charts: each key's and each model's cost per UTC day, the
// days before the range left out, a day without requests at zero, and the
// totals those of GET /llm_gateway/spend's sums over the same days.
func TestSpendChartsSumEachKeyAndModelPerUTCDay(t *testing.T) {
	clk := clock.NewFake()
	clk.Advance(time.Date(2026, 1, 10, 12, 0, 0, 0, time.UTC).Sub(clk.Now()))
	st, err := history.Open(history.Options{Clock: clk, MaxAge: 60 * 24 * time.Hour}) // in memory
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := clk.Now()
	add := func(at time.Time, key, model string, cost price.Amount) {
		st.Add(history.Record{Time: at.UnixMilli(), Key: key, Model: model, Engine: "e", Status: 200, Cost: cost})
	}
	day := func(d, h int) time.Time { return time.Date(2026, 1, d, h, 0, 0, 0, time.UTC) }
	add(day(3, 23), "alice", "claude", 999_000_000) // 8 days back: outside the 7
	add(day(4, 0), "alice", "claude", 175_500_000)  // the first of the 7 days
	add(day(4, 9), "bob", "claude", 18_800_000)
	add(day(10, 11), "alice", "claude", 175_500_000)
	add(day(10, 11), "alice", "qwen", 0)
	add(day(10, 11), "", "qwen", 5_000) // no key
	st.Sync()

	c, err := makeSpend(st, 7, now)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Days) != 7 || c.Days[0] != "2026-01-04" || c.Days[6] != "2026-01-10" || c.Partial {
		t.Fatalf("days %v partial %v", c.Days, c.Partial)
	}
	if c.Cost.String() != "0.369805" {
		t.Fatalf("total %s", c.Cost)
	}
	at := func(vs ...price.Amount) []price.Amount {
		out := make([]price.Amount, 7)
		out[0], out[6] = vs[0], vs[1]
		return out
	}
	wantKeys := []spendRow{
		{Name: "alice", Requests: 3, Cost: 351_000_000, Days: at(175_500_000, 175_500_000)},
		{Name: "bob", Requests: 1, Cost: 18_800_000, Days: at(18_800_000, 0)},
		{Name: "", Requests: 1, Cost: 5_000, Days: at(0, 5_000)},
	}
	wantModels := []spendRow{
		{Name: "claude", Requests: 3, Cost: 369_800_000, Days: at(194_300_000, 175_500_000)},
		{Name: "qwen", Requests: 2, Cost: 5_000, Days: at(0, 5_000)},
	}
	same := func(a, b spendRow) bool {
		return a.Name == b.Name && a.Requests == b.Requests && a.Cost == b.Cost && slices.Equal(a.Days, b.Days)
	}
	if !slices.EqualFunc(c.Keys, wantKeys, same) {
		t.Errorf("keys %+v\nwant %+v", c.Keys, wantKeys)
	}
	if !slices.EqualFunc(c.Models, wantModels, same) {
		t.Errorf("models %+v\nwant %+v", c.Models, wantModels)
	}
	// 30 days: the 3rd's request too
	if c, _ = makeSpend(st, 30, now); c.Cost.String() != "1.368805" || c.Days[0] != "2025-12-12" {
		t.Fatalf("30 days: %s from %s", c.Cost, c.Days[0])
	}
}

func TestSpendChartsAnswerThePagesKeyOnly(t *testing.T) {
	st, err := history.Open(history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	st.Add(history.Record{Time: time.Now().UnixMilli(), Key: "team", Model: "m", Status: 200, Cost: 10_000_000})
	st.Sync()
	ts, _ := newTestServer(t, historySource{&fakeSource{}, st}, NewKeys([]string{"right-key"}))
	if resp := get(t, ts, "/llm/api/spend?days=7", ""); resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	if resp := get(t, ts, "/llm/api/spend?days=9", "right-key"); resp.StatusCode != 400 {
		t.Fatalf("a bad range: %d", resp.StatusCode)
	}
	resp := get(t, ts, "/llm/api/spend?days=30", "right-key")
	var c spendCharts
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || len(c.Days) != 30 || len(c.Keys) != 1 || c.Keys[0].Days[29].String() != "0.01" {
		t.Fatalf("%v %+v", err, c)
	}
	ts, _ = newTestServer(t, &fakeSource{}, NewKeys([]string{"right-key"}))
	if resp := get(t, ts, "/llm/api/spend?days=7", "right-key"); resp.StatusCode != 404 {
		t.Fatalf("history off: %d", resp.StatusCode)
	}
}
