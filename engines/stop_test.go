package engines

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// gone reports whether no process has that pid any more (the engine's
// process is reaped by the time a stop returns, so its pid is free).
func gone(pid int) bool { return syscall.Kill(pid, 0) == syscall.ESRCH }

func TestStopCmdRunsWithTheEnginesPidAndPortInsteadOfTheSignal(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stop-args")
	// the stop command records what it was given, says so on its output,
	// and ends the engine itself: SIGINT, which nothing else sends
	e := testEngine(t, "docker-like", func(c *Config) {
		c.StopCmd = []string{"sh", "-c", `echo "$1 $2" > "$3"; echo "stopping $1"; kill -INT "$1"`,
			"sh", PIDPlaceholder, PortPlaceholder, out}
		c.StopTimeout = caddy.Duration(time.Minute)
	}, "--ignore-sigterm")
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	st := e.Status()
	began := time.Now()
	if err := e.Stop(context.Background(), false, StopAdmin); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(began); took >= time.Minute {
		t.Fatalf("the stop took %s: the signals ended the engine, not its stop_cmd", took)
	}
	if got, want := strings.TrimSpace(readTestFile(t, out)), strconv.Itoa(st.PID)+" "+strconv.Itoa(st.Port); got != want {
		t.Fatalf("stop_cmd was given %q, want %q", got, want)
	}
	if !gone(st.PID) || e.State() != Stopped {
		t.Fatalf("engine %d after its stop_cmd: state %s", st.PID, e.State())
	}
	if lines := strings.Join(e.Status().LastLines, "\n"); !strings.Contains(lines, "stopping "+strconv.Itoa(st.PID)) {
		t.Fatalf("the stop command's output is not in the engine's lines:\n%s", lines)
	}
	// the engine starts again as usual after a stop by command
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestStopCmdThatDoesNothingStillEndsTheEngineAfterStopTimeout(t *testing.T) {
	e := testEngine(t, "stubborn", func(c *Config) {
		c.StopCmd = []string{"true"}
		c.StopTimeout = caddy.Duration(10 * time.Second)
	}, "--ignore-sigterm")
	// the start runs on the wall clock (its probes), the stop on fake time
	sw := &switchClock{}
	sw.to(clock.Real)
	e.SetClock(sw)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake()
	sw.to(fake)
	pid := e.Status().PID
	stopped := make(chan error, 1)
	go func() { stopped <- e.Stop(context.Background(), false, StopAdmin) }()

	fake.WaitForTimers(1) // stop_cmd runs; stop_timeout is armed
	if gone(pid) {
		t.Fatal("the engine ended before stop_timeout, with a stop_cmd that does nothing")
	}
	fake.Advance(10 * time.Second) // SIGTERM, which it ignores
	fake.WaitForTimers(1)          // SIGKILL is armed
	if gone(pid) {
		t.Fatal("an engine that ignores SIGTERM ended before SIGKILL")
	}
	fake.Advance(10 * time.Second)
	if err := <-stopped; err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Fatalf("engine %d outlived stop_cmd, SIGTERM and SIGKILL", pid)
	}
}

func TestAFailingStopCmdIsFollowedBySIGTERMAtOnce(t *testing.T) {
	e := testEngine(t, "failing-stop", func(c *Config) {
		c.StopCmd = []string{"sh", "-c", "echo no such container >&2; exit 3"}
		c.StopTimeout = caddy.Duration(time.Hour) // not waited for: the failure says the command will not do it
	})
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := e.Status().PID
	if err := e.Stop(context.Background(), false, StopAdmin); err != nil {
		t.Fatal(err)
	}
	if !gone(pid) {
		t.Fatalf("engine %d outlived a failed stop_cmd and SIGTERM", pid)
	}
	if lines := strings.Join(e.Status().LastLines, "\n"); !strings.Contains(lines, "no such container") {
		t.Fatalf("the failed stop command's output is not in the engine's lines:\n%s", lines)
	}
}

func TestStopCmdNeedsCmd(t *testing.T) {
	cfg := Config{Name: "remote", To: "http://10.0.0.1", Models: []string{"m"}, StopCmd: []string{"true"}}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "stop_cmd needs 'cmd'") {
		t.Fatalf("got %v", err)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// switchClock is a Clock that a test moves from one clock to another while
// the engine runs: a start on the wall clock, then a stop on fake time.
type switchClock struct{ c atomic.Value }

func (s *switchClock) to(c clock.Clock)                     { s.c.Store(&c) }
func (s *switchClock) now() clock.Clock                     { return *s.c.Load().(*clock.Clock) }
func (s *switchClock) Now() time.Time                       { return s.now().Now() }
func (s *switchClock) NewTimer(d time.Duration) clock.Timer { return s.now().NewTimer(d) }
func (s *switchClock) AfterFunc(d time.Duration, f func()) clock.Timer {
	return s.now().AfterFunc(d, f)
}
