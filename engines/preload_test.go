package engines

import (
	"context"
	"strings"
	"sync"
	"testing"
)

func TestPreloadStartsAStoppedEngineWithoutWaitingForIt(t *testing.T) {
	e := testEngine(t, "preloaded", nil, "--load-time", "100ms")
	e.Preload()
	if s := e.State(); s != Starting {
		t.Fatalf("state %s right after Preload, want starting", s)
	}
	// no request woke it: one that may not wake an engine is served
	l, err := e.Acquire(context.Background(), false)
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	pid := e.Status().PID
	e.Preload() // a running engine is left as it is
	if s := e.Status(); s.State != "ready" || s.PID != pid {
		t.Fatalf("a second preload touched the running engine: %+v", s)
	}
}

func TestPreloadNeverEvictsARunningGroupPeer(t *testing.T) {
	group := func(c *Config) { c.Group = "test-gpu-preload" }
	running := testEngine(t, "running", group)
	preloaded := testEngine(t, "late-preload", group)
	if err := running.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	pid := running.Status().PID
	preloaded.Preload()
	if s := preloaded.State(); s != Stopped {
		t.Fatalf("the preload started while its group peer runs: %s", s)
	}
	if s := running.Status(); s.State != "ready" || s.PID != pid {
		t.Fatalf("the running peer was disturbed: %+v", s)
	}
}

func TestTwoPreloadsOfOneGroupStartOnlyOne(t *testing.T) {
	group := func(c *Config) { c.Group = "test-gpu-preload-2" }
	a := testEngine(t, "pa", group)
	b := testEngine(t, "pb", group)
	var wg sync.WaitGroup
	for _, e := range []*Engine{a, b} {
		wg.Add(1)
		go func() { defer wg.Done(); e.Preload() }()
	}
	wg.Wait()
	if sa, sb := a.State(), b.State(); (sa == Stopped) == (sb == Stopped) {
		t.Fatalf("two preloads of one group: %s is %s, %s is %s; want exactly one started", a.Name(), sa, b.Name(), sb)
	}
}

func TestPreloadNeedsCmd(t *testing.T) {
	cfg := Config{Name: "remote", To: "http://10.0.0.1", Models: []string{"m"}, Preload: true}
	if err := cfg.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "preload needs 'cmd'") {
		t.Fatalf("got %v", err)
	}
}
