package engines

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

// Warm swaps on real processes (the test binary as the demo
// engine, which sleeps, wakes and saves slots): every transition of
// sleep.go's diagram and slots.go's save and restore.

// sleepLog is an Observer that keeps what it heard of sleeps and wakes.
type sleepLog struct {
	mu     sync.Mutex
	slept  []SleepOutcome
	woke   []SleepOutcome
	starts int
}

func (l *sleepLog) EngineStarted(string, int, time.Duration) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.starts++
}
func (*sleepLog) EngineStartFailed(string, string)      {}
func (*sleepLog) EngineStopped(string, int, StopReason) {}
func (l *sleepLog) EngineSlept(_ string, _ time.Duration, o SleepOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.slept = append(l.slept, o)
}
func (l *sleepLog) EngineWoke(_ string, _ time.Duration, o SleepOutcome) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.woke = append(l.woke, o)
}
func (l *sleepLog) heard() (slept, woke []SleepOutcome, starts int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]SleepOutcome(nil), l.slept...), append([]SleepOutcome(nil), l.woke...), l.starts
}

// sleeper is an engine with swap sleep and 1 GiB of memory, its logs
// observed at INFO.
func sleeper(t *testing.T, name string, clk clock.Clock, mutate func(*Config), flags ...string) (*Engine, *observer.ObservedLogs, *sleepLog) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Name: name, Cmd: append([]string{self, "--port", PortPlaceholder}, flags...), Env: []string{"LLMGW_TEST_ENGINE=1"},
		To: "http://127.0.0.1:" + PortPlaceholder, Models: []string{name}, Memory: 1 << 30, Swap: SwapSleep}
	if mutate != nil {
		mutate(&cfg)
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	core, logs := observer.New(zapcore.InfoLevel)
	tr := &http.Transport{}
	e, err := New(cfg, tr, zap.New(core))
	if err != nil {
		t.Fatal(err)
	}
	if clk != nil {
		e.SetClock(clk)
	}
	l := &sleepLog{}
	e.SetObserver(l)
	t.Cleanup(func() {
		e.Destruct()
		tr.CloseIdleConnections()
	})
	return e, logs, l
}

// counters asks the demo engine what it did.
func counters(t *testing.T, base string) demoengine.Counters {
	t.Helper()
	resp, err := (&http.Client{Transport: direct}).Get(base + "/counters")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var c demoengine.Counters
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil {
		t.Fatal(err)
	}
	return c
}

func use(t *testing.T, e *Engine) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := e.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if err := get(l); err != nil {
		t.Fatal(err)
	}
	return l.Base().String()
}

func lines(logs *observer.ObservedLogs, msg string) int {
	return logs.FilterMessage(msg).Len()
}

func TestEvictionPutsASleepCapableEngineToSleepAndARequestWakesIt(t *testing.T) {
	SetMemoryBudget(1<<30, time.Hour)
	defer SetMemoryBudget(0, 0)
	a, _, heard := sleeper(t, "sleep-a", nil, nil, "--wake-time", "20ms")
	b := testEngine(t, "sleep-b", func(c *Config) { c.Memory = 1 << 30 })
	baseA := use(t, a)
	pid := a.Status().PID
	use(t, b) // no room for both: a is put to sleep, not stopped
	if s := a.Status(); s.State != "sleeping" || s.PID != pid {
		t.Fatalf("a after b started: %s pid %d (was %d)", s.State, s.PID, pid)
	}
	if why := a.Why().Stopped; why != "asleep: room for sleep-b (needs 1.0 GiB of the memory_budget)" {
		t.Fatalf("a stopped for %q", why)
	}
	if u := Memory(); u.Used != 1<<30 || strings.Join(u.Loaded, ",") != "sleep-b" || strings.Join(u.Asleep, ",") != "sleep-a" || u.AsleepMemory != 1<<30 {
		t.Fatalf("the budget counts a sleeping engine: %+v", u)
	}
	use(t, a) // a request wakes it: b is stopped for room, a's process is the same
	if s := a.Status(); s.State != "ready" || s.PID != pid || b.State() != Stopped {
		t.Fatalf("after the wake: a %s pid %d (was %d), b %s", s.State, s.PID, pid, b.State())
	}
	if c := counters(t, baseA); c.Sleeps != 1 || c.Wakes != 1 {
		t.Fatalf("the engine heard %+v", c)
	}
	slept, woke, starts := heard.heard()
	if len(slept) != 1 || slept[0] != SleepOK || len(woke) != 1 || woke[0] != SleepOK || starts != 1 {
		t.Fatalf("observer heard sleeps %v wakes %v starts %d", slept, woke, starts)
	}
}

