package engines

import (
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// hangingSlotEngine is a remote engine on a fake clock saving `parallel`
// slots, whose slot calls hang (until the test ends) while hang is set, and
// answer otherwise; calls counts the calls that reached it, and each one
// that hangs is sent on arrived once it has (its bound is armed by then).
func hangingSlotEngine(t *testing.T, parallel int) (e *Engine, clk *clock.Fake, base *url.URL, hang *atomic.Bool, calls *atomic.Int32, arrived chan struct{}) {
	t.Helper()
	hang, calls, arrived = &atomic.Bool{}, &atomic.Int32{}, make(chan struct{}, 16)
	hang.Store(true)
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		if hang.Load() {
			arrived <- struct{}{}
			select {
			case <-release:
			case <-r.Context().Done():
			}
			return
		}
		fmt.Fprint(w, `{"n_saved": 10, "n_restored": 10}`)
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(release) }) // before srv.Close: cleanups run last first
	e, clk = fakeClockEngine(t, Config{Name: "remote", To: srv.URL, Models: []string{"m"}, StopTimeout: caddy.Duration(DefaultStopTimeout)})
	e.slots = newSlotTable(Config{Name: "remote", Slots: &SlotsConfig{Dir: t.TempDir(), Parallel: parallel}})
	base, _ = url.Parse(srv.URL)
	return e, clk, base, hang, calls, arrived
}

// hold puts n sessions in the engine's slots, as requests would.
func hold(e *Engine, n int) {
	for i := range n {
		e.slots.mu.Lock()
		id, _ := e.slots.take(sessionHash(fmt.Sprint("s", i)), e.now())
		e.slots.mu.Unlock()
		if id >= 0 {
			e.slots.done(id)
		}
	}
}

func TestAHungSlotCallIsGivenUpAtItsTimeout(t *testing.T) {
	e, clk, base, hang, _, arrived := hangingSlotEngine(t, 1)
	if got := time.Duration(e.slots.cfg.Timeout); got != DefaultSlotTimeout {
		t.Fatalf("default timeout %v", got)
	}
	done := make(chan error, 1)
	go func() {
		_, err := e.boundedSlotCall(t.Context(), base, e.slots.cfg.RestorePath, 0, "f", "n_restored")
		done <- err
	}()
	<-arrived
	clk.Advance(DefaultSlotTimeout - time.Millisecond)
	select {
	case err := <-done:
		t.Fatalf("returned before its timeout: %v", err)
	default:
	}
	clk.Advance(time.Millisecond)
	if err := <-done; !errors.Is(err, errSlotCallHung) {
		t.Fatalf("got %v", err)
	}
	// an answer resets the count of hung calls in a row
	hang.Store(false)
	if n, err := e.boundedSlotCall(t.Context(), base, e.slots.cfg.RestorePath, 0, "f", "n_restored"); err != nil || n != 10 {
		t.Fatalf("%d %v", n, err)
	}
	if e.slots.hung != 0 || e.slots.count.Hung != 1 {
		t.Fatalf("hung %d, count %d", e.slots.hung, e.slots.count.Hung)
	}
}

// The saves before a stop are asked at once and given up together at the
// slots' timeout: five hung slots, asked one after another, held a stop
// five timeouts (three, once the calls stopped after three hangs).
func TestSavesBeforeAStopWaitOneTimeoutHoweverManyHang(t *testing.T) {
	e, clk, base, _, calls, arrived := hangingSlotEngine(t, 5)
	e.slots.cfg.Timeout = caddy.Duration(time.Second)
	hold(e, 5)
	done := make(chan struct{})
	go func() { e.saveSlots(base); close(done) }()
	for range 5 {
		<-arrived // every save waiting on its bound, all at once
	}
	clk.Advance(time.Second)
	<-done // 1 s of the gateway's clock, not 5, nor stop_timeout's 10
	if n := calls.Load(); n != 5 {
		t.Fatalf("%d calls reached the engine, want 5", n)
	}
	s := e.slots.status()
	if !s.CallsStopped || s.Hung != 5 || s.Failures != 5 {
		t.Fatalf("status %+v", s)
	}
	// a restore asks nothing now
	if _, err := e.boundedSlotCall(t.Context(), base, e.slots.cfg.RestorePath, 0, "f", "n_restored"); !errors.Is(err, errSlotCallsOff) || calls.Load() != 5 {
		t.Fatalf("%v, %d calls", err, calls.Load())
	}
	// until the engine restarts
	e.slots.mu.Lock()
	e.slots.newRun(e.slots.run + 1)
	e.slots.mu.Unlock()
	if e.slots.status().CallsStopped {
		t.Fatal("still stopped after a restart")
	}
}
