package engines

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// The scheduler's reasons, refusals and device sets, on engines
// without processes (a state set by hand) and a fake clock, then on real
// engines.

// fakeEngine is an engine in the given state that never runs a process:
// what the scheduler reads of it is set by hand.
func fakeEngine(name string, clk clock.Clock, state State, mutate func(*Config)) *Engine {
	cfg := Config{Name: name, Memory: 1}
	if mutate != nil {
		mutate(&cfg)
	}
	return &Engine{cfg: cfg, clock: clk, log: zap.NewNop(), changed: make(chan struct{}), state: state}
}

// testBox is a box of its own (not in the process-wide map) holding
// members, each granted its memory when it is not stopped.
func testBox(budget int64, maxWait time.Duration, members ...*Engine) *box {
	b := &box{name: "test", budget: budget, maxWait: maxWait, members: map[*Engine]struct{}{}, granted: map[*Engine]int64{}}
	for _, e := range members {
		b.members[e] = struct{}{}
		if e.state != Stopped {
			b.granted[e] = e.cfg.Memory
		}
		e.boxes = []*box{b}
	}
	return b
}

func TestAStartKeptOutByWhatTheRulesProtectIsRefusedAtOnceNamingWhatItWaitsFor(t *testing.T) {
	clk := clock.NewFake()
	busy := fakeEngine("qwen", clk, Ready, nil)
	busy.leases = 2
	// llama's min_loaded outlasts max_wait: waiting could only end in the
	// same refusal (hopeless.go), so it comes at once
	warm := fakeEngine("llama", clk, Ready, func(c *Config) { c.MinLoaded = caddy.Duration(45 * time.Second) })
	warm.lastUsed = clk.Now()
	// draining qwen would not be enough: llama's share and mistral's do
	// not fit together
	cold := fakeEngine("mistral", clk, Stopped, func(c *Config) { c.Memory = 2 })
	b := testBox(2, 5*time.Second, busy, warm, cold)

	err := b.claim(context.Background(), cold)
	var be *BusyError
	if !errors.As(err, &be) || !be.Room() || be.Waited != 0 {
		t.Fatalf("claim: %v, want a refusal for room at once", err)
	}
	if want := []string{"llama (min_loaded for 45s more)", "qwen (in use, 2 in flight)"}; !slices.Equal(be.WaitingFor, want) {
		t.Fatalf("waiting for %q, want %q", be.WaitingFor, want)
	}
	if be.RetryAfter != 45*time.Second {
		t.Fatalf("Retry-After %v, want when min_loaded ends (45s)", be.RetryAfter)
	}
	if msg := be.Error(); !strings.Contains(msg, "engine mistral is waiting for room") || !strings.Contains(msg, "llama (min_loaded for 45s more), qwen (in use, 2 in flight)") {
		t.Fatalf("message %q", msg)
	}
	if len(b.claims) != 0 {
		t.Fatal("a refused claim stayed in the queue")
	}
}

func TestAStartBehindABusyEngineOnlyWaitsAndThenDrainsIt(t *testing.T) {
	// busy engines alone never refuse a start: after max_wait they are
	// drained for it (so the wait is max_wait plus one swap, never a 503)
	clk := clock.NewFake()
	busy := fakeEngine("qwen", clk, Ready, nil)
	busy.leases = 1
	cold := fakeEngine("mistral", clk, Stopped, nil)
	b := testBox(1, 5*time.Second, busy, cold)
	now := clk.Now()
	if r := b.turnFor(cold, now); r.refused != nil || len(r.victims) != 0 || r.next != 5*time.Second {
		t.Fatalf("before max_wait: %+v", r)
	}
	clk.Advance(5 * time.Second)
	r := b.turnFor(cold, now)
	if r.refused != nil || len(r.victims) != 1 || r.victims[0].e != busy {
		t.Fatalf("after max_wait: %+v, want qwen drained", r)
	}
}

func TestEvictNeverAsksToRetryWhenItsIdleTimeoutStopsIt(t *testing.T) {
	clk := clock.NewFake()
	keep := fakeEngine("embed", clk, Ready, func(c *Config) { c.Evict = EvictNever; c.IdleTimeout = caddy.Duration(2 * time.Minute) })
	keep.lastUsed = clk.Now()
	cold := fakeEngine("qwen", clk, Stopped, nil)
	b := testBox(1, time.Second, keep, cold)
	clk.Advance(10 * time.Second)
	r := b.turnFor(cold, clk.Now().Add(-10*time.Second))
	if r.refused == nil || r.refused.RetryAfter != time.Minute || r.refused.WaitingFor[0] != "embed (evict never)" {
		t.Fatalf("%+v: want a refusal naming evict never, Retry-After capped at a minute", r.refused)
	}
}

// turnFor puts a claim of e waiting since since in b and takes its turn.
func (b *box) turnFor(e *Engine, since time.Time) turnResult {
	b.mu.Lock()
	defer b.mu.Unlock()
	c := &claim{e: e, need: b.need(e), since: since}
	b.claims = []*claim{c}
	defer func() { b.claims = nil }()
	return b.turn(c)
}

func TestTheEnginesPriorityIsTheHighestOfItsLastUse(t *testing.T) {
	e := fakeEngine("a", clock.NewFake(), Ready, nil)
	use := func(prios ...int) {
		var ls []*Lease
		for _, p := range prios {
			e.mu.Lock()
			ls = append(ls, e.leaseLocked())
			e.mu.Unlock()
			e.Served(p)
		}
		for _, l := range ls {
			e.mu.Lock()
			e.leases--
			e.mu.Unlock()
			_ = l
		}
	}
	use(1, 7, 3)
	if e.usePrio != 7 {
		t.Fatalf("after a use of priorities 1 7 3: %d", e.usePrio)
	}
	use(0)
	if e.usePrio != 0 {
		t.Fatalf("a later use of priority 0 only: %d, want 0", e.usePrio)
	}
}