func TestAFailedSleepStopsTheEngineWithOneLine(t *testing.T) {
	SetMemoryBudget(1<<30, time.Hour)
	defer SetMemoryBudget(0, 0)
	a, logs, heard := sleeper(t, "sleep-fail", nil, nil, "--fail-sleep")
	b := testEngine(t, "sleep-fail-b", func(c *Config) { c.Memory = 1 << 30 })
	use(t, a)
	use(t, b)
	if a.State() != Stopped {
		t.Fatalf("a is %s after its sleep failed, want stopped", a.State())
	}
	if n := lines(logs, "engine did not sleep: stopping it instead"); n != 1 {
		t.Fatalf("%d lines for the failed sleep, want 1", n)
	}
	if slept, _, _ := heard.heard(); len(slept) != 1 || slept[0] != SleepFailed {
		t.Fatalf("observer heard %v", slept)
	}
	if u := Memory(); u.Used != 1<<30 || len(u.Asleep) != 0 {
		t.Fatalf("after a failed sleep: %+v", u)
	}
}

func TestAFailedWakeRestartsTheEngineWithOneLine(t *testing.T) {
	SetMemoryBudget(1<<30, time.Hour)
	defer SetMemoryBudget(0, 0)
	a, logs, heard := sleeper(t, "wake-fail", nil, nil, "--fail-wake")
	b := testEngine(t, "wake-fail-b", func(c *Config) { c.Memory = 1 << 30 })
	use(t, a)
	pid := a.Status().PID
	use(t, b)
	if a.State() != Sleeping {
		t.Fatalf("a is %s, want sleeping", a.State())
	}
	use(t, a) // the wake fails: a fresh process answers the same request
	if s := a.Status(); s.State != "ready" || s.PID == pid || s.PID == 0 {
		t.Fatalf("after a failed wake: %s pid %d (the sleeping one was %d)", s.State, s.PID, pid)
	}
	if n := lines(logs, "engine did not wake: restarting it"); n != 1 {
		t.Fatalf("%d lines for the failed wake, want 1", n)
	}
	if _, woke, starts := heard.heard(); len(woke) != 1 || woke[0] != SleepFailed || starts != 2 {
		t.Fatalf("observer heard wakes %v, starts %d", woke, starts)
	}
}

// startOnFake acquires e on a fake clock, moving it along while the
// readiness probe waits.
func startOnFake(t *testing.T, e *Engine, clk *clock.Fake) *Lease {
	t.Helper()
	done := make(chan acquireResult, 1)
	go func() {
		l, err := e.Acquire(context.Background(), true)
		done <- acquireResult{l, err}
	}()
	for {
		select {
		case r := <-done:
			if r.err != nil {
				t.Fatal(r.err)
			}
			return r.l
		case <-e.Changed():
		case <-time.After(time.Millisecond):
			clk.Advance(maxProbeInterval)
		}
	}
}

// waitState waits (on the engine's changes, no sleeps) until e is in s.
func waitState(t *testing.T, e *Engine, s State) {
	t.Helper()
	deadline := time.After(time.Minute)
	for {
		ch := e.Changed()
		if e.State() == s {
			return
		}
		select {
		case <-ch:
		case <-deadline:
			t.Fatalf("engine is %s, never %s", e.State(), s)
		}
	}
}

