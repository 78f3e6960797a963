package engines

import (
	"fmt"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
)

func fixture(t *testing.T, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func TestParseSignalsReadsWhatRealEnginesPrint(t *testing.T) {
	for _, c := range []struct {
		file             string
		running, waiting float64
		kv               float64
		kind             string
		series           int
	}{
		{"metrics-llama-server-fresh.txt", 0, 0, -1, kindLlama, 12},
		{"metrics-vllm.txt", 2, 1, 0.0625, kindVLLM, 7},
		{"metrics-sglang.txt", 3, 2, 0.28, kindSGLang, 5},
	} {
		s, series, err := ParseSignals(strings.NewReader(fixture(t, c.file)))
		if err != nil {
			t.Fatalf("%s: %v", c.file, err)
		}
		if s.Running != c.running || s.Waiting != c.waiting || s.KVCache != c.kv || s.kind != c.kind || s.Skipped != 0 {
			t.Errorf("%s: %+v", c.file, s)
		}
		if len(series) != c.series {
			t.Errorf("%s: %d series, want %d: %+v", c.file, len(series), c.series, series)
		}
	}
	// ollama has no /metrics: its 404 body is not an exposition
	if _, _, err := ParseSignals(strings.NewReader(fixture(t, "metrics-ollama.txt"))); err == nil {
		t.Error("ollama's 404 body parsed as metrics")
	}
}

func TestParseSignalsTakesNaNAndInfinityAsEnginesSpellThem(t *testing.T) {
	for _, v := range []string{"NaN", "nan", "-nan", "+nan", "-NaN", "nan(ind)", "-nan(ind)", "+Inf", "-Inf", "inf", "INF", "-infinity"} {
		page := "# TYPE llamacpp:x gauge\nllamacpp:x{a=\"b } c\"} " + v + "\nllamacpp:requests_processing 2\n"
		s, series, err := ParseSignals(strings.NewReader(page))
		if err != nil {
			t.Fatalf("%s: %v", v, err)
		}
		if s.Skipped != 0 || s.Running != 2 || len(series) != 2 {
			t.Fatalf("%s: %+v %+v", v, s, series)
		}
		x := series[1].Value // sorted by name: requests_processing, x
		if strings.Contains(strings.ToLower(v), "nan") != math.IsNaN(x) || strings.Contains(strings.ToLower(v), "inf") != math.IsInf(x, 0) {
			t.Fatalf("%s read as %v", v, x)
		}
	}
}

func TestANaNLoadCountsForNothing(t *testing.T) {
	s, _, err := ParseSignals(strings.NewReader("vllm:num_requests_running -nan\nvllm:num_requests_waiting 1\nvllm:kv_cache_usage_perc NaN\n"))
	if err != nil {
		t.Fatal(err)
	}
	if s.Running != 0 || s.Waiting != 1 || s.KVCache != -1 {
		t.Fatalf("%+v", s)
	}
}

func TestParseSignalsSkipsASampleItCannotReadAndCountsIt(t *testing.T) {
	page := "llamacpp:requests_processing 3\n" +
		"llamacpp:broken{a=\"1\" 7\n" + // unclosed labels
		"llamacpp:bad_value twelve\n" +
		"llamacpp:requests_deferred 1\n"
	s, series, err := ParseSignals(strings.NewReader(page))
	if err != nil {
		t.Fatal(err)
	}
	if s.Skipped != 2 || s.Running != 3 || s.Waiting != 1 || len(series) != 2 {
		t.Fatalf("%+v %+v", s, series)
	}
	// a page of nothing but bad lines is still not a page
	var b strings.Builder
	for range maxSkippedLines + 1 {
		b.WriteString("x y z\n")
	}
	if _, _, err := ParseSignals(strings.NewReader(b.String())); err == nil {
		t.Fatal("a page of bad lines parsed")
	}
}

// slotsEngine is signalEngine with a /slots beside the /metrics.
func slotsEngine(t *testing.T, metrics func() (int, string), slots string) (*Engine, *atomic.Int32) {
	t.Helper()
	var slotReads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			code, body := metrics()
			w.WriteHeader(code)
			fmt.Fprint(w, body)
		case "/slots":
			slotReads.Add(1)
			fmt.Fprint(w, slots)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	e, _ := fakeClockEngine(t, Config{Name: "remote", To: srv.URL, Models: []string{"m"}, Signals: SignalsMetrics})
	return e, &slotReads
}

func TestAFreshLlamaServerHasItsCapacityFromItsFirstRead(t *testing.T) {
	e, _ := slotsEngine(t, func() (int, string) { return 200, fixture(t, "metrics-llama-server-fresh.txt") }, fixture(t, "slots-llama-server-2024.json"))
	e.ReadSignals()
	s, ok := e.Signal()
	if !ok || s.Slots != 2 || s.SlotsBusy != 0 || e.Occupancy().Capacity != 2 {
		t.Fatalf("%+v %v capacity %d", s, ok, e.Occupancy().Capacity)
	}
}

func TestSlotsAreReadWhenTheMetricsAreNot(t *testing.T) {
	for _, m := range []struct {
		code int
		body string
	}{{200, "<html>oops</html>"}, {501, "metrics are not enabled"}} {
		e, reads := slotsEngine(t, func() (int, string) { return m.code, m.body }, fixture(t, "slots-llama-server.json"))
		e.ReadSignals()
		s, ok := e.Signal()
		if !ok || reads.Load() != 1 || s.Slots != 2 || s.SlotsBusy != 1 || s.Running != 1 || e.Occupancy().Capacity != 2 {
			t.Fatalf("metrics %d: %+v %v", m.code, s, ok)
		}
	}
}

func TestAnotherEnginesPageIsNotAskedForSlots(t *testing.T) {
	e, reads := slotsEngine(t, func() (int, string) { return 200, fixture(t, "metrics-vllm.txt") }, "[]")
	e.ReadSignals()
	if s, ok := e.Signal(); !ok || s.Running != 2 || reads.Load() != 0 {
		t.Fatalf("%+v %v, %d slot reads", s, ok, reads.Load())
	}
}
