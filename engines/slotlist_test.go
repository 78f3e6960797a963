package engines

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestParseSlotsCountsBusySlotsInBothShapes(t *testing.T) {
	for _, c := range []struct {
		body        string
		total, busy int
	}{
		{`[{"id":0,"n_ctx":8192,"is_processing":true,"params":{"n_predict":-1},"next_token":{"has_next_token":true}},{"id":1,"is_processing":false}]`, 2, 1},
		{`[{"id":0,"state":1,"prompt":"hello"},{"id":1,"state":0},{"id":2,"state":0}]`, 3, 1}, // before is_processing
		{`[]`, 0, 0},
	} {
		total, busy, err := ParseSlots(strings.NewReader(c.body))
		if err != nil || total != c.total || busy != c.busy {
			t.Fatalf("%s: %d/%d %v, want %d/%d", c.body, busy, total, err, c.busy, c.total)
		}
	}
	for _, bad := range []string{`{"error":{"code":501,"message":"This server does not support slots endpoint."}}`, `[{"id":0,`, `<html>`} {
		if _, _, err := ParseSlots(strings.NewReader(bad)); err == nil {
			t.Fatalf("%s parsed as a slot list", bad)
		}
	}
}

// slotEngine is a remote llama-server on a fake clock whose /metrics
// says running and deferred, and whose /slots lists slots, busy of them
// processing (or answers 501 when slots is negative).
func slotEngine(t *testing.T, running, deferred, slots, busy *atomic.Int32, cfg func(*Config)) (*Engine, *clock.Fake, *atomic.Int32) {
	t.Helper()
	var slotReads atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprintf(w, "llamacpp:requests_processing %d\nllamacpp:requests_deferred %d\n", running.Load(), deferred.Load())
		case "/slots":
			slotReads.Add(1)
			if slots.Load() < 0 {
				http.Error(w, `{"error":{"code":501,"message":"This server does not support slots endpoint.","type":"not_supported_error"}}`, http.StatusNotImplemented)
				return
			}
			var parts []string
			for i := range slots.Load() {
				parts = append(parts, fmt.Sprintf(`{"id":%d,"is_processing":%v}`, i, i < busy.Load()))
			}
			fmt.Fprint(w, "["+strings.Join(parts, ",")+"]")
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	c := Config{Name: "llama", To: srv.URL, Models: []string{"m"}, Signals: SignalsMetrics}
	if cfg != nil {
		cfg(&c)
	}
	e, clk := fakeClockEngine(t, c)
	return e, clk, &slotReads
}

func TestSlotListGivesCapacityAndFullEnginesAreSaturated(t *testing.T) {
	var running, deferred, slots, busy atomic.Int32
	slots.Store(4)
	running.Store(1)
	busy.Store(1)
	e, _, _ := slotEngine(t, &running, &deferred, &slots, &busy, nil)
	e.ReadSignals()
	o := e.Occupancy()
	if o.Capacity != 4 || o.Load != 1 || o.Saturated {
		t.Fatalf("one of four slots busy (another front door's): %+v", o)
	}
	// every slot busy with other front doors' requests, none deferred yet:
	// a request sent now would wait
	running.Store(4)
	busy.Store(4)
	e.ReadSignals()
	if o := e.Occupancy(); !o.Saturated || o.Load != 4 {
		t.Fatalf("every slot busy: %+v", o)
	}
	if s, _ := e.Signal(); s.Slots != 4 || s.SlotsBusy != 4 {
		t.Fatalf("signal %+v", s)
	}
}

func TestAnEngineWithoutASlotListIsNotAskedAgainForAWhile(t *testing.T) {
	var running, deferred, slots, busy atomic.Int32
	slots.Store(-1)
	e, clk, reads := slotEngine(t, &running, &deferred, &slots, &busy, nil)
	e.ReadSignals()
	e.ReadSignals()
	if n := reads.Load(); n != 1 {
		t.Fatalf("/slots asked %d times after a 501, want 1", n)
	}
	if o := e.Occupancy(); o.Capacity != 0 {
		t.Fatalf("capacity %d from a refused list", o.Capacity)
	}
	if _, ok := e.Signal(); !ok {
		t.Fatal("a refused slot list lost the metrics read")
	}
	slots.Store(2)
	clk.Advance(slotsRetry)
	e.ReadSignals()
	if n, o := reads.Load(), e.Occupancy(); n != 2 || o.Capacity != 2 {
		t.Fatalf("after %v: %d reads, capacity %d", slotsRetry, n, o.Capacity)
	}
}

func TestSlotListOffAndMaxConcurrentWins(t *testing.T) {
	var running, deferred, slots, busy atomic.Int32
	slots.Store(8)
	e, _, reads := slotEngine(t, &running, &deferred, &slots, &busy, func(c *Config) { c.SignalsSlotsPath = SignalsOff })
	e.ReadSignals()
	if n, o := reads.Load(), e.Occupancy(); n != 0 || o.Capacity != 0 {
		t.Fatalf("signals_slots_path off: %d reads, capacity %d", n, o.Capacity)
	}
	e, _, _ = slotEngine(t, &running, &deferred, &slots, &busy, func(c *Config) { c.MaxConcurrent = 3 })
	e.ReadSignals()
	if o := e.Occupancy(); o.Capacity != 3 {
		t.Fatalf("max_concurrent 3 and 8 slots: capacity %d, want the gateway's own limit", o.Capacity)
	}
	bad := Config{Name: "r", To: "http://127.0.0.1:1", Models: []string{"m"}, Signals: SignalsMetrics, SignalsSlotsPath: "slots"}
	if err := bad.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "signals_slots_path") {
		t.Fatalf("a relative slots path: %v", err)
	}
}

// FuzzParseSlots: whatever an engine answers, the slot list's reading ends
// with busy ≤ total ≤ maxSlots or an error, and never panics.
func FuzzParseSlots(f *testing.F) {
	f.Add(`[{"id":0,"is_processing":true},{"id":1,"is_processing":false}]`)
	f.Add(`[{"id":0,"state":1,"prompt":"x"}]`)
	f.Add(`{"error":{"code":501}}`)
	f.Add(`[`)
	f.Fuzz(func(t *testing.T, body string) {
		total, busy, err := ParseSlots(strings.NewReader(body))
		if err == nil && (busy > total || total > maxSlots || busy < 0) {
			t.Fatalf("%q: %d busy of %d", body, busy, total)
		}
	})
}