func TestSleepAfterThenIdleTimeout(t *testing.T) {
	clk := clock.NewFake()
	e, _, _ := sleeper(t, "sleep-after", clk, func(c *Config) {
		c.Memory = 0
		c.SleepAfter = caddy.Duration(time.Minute)
		c.IdleTimeout = caddy.Duration(5 * time.Minute)
	})
	l := startOnFake(t, e, clk)
	l.Release()
	clk.Advance(59 * time.Second)
	if e.State() != Ready {
		t.Fatalf("%s before sleep_after", e.State())
	}
	clk.Advance(time.Second)
	waitState(t, e, Sleeping)
	if why := e.Why().Stopped; why != "asleep: sleep_after 1m0s" {
		t.Fatalf("slept for %q", why)
	}
	clk.WaitForTimers(1)
	clk.Advance(4*time.Minute - time.Second)
	if e.State() != Sleeping {
		t.Fatalf("%s before idle_timeout", e.State())
	}
	clk.Advance(time.Second)
	waitState(t, e, Stopped)
	if why := e.Why().Stopped; why != "idle_timeout 5m0s" {
		t.Fatalf("stopped for %q", why)
	}
}

func TestSleepOptionsAreChecked(t *testing.T) {
	base := Config{Name: "x", To: "http://127.0.0.1:" + PortPlaceholder, Models: []string{"x"}, Cmd: []string{"x"}}
	for _, row := range []struct {
		mutate func(*Config)
		want   string
	}{
		{func(c *Config) { c.Swap = "hibernate" }, `swap takes stop or sleep, not "hibernate"`},
		{func(c *Config) { c.SleepAfter = caddy.Duration(time.Minute) }, "sleep paths and sleep_after are for swap sleep"},
		{func(c *Config) {
			c.Swap, c.SleepAfter, c.IdleTimeout = SwapSleep, caddy.Duration(time.Hour), caddy.Duration(time.Minute)
		}, "idle_timeout (1m0s) must be longer than sleep_after (1h0m0s)"},
		{func(c *Config) { c.Swap, c.Sleep = SwapSleep, &SleepPaths{WakePath: "wake"} }, `wake_path takes a path starting with '/'`},
		{func(c *Config) { c.Cmd, c.To, c.Swap = nil, "http://127.0.0.1:1", SwapSleep }, "are for an engine the gateway starts"},
		{func(c *Config) { c.Slots = &SlotsConfig{} }, "slots save needs the engine's slot directory"},
		{func(c *Config) { c.Slots = &SlotsConfig{Dir: "/d", SavePath: "/slots/save"} }, "with {id} for the slot"},
	} {
		c := base
		row.mutate(&c)
		err := c.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), row.want) {
			t.Errorf("got %v, want %q", err, row.want)
		}
	}
}

// chatIn sends a chat of turns user messages through l, pinned to slot.
func chatIn(t *testing.T, l *Lease, slot int, turns int) {
	t.Helper()
	var msgs []string
	for i := range turns {
		msgs = append(msgs, `{"role":"user","content":"turn `+strings.Repeat("word ", 50)+string(rune('a'+i))+`"}`)
	}
	body := `{"model":"x","id_slot":` + string(rune('0'+slot)) + `,"messages":[` + strings.Join(msgs, ",") + `]}`
	req, _ := http.NewRequest(http.MethodPost, l.Base().JoinPath("/v1/chat/completions").String(), strings.NewReader(body))
	resp, err := direct.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
}

func TestASessionsSlotIsSavedBeforeAStopAndRestoredForItsNextTurn(t *testing.T) {
	dir := t.TempDir()
	e, _, _ := sleeper(t, "slots", nil, func(c *Config) {
		c.Swap, c.Memory = "", 0
		c.Slots = &SlotsConfig{Dir: dir, Parallel: 2, MaxSessions: 1}
	}, "--slots", "2", "--slot-save-path", dir)
	ctx := context.Background()
	turn := func(session string, turns int) demoengine.Counters {
		l, err := e.Acquire(ctx, true)
		if err != nil {
			t.Fatal(err)
		}
		defer l.Release()
		before := counters(t, l.Base().String())
		slot, ok := l.Slot(ctx, session, nil)
		if !ok {
			t.Fatal("no slot for the session")
		}
		chatIn(t, l, slot, turns)
		after := counters(t, l.Base().String())
		after.Processed -= before.Processed
		after.Restored -= before.Restored
		return after
	}
	first := turn("alice", 3)
	if err := e.Stop(ctx, true, StopAdmin); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(dir, e.slots.file(sessionHash("alice")))); err != nil {
		t.Fatalf("alice's slot was not saved: %v", err)
	}
	second := turn("alice", 4)                                                      // a restart: her slot is restored first
	if second.Restored != first.Processed || second.Processed*3 > first.Processed { // only its new message
		t.Fatalf("the resumed turn processed %d tokens (restored %d); the first processed %d", second.Processed, second.Restored, first.Processed)
	}
	if s := e.Status().Slots; s.Saves != 1 || s.Restores != 1 || s.RestoredTokens == 0 {
		t.Fatalf("slots status %+v", s)
	}
	// max_sessions 1: bob's save removes alice's file
	turn("bob", 1)
	if err := e.Stop(ctx, true, StopAdmin); err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "*.bin"))
	if len(files) != 1 || e.Status().Slots.Removed != 1 {
		t.Fatalf("files after a save beyond max_sessions: %v, status %+v", files, e.Status().Slots)
	}
}