func TestDeviceSets(t *testing.T) {
	for in, want := range map[string]string{"0": "0", "1,2": "1,2", "2, 1": "1,2"} {
		ids, err := ParseDevices(strings.Split(in, " ")...)
		if err != nil || DeviceSet(ids) != want {
			t.Errorf("%q: %v %v, want %s", in, ids, err, want)
		}
	}
	for _, bad := range []string{"x", "-1", "1,1", ""} {
		if _, err := ParseDevices(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
	env := withDevices([]string{"A=1"}, []int{2, 1})
	if !slices.Equal(env, []string{"A=1", "CUDA_VISIBLE_DEVICES=2,1"}) {
		t.Fatalf("env %q", env)
	}
	if env := withDevices([]string{"CUDA_VISIBLE_DEVICES=GPU-abc"}, []int{0}); len(env) != 1 {
		t.Fatalf("an env that sets CUDA_VISIBLE_DEVICES was overridden: %q", env)
	}
	sets := []DeviceBudget{{Devices: []int{0}, Budget: 24 << 30}, {Devices: []int{1, 2}, Budget: 48 << 30}}
	eng := func(name string, mem int64, devices ...int) Config {
		return Config{Name: name, Memory: mem, Devices: devices}
	}
	for _, row := range []struct {
		budget  int64
		sets    []DeviceBudget
		cfgs    []Config
		engine  string
		devices string
		want    string
	}{
		{0, sets, []Config{eng("a", 20<<30, 0), eng("b", 40<<30, 2, 1)}, "", "", ""},
		{0, sets, []Config{eng("a", 30<<30, 0)}, "a", "", "more than the memory_budget 24 GiB of devices 0"},
		{0, sets, []Config{eng("a", 1<<30, 1)}, "a", "", "no memory_budget names that set"},
		{0, sets, []Config{eng("a", 1<<30)}, "a", "", "no memory_budget to count it against"},
		{8 << 30, sets, []Config{eng("a", 1<<30)}, "", "", ""},
		{0, append(sets, DeviceBudget{Devices: []int{2, 3}, Budget: 1}), nil, "", "2,3", "device 2 is in two memory_budget sets"},
		{0, append(sets, DeviceBudget{Devices: []int{0}, Budget: 1}), nil, "", "0", "given twice"},
	} {
		err := CheckMemory(row.budget, row.sets, row.cfgs)
		var me *MemoryError
		switch {
		case row.want == "" && err != nil:
			t.Errorf("%+v: %v", row, err)
		case row.want != "" && (!errors.As(err, &me) || !strings.Contains(err.Error(), row.want) || me.Engine != row.engine || me.Devices != row.devices):
			t.Errorf("%+v: %v (%+v), want %q", row, err, me, row.want)
		}
	}
}

// Real engines: each device set is its own box (an engine of set 0 never
// waits for one of set 1), and a start that min_loaded keeps out is
// refused after max_wait with the reasons, its waiters all told.
func TestEachDeviceSetIsABoxOfItsOwn(t *testing.T) {
	SetMemoryBudgets(0, []DeviceBudget{{Devices: []int{0}, Budget: 1 << 30}, {Devices: []int{1}, Budget: 1 << 30}}, time.Hour)
	defer SetMemoryBudgets(0, nil, 0)
	a := testEngine(t, "dev0-a", func(c *Config) { c.Memory = 1 << 30; c.Devices = []int{0} })
	b := testEngine(t, "dev1-b", func(c *Config) { c.Memory = 1 << 30; c.Devices = []int{1} })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	la, err := a.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	defer la.Release()
	lb, err := b.Acquire(ctx, true) // a is busy in its own set: b starts at once
	if err != nil {
		t.Fatal(err)
	}
	lb.Release()
	s := Boxes()
	if len(s.Sets) != 2 || s.Sets[0].Devices != "0" || s.Sets[0].Used != 1<<30 || s.Sets[1].Devices != "1" || s.Sets[1].Used != 1<<30 {
		t.Fatalf("sets: %+v", s.Sets)
	}
	if st := a.Status(); st.Devices != "0" || st.Why.Started != "request" {
		t.Fatalf("status: devices %q, started %q", st.Devices, st.Why.Started)
	}
}

func TestAStartMinLoadedKeepsOutIsRefusedWithItsReason(t *testing.T) {
	SetMemoryBudget(1<<30, 50*time.Millisecond)
	defer SetMemoryBudget(0, 0)
	warm := testEngine(t, "warm", func(c *Config) { c.Memory = 1 << 30; c.MinLoaded = caddy.Duration(time.Hour) })
	cold := testEngine(t, "cold", func(c *Config) { c.Memory = 1 << 30 })
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	l, err := warm.Acquire(ctx, true)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	_, err = cold.Acquire(ctx, true)
	var be *BusyError
	if !errors.As(err, &be) || !be.Room() || len(be.WaitingFor) != 1 || !strings.HasPrefix(be.WaitingFor[0], "warm (min_loaded for ") || be.RetryAfter != maxRetryAfter {
		t.Fatalf("cold: %v (%+v)", err, be)
	}
	if warm.State() != Ready || cold.State() != Stopped {
		t.Fatalf("warm %s, cold %s", warm.State(), cold.State())
	}
	if u := Memory(); u.Refused == 0 {
		t.Fatalf("no refusal counted: %+v", u)
	}
	// a refusal is no failure of the engine's: the next start does not back off
	if cold.failures != 0 {
		t.Fatalf("failures %d after a refusal", cold.failures)
	}
}
