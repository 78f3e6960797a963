package engines

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

const llamaMetrics = `# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total 1234
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing 4
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred 3
`

const vllmMetrics = `# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="qwen"} 7.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{engine="0",model_name="qwen"} 2.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{engine="0",model_name="qwen"} 0.42
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{le="0.1",model_name="qwen"} 1.0
vllm:time_to_first_token_seconds_bucket{le="+Inf",model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_count{model_name="qwen"} 2.0
vllm:time_to_first_token_seconds_sum{model_name="qwen"} 0.3
# HELP process_cpu_seconds_total Total user and system CPU time spent in seconds.
# TYPE process_cpu_seconds_total counter
process_cpu_seconds_total 12.5
`

func TestParseSignalsReadsLlamaServerAndVLLM(t *testing.T) {
	s, series, err := ParseSignals(strings.NewReader(llamaMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 4 || s.Waiting != 3 || s.KVCache != -1 {
		t.Fatalf("llama-server: %+v", s)
	}
	if len(series) != 3 || series[0].Name != "llamacpp:prompt_tokens_total" || !series[0].Counter {
		t.Fatalf("llama-server series: %+v", series)
	}
	s, series, err = ParseSignals(strings.NewReader(vllmMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 7 || s.Waiting != 2 || s.KVCache != 0.42 {
		t.Fatalf("vLLM: %+v", s)
	}
	// the histogram and the process's own metrics are not re-exposed
	if len(series) != 3 {
		t.Fatalf("vLLM series: %+v", series)
	}
	if l := series[0].Labels; len(l) != 2 || l[0] != [2]string{"engine", "0"} || l[1] != [2]string{"model_name", "qwen"} {
		t.Fatalf("labels %v", l)
	}
}

func TestAnEngineThatPublishesBothNamesIsCountedOnce(t *testing.T) {
	s, _, err := ParseSignals(strings.NewReader(llamaMetrics + vllmMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 4 || s.Waiting != 3 {
		t.Fatalf("%+v, want llama-server's names only", s)
	}
}

func TestParseSignalsKeepsABoundedNumberOfSeries(t *testing.T) {
	var b strings.Builder
	b.WriteString("# TYPE vllm:x gauge\n")
	for i := range maxSignalsSeries + 100 {
		fmt.Fprintf(&b, "vllm:x{i=\"%d\"} 1\n", i)
	}
	_, series, err := ParseSignals(strings.NewReader(b.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(series) != maxSignalsSeries {
		t.Fatalf("%d series, want the cap %d", len(series), maxSignalsSeries)
	}
}

func TestParseSignalsRefusesWhatIsNotMetrics(t *testing.T) {
	if _, _, err := ParseSignals(strings.NewReader("<html>not found</html>")); err == nil {
		t.Fatal("an HTML page parsed as metrics")
	}
}

// signalEngine is a remote engine with signals on, on a fake clock, whose
// /metrics answers body().
func signalEngine(t *testing.T, body func() string) (*Engine, *clock.Fake, *atomic.Int32) {
	t.Helper()
	var reads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/metrics" {
			http.NotFound(w, r)
			return
		}
		reads.Add(1)
		fmt.Fprint(w, body())
	}))
	t.Cleanup(srv.Close)
	e, clk := fakeClockEngine(t, Config{Name: "remote", To: srv.URL, Models: []string{"m"}, Signals: SignalsMetrics})
	return e, clk, &reads
}

// fakeClockEngine is an engine of cfg (validated) on a fake clock,
// destructed with the test.
func fakeClockEngine(t *testing.T, cfg Config) (*Engine, *clock.Fake) {
	t.Helper()
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e, err := New(cfg, tr, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Destruct() })
	clk := clock.NewFake()
	e.SetClock(clk)
	return e, clk
}

func TestASignalOlderThanItsStalenessLimitIsIgnored(t *testing.T) {
	e, clk, _ := signalEngine(t, func() string { return llamaMetrics })
	if _, ok := e.Signal(); ok {
		t.Fatal("a signal before any read")
	}
	if n := e.Load(); n != 0 {
		t.Fatalf("load %d before any read", n)
	}
	e.ReadSignals()
	s, ok := e.Signal()
	if !ok || s.Running != 4 || s.Waiting != 3 {
		t.Fatalf("after a read: %+v %v", s, ok)
	}
	if n := e.Load(); n != 7 || !e.Occupancy().Saturated {
		t.Fatalf("load %d saturated %v, want 4 running + 3 deferred, saturated", n, e.Occupancy().Saturated)
	}
	if len(e.SignalSeries()) != 3 {
		t.Fatalf("series %+v", e.SignalSeries())
	}
	clk.Advance(DefaultSignalsStale)
	if _, ok := e.Signal(); !ok {
		t.Fatal("stale at exactly the limit")
	}
	clk.Advance(time.Millisecond)
	if _, ok := e.Signal(); ok || e.Load() != 0 || e.Occupancy().Saturated || e.SignalSeries() != nil {
		t.Fatalf("a stale signal still counts: load %d", e.Load())
	}
}

func TestSignalsAreReadInTheBackgroundEveryInterval(t *testing.T) {
	var waiting atomic.Int32
	e, clk, reads := signalEngine(t, func() string {
		return fmt.Sprintf("vllm:num_requests_running 1\nvllm:num_requests_waiting %d\n", waiting.Load())
	})
	e.StartSignals()
	clk.WaitForTimers(1) // the first read, at once, is recorded
	if s, ok := e.Signal(); !ok || s.Waiting != 0 || e.Occupancy().Saturated {
		t.Fatalf("first read: %+v %v", s, ok)
	}
	waiting.Store(5)
	clk.Advance(DefaultSignalsInterval)
	clk.WaitForTimers(1)
	if s, ok := e.Signal(); !ok || s.Waiting != 5 || e.Load() != 6 {
		t.Fatalf("second read: %+v %v load %d", s, ok, e.Load())
	}
	if n := reads.Load(); n != 2 {
		t.Fatalf("%d reads, want 2 (one at once, one per interval)", n)
	}
}

func TestAFailedReadLeavesTheLastOneToGrowStale(t *testing.T) {
	var broken atomic.Bool
	e, clk, _ := signalEngine(t, func() string {
		if broken.Load() {
			return "garbage{"
		}
		return llamaMetrics
	})
	e.ReadSignals()
	broken.Store(true)
	clk.Advance(time.Second)
	e.ReadSignals()
	if s, ok := e.Signal(); !ok || s.Running != 4 {
		t.Fatalf("%+v %v", s, ok)
	}
	clk.Advance(2 * time.Second)
	if _, ok := e.Signal(); ok {
		t.Fatal("a failed read refreshed the signal")
	}
}

func TestSignalsOffReadNothing(t *testing.T) {
	cfg := Config{Name: "r", To: "http://127.0.0.1:1", Models: []string{"m"}}.WithDefaults()
	if cfg.Signals != SignalsOff || cfg.SignalsInterval != 0 {
		t.Fatalf("default %+v", cfg.Signals)
	}
	bad := Config{Name: "r", To: "http://127.0.0.1:1", Models: []string{"m"}, Signals: "slots"}
	if err := bad.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "signals takes metrics or off") {
		t.Fatalf("got %v", err)
	}
	neg := Config{Name: "r", To: "http://127.0.0.1:1", Models: []string{"m"}, Signals: SignalsMetrics, SignalsStale: caddy.Duration(-1)}
	if err := neg.WithDefaults().Validate(); err == nil {
		t.Fatal("a negative staleness limit passed")
	}
}