func TestAConversationsNextTurnIsItsSessionAndAnotherSharingItsStartIsNot(t *testing.T) {
	tb := newSlotTable(Config{Name: "x", Slots: &SlotsConfig{Dir: "/d", Parallel: 2}})
	now := time.Now()
	take := func(blocks ...uint64) (uint64, int) {
		tb.mu.Lock()
		defer tb.mu.Unlock()
		s := tb.byPrefix(blocks)
		id, _ := tb.take(s, now)
		return s, id
	}
	alice, slotA := take(1, 2, 3) // a system prompt (1, 2), then alice's turn
	tb.done(slotA)
	again, slotAgain := take(1, 2, 3, 4, 5) // her next turn continues it
	if again != alice || slotAgain != slotA {
		t.Fatalf("alice's next turn is session %d in slot %d, want %d in %d", again, slotAgain, alice, slotA)
	}
	// bob shares the system prompt only: a session of his own, in the other slot
	bob, slotB := take(1, 2, 9)
	if bob == alice || slotB == slotA {
		t.Fatalf("bob is session %d in slot %d, alice %d in %d", bob, slotB, alice, slotA)
	}
	tb.done(slotAgain)
	tb.done(slotB)
	if s, _ := take(1, 2, 3, 4, 5, 6); s != alice {
		t.Fatalf("alice's third turn is session %d, want %d", s, alice)
	}
}

// asleep puts a sleeping engine a to sleep (b takes the room) and returns
// its pid.
func asleep(t *testing.T, prefix string) (*Engine, int) {
	t.Helper()
	a, _, _ := sleeper(t, prefix+"-a", nil, nil)
	b := testEngine(t, prefix+"-b", func(c *Config) { c.Memory = 1 << 30 })
	use(t, a)
	pid := a.Status().PID
	use(t, b)
	if a.State() != Sleeping {
		t.Fatalf("a is %s, want sleeping", a.State())
	}
	return a, pid
}

func alive(pid int) bool { return syscall.Kill(pid, 0) == nil }

func TestASleepingEngineEndsOnAnAdminStopACrashAndATeardown(t *testing.T) {
	SetMemoryBudget(1<<30, time.Hour)
	defer SetMemoryBudget(0, 0)

	a, pid := asleep(t, "asleep-stop")
	if err := a.Stop(context.Background(), true, StopAdmin); err != nil {
		t.Fatal(err)
	}
	if a.State() != Stopped || alive(pid) {
		t.Fatalf("after an admin stop: %s, process alive %v", a.State(), alive(pid))
	}

	c, pid := asleep(t, "asleep-crash")
	_ = syscall.Kill(pid, syscall.SIGKILL)
	waitState(t, c, Stopped)
	if why := c.Why().Stopped; !strings.HasPrefix(why, "crashed") {
		t.Fatalf("after its process died asleep: stopped for %q", why)
	}

	d, pid := asleep(t, "asleep-teardown")
	if err := d.Destruct(); err != nil {
		t.Fatal(err)
	}
	if alive(pid) { // Destruct returns once the process is reaped
		t.Fatalf("a sleeping engine's process outlived its teardown")
	}
}
