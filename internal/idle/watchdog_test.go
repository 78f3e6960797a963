package idle

import (
	"bytes"
	"io"
	"runtime"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// fired is a fire callback a test can wait for.
func fired() (func(), chan struct{}) {
	c := make(chan struct{}, 1)
	return func() { c <- struct{}{} }, c
}

func mustFire(t *testing.T, c chan struct{}) {
	t.Helper()
	select {
	case <-c:
	case <-time.After(5 * time.Second):
		t.Fatal("the watchdog did not fire")
	}
}

// mustNotFire checks that w has not run out. The scheduler runs in the
// fake timer's goroutine: first wait until it has looked at every watchdog
// due by now, then w is still queued (or was stopped) unless it ran out.
func mustNotFire(t *testing.T, w *Watchdog, c chan struct{}) {
	t.Helper()
	s := w.s
	for {
		s.mu.Lock()
		due := len(s.queue) > 0 && s.queue[0].due <= int64(s.clock.Now().Sub(s.epoch))
		s.mu.Unlock()
		if !due {
			break
		}
		runtime.Gosched()
	}
	s.mu.Lock()
	out := w.index < 0 && !w.stopped
	s.mu.Unlock()
	select {
	case <-c:
		t.Fatal("the watchdog fired")
	default:
	}
	if out {
		t.Fatal("the watchdog ran out")
	}
}

func TestAnUntouchedWatchdogWaitsForTheFirstEvent(t *testing.T) {
	c := clock.NewFake()
	fire, got := fired()
	w := New(c, time.Second, fire)
	defer w.Stop()
	c.Advance(10 * time.Second) // first_token_timeout's time, not this budget's
	mustNotFire(t, w, got)
	w.Touch()
	c.Advance(999 * time.Millisecond)
	c.Advance(time.Millisecond)
	mustFire(t, got)
}

func TestATouchRestartsTheBudget(t *testing.T) {
	c := clock.NewFake()
	fire, got := fired()
	w := New(c, time.Second, fire)
	defer w.Stop()
	w.Touch()
	for range 5 {
		c.Advance(900 * time.Millisecond)
		w.Touch()
	}
	mustNotFire(t, w, got)
	c.Advance(time.Second)
	mustFire(t, got)
}

func TestABlockedWatchdogIsTheClientsTime(t *testing.T) {
	c := clock.NewFake()
	fire, got := fired()
	w := New(c, time.Second, fire)
	defer w.Stop()
	w.Touch()
	w.Block()
	c.Advance(5 * time.Second)
	mustNotFire(t, w, got)
	w.Unblock() // the budget runs again from here
	c.Advance(999 * time.Millisecond)
	mustNotFire(t, w, got)
	c.Advance(2 * time.Second)
	mustFire(t, got)
}

func TestAStoppedWatchdogNeverFiresAndLeavesNoTimer(t *testing.T) {
	c := clock.NewFake()
	fire, got := fired()
	w := New(c, time.Second, fire)
	w.Touch()
	w.Stop()
	w.Stop() // twice is safe
	if n := c.Waiters(); n != 0 {
		t.Fatalf("%d timers armed after the last Stop", n)
	}
	c.Advance(time.Minute)
	mustNotFire(t, w, got)
}

func TestWatchdogsShareOneTimer(t *testing.T) {
	c := clock.NewFake()
	const n = 1000
	ws := make([]*Watchdog, n)
	gots := make([]chan struct{}, n)
	for i := range ws {
		var fire func()
		fire, gots[i] = fired()
		// budgets of 1 to 10 s, so the order of expiry is not the order of arming
		ws[i] = New(c, time.Duration(1+i%10)*time.Second, fire)
		ws[i].Touch()
	}
	if w := c.Waiters(); w != 1 {
		t.Fatalf("%d timers armed for %d watchdogs, want 1", w, n)
	}
	c.Advance(time.Second + time.Millisecond)
	for i := range ws {
		if i%10 == 0 {
			mustFire(t, gots[i])
		}
	}
	for i := range ws {
		if i%10 != 0 {
			mustNotFire(t, ws[i], gots[i])
			ws[i].Stop()
		}
	}
	if w := c.Waiters(); w != 0 {
		t.Fatalf("%d timers armed after every watchdog stopped or fired", w)
	}
}

func TestALaterWatchdogWithAShorterBudgetFiresFirst(t *testing.T) {
	c := clock.NewFake()
	slowFire, slow := fired()
	long := New(c, time.Minute, slowFire)
	defer long.Stop()
	long.Touch()
	fire, got := fired()
	short := New(c, time.Second, fire)
	defer short.Stop()
	short.Touch()
	c.Advance(time.Second + time.Millisecond)
	mustFire(t, got)
	mustNotFire(t, long, slow)
}

func TestATouchReaderTouchesAtEveryRead(t *testing.T) {
	c := clock.NewFake()
	fire, got := fired()
	w := New(c, time.Second, fire)
	defer w.Stop()
	r := &TouchReader{ReadCloser: io.NopCloser(bytes.NewReader([]byte("abc"))), W: w}
	c.Advance(10 * time.Second)
	if _, err := r.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	c.Advance(900 * time.Millisecond)
	mustNotFire(t, w, got)
	c.Advance(100 * time.Millisecond)
	mustFire(t, got)
}

func TestTheRealClockFires(t *testing.T) {
	fire, got := fired()
	w := New(clock.Real, 20*time.Millisecond, fire)
	defer w.Stop()
	w.Touch()
	mustFire(t, got)
}
