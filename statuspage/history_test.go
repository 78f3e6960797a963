package statuspage

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"go.uber.org/zap"
)

// historySource is a fakeSource with a request history.
type historySource struct {
	*fakeSource
	st *history.Store
}

func (h historySource) History() *history.Store { return h.st }

func TestChartsCountEachBucketAndEngineFromTheHistory(t *testing.T) {
	clk := clock.NewFake()
	st, err := history.Open(history.Options{Clock: clk}) // in memory
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := clk.Now()
	add := func(ago time.Duration, engine string, status int, ttfb, dur float64, tokens int64) {
		st.Add(history.Record{Time: now.Add(-ago).UnixMilli(), Model: "m", Engine: engine, Status: status, TTFBMs: ttfb, DurationMs: dur, TokensIn: 1, TokensOut: tokens, Stream: true})
	}
	add(2*time.Hour, "gpu", 200, 100, 200, 10)     // the day's only
	add(90*time.Second, "gpu", 200, 100, 1100, 50) // 50 tokens in 1 s
	add(80*time.Second, "gpu", 200, 300, 1300, 150)
	add(10*time.Second, "cpu", 503, 0, 5, -1)
	// a whole answer: its first byte is the answer, its attempt's time but
	// the wait for the engine's start made the tokens
	st.Add(history.Record{Time: now.Add(-5 * time.Second).UnixMilli(), Model: "m", Engine: "whole", Status: 200, TTFBMs: 2490, DurationMs: 2500, TokensOut: 50,
		Tries: []history.Try{{Engine: "whole", Reason: "ok", DurationMs: 2500, WaitedMs: 2000}}})
	st.Add(history.Record{Time: now.UnixMilli(), Model: "m", Status: 502, Tries: []history.Try{{Engine: "cpu", Reason: "connect"}}})
	st.Sync()

	c, err := makeCharts(st, chartRanges["1h"], now)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Buckets) != 60 || c.StepMs != 60000 {
		t.Fatalf("%d buckets of %d ms", len(c.Buckets), c.StepMs)
	}
	var ok, server int
	for _, b := range c.Buckets {
		ok, server = ok+b.OK, server+b.Server
	}
	if ok != 3 || server != 2 {
		t.Fatalf("the hour holds %d good and %d failed requests, want 3 and 2", ok, server)
	}
	// both good requests ended in one bucket or two: their speed is 100/s
	var speeds []float64
	for _, b := range c.Buckets {
		if b.TokensSec > 0 {
			speeds = append(speeds, b.TokensSec)
		}
	}
	if len(speeds) == 0 {
		t.Fatal("no bucket has a speed")
	}
	byName := map[string]engineChart{}
	for _, e := range c.Engines {
		byName[e.Name] = e
	}
	if gpu := byName["gpu"]; gpu.Requests != 2 || gpu.TokensSec != 100 || gpu.TTFBP50 != 100 || gpu.TTFBP95 != 300 {
		t.Fatalf("gpu %+v", gpu)
	}
	if whole := byName["whole"]; whole.TokensSec != 100 {
		t.Fatalf("a whole answer's speed: %+v", whole)
	}
	// a failure without an answering engine counts against the engine it tried
	if cpu := byName["cpu"]; cpu.Requests != 2 || cpu.Errors != 2 {
		t.Fatalf("cpu %+v", cpu)
	}
	day, _ := makeCharts(st, chartRanges["1d"], now)
	if len(day.Buckets) != 96 || day.Engines[0].Requests != 3 {
		t.Fatalf("the day: %d buckets, engines %+v", len(day.Buckets), day.Engines)
	}
}

func TestTheHistoryAPIFiltersPagesAndExports(t *testing.T) {
	st, err := history.Open(history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for i := range 3 {
		st.Add(history.Record{Time: time.Now().UnixMilli(), Model: []string{"a", "b", "a"}[i], Key: "team", Status: 200})
	}
	st.Sync()
	ts, _ := newTestServer(t, historySource{&fakeSource{}, st}, NewKeys([]string{"right-key"}))
	if resp := get(t, ts, "/llm/api/history", ""); resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	resp := get(t, ts, "/llm/api/history?model=a&limit=1", "right-key")
	var page history.Page
	if err := json.NewDecoder(resp.Body).Decode(&page); err != nil || len(page.Requests) != 1 || page.Next == 0 || page.Stored != "memory" {
		t.Fatalf("%v %+v", err, page)
	}
	resp = get(t, ts, "/llm/api/history?model=a&format=jsonl", "right-key")
	body, _ := io.ReadAll(resp.Body)
	if n := strings.Count(string(body), "\n"); n != 2 || resp.Header.Get("Content-Type") != "application/x-ndjson" {
		t.Fatalf("export: %d lines, %s", n, resp.Header.Get("Content-Type"))
	}
	if resp := get(t, ts, "/llm/api/history?config=old", "right-key"); resp.StatusCode != 400 {
		t.Fatalf("a bad config filter: %d", resp.StatusCode)
	}
	if resp := get(t, ts, "/llm/api/history?status=9xx", "right-key"); resp.StatusCode != 400 {
		t.Fatalf("a bad status filter: %d", resp.StatusCode)
	}
	if resp := get(t, ts, "/llm/api/charts?range=1w", "right-key"); resp.StatusCode != 400 {
		t.Fatalf("a bad range: %d", resp.StatusCode)
	}
	if resp := get(t, ts, "/llm/api/charts?range=1h", "right-key"); resp.StatusCode != 200 {
		t.Fatalf("charts: %d", resp.StatusCode)
	}
	// without a history (history off): 404
	ts, _ = newTestServer(t, &fakeSource{}, NewKeys([]string{"right-key"}))
	if resp := get(t, ts, "/llm/api/history", "right-key"); resp.StatusCode != 404 {
		t.Fatalf("history off: %d", resp.StatusCode)
	}
}

// The data folder keeps the records of every config that ran: "this
// config only" keeps those of the running config's engines, and those no
// engine answered.
func TestTheHistoryOfThisConfigOnly(t *testing.T) {
	st, err := history.Open(history.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for _, engine := range []string{"old-engine", "now", "", "now"} {
		st.Add(history.Record{Time: time.Now().UnixMilli(), Model: "m", Engine: engine, Status: 200})
	}
	// failures: one tried on a past config's engine, one on this one's
	st.Add(history.Record{Time: time.Now().UnixMilli(), Model: "m", Status: 503, Tries: []history.Try{{Engine: "old-engine", Reason: "503"}}})
	st.Add(history.Record{Time: time.Now().UnixMilli(), Model: "m", Status: 503, Tries: []history.Try{{Engine: "now", Reason: "503"}}})
	st.Sync()
	e, err := engines.New(engines.Config{Name: "now", To: "http://127.0.0.1:9", Models: []string{"m"}}, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destruct()
	ts, _ := newTestServer(t, historySource{&fakeSource{es: []*engines.Engine{e}}, st}, NewKeys([]string{"right-key"}))
	for q, want := range map[string]int{"": 6, "?config=current": 4} {
		var page history.Page
		if err := json.NewDecoder(get(t, ts, "/llm/api/history"+q, "right-key").Body).Decode(&page); err != nil {
			t.Fatal(err)
		}
		if len(page.Requests) != want {
			t.Fatalf("%q: %d records, want %d", q, len(page.Requests), want)
		}
		for _, r := range page.Requests {
			if q != "" && (r.Engine == "old-engine" || len(r.Tries) > 0 && r.Tries[0].Engine == "old-engine") {
				t.Fatalf("%q listed a past config's engine", q)
			}
		}
	}
}
