package engines

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/goleak"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

// The test binary is also the engine: with LLMGW_TEST_ENGINE=1 it runs the
// demo engine with its arguments.
func TestMain(m *testing.M) {
	if os.Getenv("LLMGW_TEST_ENGINE") == "1" {
		if err := demoengine.Run(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "demo engine:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

func testEngine(t *testing.T, name string, mutate func(*Config), flags ...string) *Engine {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{
		Name:   name,
		Cmd:    append([]string{self, "--port", PortPlaceholder}, flags...),
		Env:    []string{"LLMGW_TEST_ENGINE=1"},
		To:     "http://127.0.0.1:" + PortPlaceholder,
		Models: []string{name},
	}
	if mutate != nil {
		mutate(&cfg)
	}
	tr := &http.Transport{}
	e, err := New(cfg, tr, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		e.Destruct()
		tr.CloseIdleConnections()
	})
	return e
}

// get sends a chat completion through a lease.
func get(l *Lease) error {
	req, _ := http.NewRequest(http.MethodPost, l.Base().JoinPath("/v1/chat/completions").String(),
		strings.NewReader(`{"model":"x","messages":[]}`))
	resp, err := direct.RoundTrip(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	return nil
}

func TestLeasesRaceTheIdleTimerWithoutEverLosingARequest(t *testing.T) {
	// hammer the boundary: an idle timeout of a few milliseconds and
	// requests arriving around it from several goroutines; every lease
	// must point at a live engine
	e := testEngine(t, "hammer", func(c *Config) { c.IdleTimeout = caddy.Duration(3 * time.Millisecond) }, "--chunk-delay", "0s")
	var wg sync.WaitGroup
	var failures atomic.Int32
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				l, err := e.Acquire(context.Background(), true)
				if err != nil {
					t.Errorf("acquire: %v", err)
					failures.Add(1)
					return
				}
				if err := get(l); err != nil {
					t.Errorf("goroutine %d request %d on a leased engine: %v", g, i, err)
					failures.Add(1)
				}
				l.Release()
				time.Sleep(time.Duration((g+i)%5) * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	if failures.Load() > 0 {
		t.Fatalf("%d requests failed", failures.Load())
	}
}

func TestClientThatGivesUpDoesNotCancelTheStart(t *testing.T) {
	e := testEngine(t, "patient", nil, "--load-time", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if _, err := e.Acquire(ctx, true); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("want the caller's deadline, got %v", err)
	}
	if s := e.State(); s != Starting {
		t.Fatalf("state %s after the only waiter left", s)
	}
	l, err := e.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if s := e.Status(); s.Leases != 1 || s.PID == 0 {
		t.Fatalf("%+v", s)
	}
}

func TestWakeOffNeverStarts(t *testing.T) {
	e := testEngine(t, "asleep", nil)
	if _, err := e.Acquire(context.Background(), false); !errors.Is(err, ErrNotRunning) {
		t.Fatalf("got %v", err)
	}
	if e.State() != Stopped {
		t.Fatal("started with wake off")
	}
}

func TestStartTimeoutKillsTheProcessAndSaysSo(t *testing.T) {
	e := testEngine(t, "slowpoke", func(c *Config) { c.StartTimeout = caddy.Duration(200 * time.Millisecond) }, "--load-time", "10m")
	clock := clock.NewFake()
	e.SetClock(clock)
	errc := make(chan error, 1)
	go func() {
		_, err := e.Acquire(context.Background(), true)
		errc <- err
	}()
	// the start is waiting (its deadline and first probe are armed) and the
	// process is up and loading: now let start_timeout pass
	clock.WaitForTimers(2)
	for !strings.Contains(strings.Join(e.Status().LastLines, "\n"), "listening on") {
		time.Sleep(5 * time.Millisecond) // the child's output arrives on its own
	}
	clock.Advance(time.Second)
	err := <-errc
	var se *StartError
	if !errors.As(err, &se) || !strings.Contains(se.Reason, "not ready within start_timeout 200ms") {
		t.Fatalf("got %v", err)
	}
	if !strings.Contains(err.Error(), "listening on") {
		t.Fatalf("the error lacks the engine's last lines: %v", err)
	}
}

func TestGroupMembersNeverRunTogether(t *testing.T) {
	group := func(c *Config) { c.Group = "test-gpu" }
	a := testEngine(t, "ga", group)
	b := testEngine(t, "gb", group)
	for i := range 3 {
		for _, e := range []*Engine{a, b} {
			l, err := e.Acquire(context.Background(), true)
			if err != nil {
				t.Fatal(err)
			}
			other := a
			if e == a {
				other = b
			}
			if s := other.State(); s != Stopped {
				t.Fatalf("round %d: %s runs while %s is %s", i, e.Name(), other.Name(), s)
			}
			l.Release()
		}
	}
}

func TestLineBufferKeepsTheLastLines(t *testing.T) {
	var b lineBuffer
	for i := range 250 {
		b.add(fmt.Sprint(i))
	}
	got := b.last(3)
	if strings.Join(got, ",") != "247,248,249" {
		t.Fatalf("%v", got)
	}
	if all := b.last(1000); len(all) != keptLines || all[0] != "150" {
		t.Fatalf("%d lines, first %s", len(all), all[0])
	}
}

// direct keeps no idle connections, so the leak check sees no client goroutines.
var direct = &http.Transport{DisableKeepAlives: true}

func TestGroupStartsQueuedBehindALoadingPeerNeverDeadlock(t *testing.T) {
	group := func(c *Config) { c.Group = "test-gpu-3" }
	a := testEngine(t, "qa", group)
	b := testEngine(t, "qb", group)
	c := testEngine(t, "qc", group, "--load-time", "300ms")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	errs := make(chan error, 3)
	acquire := func(e *Engine) {
		l, err := e.Acquire(ctx, true)
		if err == nil {
			err = get(l)
			l.Release()
		}
		errs <- err
	}
	go acquire(c)
	for c.State() != Starting {
		time.Sleep(time.Millisecond)
	}
	// a and b queue for the turn while c loads; whoever gets it next must
	// not wait for the other, which is waiting for the turn
	go acquire(a)
	go acquire(b)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// Where the gateway cannot stop a process tree (Windows), a `cmd` engine is
// refused at load with a message that says what to do; a remote engine loads.
func TestCmdEnginesAreRefusedWhereProcessesCannotBeStopped(t *testing.T) {
	saved := canStartProcesses
	canStartProcesses = false
	defer func() { canStartProcesses = saved }()

	local := Config{Name: "llama", Cmd: []string{"llama-server"}, To: "http://127.0.0.1:" + PortPlaceholder, Models: []string{"m"}}
	err := local.Validate()
	if err == nil || !strings.Contains(err.Error(), "engine llama: 'cmd'") || !strings.Contains(err.Error(), "'to'") || !strings.Contains(err.Error(), "WSL2") {
		t.Fatalf("a cmd engine: %v", err)
	}
	remote := Config{Name: "cloud", To: "https://api.example.com", Models: []string{"m"}}
	if err := remote.Validate(); err != nil {
		t.Fatalf("a remote engine: %v", err)
	}
}

func TestLinesFollowTheOutputInOrderAndSkipAheadWhenBehind(t *testing.T) {
	var b lineBuffer
	lines, seq, wake := b.since(0)
	if len(lines) != 0 || seq != 0 {
		t.Fatalf("empty buffer: %v %d", lines, seq)
	}
	b.add("one")
	select {
	case <-wake:
	default:
		t.Fatal("adding a line did not wake the reader")
	}
	b.add("two")
	lines, seq, wake = b.since(seq)
	if strings.Join(lines, ",") != "one,two" || seq != 2 {
		t.Fatalf("got %v up to %d", lines, seq)
	}
	if lines, _, _ := b.since(seq); len(lines) != 0 {
		t.Fatalf("nothing new, got %v", lines)
	}
	// a reader that is far behind gets the kept lines, never more
	for i := range 3 * keptLines {
		b.add(fmt.Sprint(i))
	}
	<-wake
	lines, seq, _ = b.since(seq)
	if len(lines) != keptLines || lines[len(lines)-1] != fmt.Sprint(3*keptLines-1) || seq != uint64(2+3*keptLines) {
		t.Fatalf("%d lines, last %s, seq %d", len(lines), lines[len(lines)-1], seq)
	}
}

func TestEngineOutputIsMaskedBeforeItIsKept(t *testing.T) {
	cfg := Config{
		Name: "m", To: "http://127.0.0.1:1", Models: []string{"m"}, APIKey: "engine-own-key-123",
		Cmd: []string{"llama-server", "--api-key", "cmd-secret-456", "--port", "8080"},
		Env: []string{"HF_TOKEN=env-secret-789", "PATH_X=/usr/bin"},
	}
	b := lineBuffer{secrets: secretsOf(cfg)}
	r := strings.NewReader(strings.Join([]string{
		"main: llama-server --api-key cmd-secret-456 --port 8080",
		"using key engine-own-key-123 for upstream",
		"env HF_TOKEN=env-secret-789",
		"Authorization: Bearer abcdefghij",
		`{"api_key": "zzzzzzzz", "model": "qwen"}`,
		"OPENAI_API_KEY=sk-proj-abcdefghijklmnop",
		"loaded model qwen in 1.2 s, n_ctx = 4096",
	}, "\n"))
	b.pump(r, zap.NewNop(), "stdout")
	got := strings.Join(b.last(keptLines), "\n")
	for _, secret := range []string{"engine-own-key-123", "cmd-secret-456", "env-secret-789", "abcdefghij", "zzzzzzzz", "sk-proj"} {
		if strings.Contains(got, secret) {
			t.Errorf("%q is not masked in:\n%s", secret, got)
		}
	}
	for _, kept := range []string{"--port 8080", `"model": "qwen"`, "loaded model qwen in 1.2 s, n_ctx = 4096"} {
		if !strings.Contains(got, kept) {
			t.Errorf("%q should survive masking:\n%s", kept, got)
		}
	}
}

// A remote engine with health checks is down after health_fails failed
// checks in a row and up again after health_passes passed ones; only the
// clock's interval moves the checks.
func TestHealthChecksMarkARemoteEngineDownAndUp(t *testing.T) {
	var healthy atomic.Bool
	var checks atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/ping" {
			t.Errorf("health check of %s, want /ping", r.URL.Path)
		}
		checks.Add(1)
		if !healthy.Load() {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
	}))
	defer srv.Close()
	healthy.Store(true)
	cfg := Config{Name: "remote", To: srv.URL, Models: []string{"m"}, Ready: "/ping",
		HealthInterval: caddy.Duration(10 * time.Second), HealthFails: 2, HealthPasses: 2}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	e, err := New(cfg, tr, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer e.Destruct()
	clock := clock.NewFake()
	e.SetClock(clock)
	e.StartHealthChecks()

	// tick runs one more check: the loop arms its timer once the check
	// before is recorded
	tick := func() {
		clock.WaitForTimers(1)
		clock.Advance(10 * time.Second)
	}
	clock.WaitForTimers(1) // the first check, at once, passed
	if !e.Healthy() || e.Status().Health != "up" || e.Peek() == nil {
		t.Fatalf("a passing engine: %+v", e.Status())
	}
	healthy.Store(false)
	tick()
	clock.WaitForTimers(1)
	if !e.Healthy() {
		t.Fatal("down after one failed check, want health_fails 2")
	}
	tick()
	clock.WaitForTimers(1)
	if s := e.Status(); e.Healthy() || s.State != "down" || s.Health != "down" || s.Ready || e.Peek() != nil {
		t.Fatalf("after two failed checks: healthy %v, %+v", e.Healthy(), s)
	}
	healthy.Store(true)
	tick()
	clock.WaitForTimers(1)
	if e.Healthy() {
		t.Fatal("up after one passed check, want health_passes 2")
	}
	tick()
	clock.WaitForTimers(1)
	if s := e.Status(); !e.Healthy() || s.State != "ready" || s.Health != "up" {
		t.Fatalf("after two passed checks: %+v", s)
	}
	if n := checks.Load(); n != 5 {
		t.Fatalf("%d checks, want 5 (one at once, one per interval)", n)
	}
}

// Health checks are for remote engines: the gateway watches its own
// through their process.
func TestHealthChecksAreRefusedOnAStartedEngine(t *testing.T) {
	cfg := Config{Name: "local", Cmd: []string{"llama-server"}, To: "http://127.0.0.1:" + PortPlaceholder,
		Models: []string{"m"}, HealthInterval: caddy.Duration(time.Second)}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "health checks are for remote engines") {
		t.Fatalf("got %v", err)
	}
	cfg = Config{Name: "remote", To: "http://10.0.0.1", Models: []string{"m"}, HealthPath: "/ping"}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "need health_interval") {
		t.Fatalf("got %v", err)
	}
}
