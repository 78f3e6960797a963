package clock

import (
	"sync/atomic"
	"testing"
	"time"
)

// fired waits for an AfterFunc callback: it runs in a goroutine of its
// own, so a test waits for it rather than for the clock.
func fired(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		t.Fatalf("%s did not fire", what)
	}
}

// notFired asserts that nothing is sent on ch for a moment: an AfterFunc
// that was not due must not run.
func notFired(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
		t.Fatalf("%s fired", what)
	case <-time.After(20 * time.Millisecond):
	}
}

func TestTheFakeClockStandsStillUntilAdvanced(t *testing.T) {
	t.Parallel()
	f := NewFake()
	start := f.Now()
	if !start.Equal(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("starts at %v", start)
	}
	time.Sleep(time.Millisecond)
	if !f.Now().Equal(start) {
		t.Fatal("the fake clock moved by itself")
	}
	f.Advance(90 * time.Second)
	if got := f.Now().Sub(start); got != 90*time.Second {
		t.Fatalf("advanced %v", got)
	}
	if got := Since(f, start); got != 90*time.Second {
		t.Fatalf("Since %v", got)
	}
}

// An AfterFunc runs once its time has come, not before, in a goroutine of
// its own (a callback that takes a lock the test holds does not deadlock
// Advance).
func TestAfterFuncFiresWhenItsTimeHasCome(t *testing.T) {
	t.Parallel()
	f := NewFake()
	done := make(chan struct{}, 1)
	tm := f.AfterFunc(time.Second, func() { done <- struct{}{} })
	if tm.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	f.Advance(999 * time.Millisecond)
	notFired(t, done, "a timer 1ms early")
	if f.Waiters() != 1 {
		t.Fatalf("%d armed", f.Waiters())
	}
	f.Advance(time.Millisecond)
	fired(t, done, "a timer on time")
	if f.Waiters() != 0 {
		t.Fatalf("a fired timer is still armed: %d", f.Waiters())
	}
	f.Advance(time.Hour)
	notFired(t, done, "a timer a second time")
}

func TestAZeroOrNegativeTimerFiresOnTheNextAdvance(t *testing.T) {
	t.Parallel()
	f := NewFake()
	a, b := f.NewTimer(0), f.NewTimer(-time.Second)
	select {
	case <-a.C():
		t.Fatal("fired before Advance")
	default:
	}
	f.Advance(0)
	for _, tm := range []Timer{a, b} {
		select {
		case <-tm.C():
		default:
			t.Fatal("not fired by Advance(0)")
		}
	}
}

// Timers fire in the order of their deadlines, each at its own time: a
// channel timer receives its deadline, not the end of the advance.
func TestTimersFireInDeadlineOrderAtTheirOwnTime(t *testing.T) {
	t.Parallel()
	f := NewFake()
	start := f.Now()
	var timers []Timer
	for _, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 3 * time.Second} {
		timers = append(timers, f.NewTimer(d))
	}
	f.Advance(10 * time.Second)
	for i, d := range []time.Duration{3 * time.Second, time.Second, 2 * time.Second, 3 * time.Second} {
		select {
		case at := <-timers[i].C():
			if got := at.Sub(start); got != d {
				t.Errorf("timer %d of %v fired at %v", i, d, got)
			}
		default:
			t.Errorf("timer %d did not fire", i)
		}
	}
	if got := f.Now().Sub(start); got != 10*time.Second {
		t.Fatalf("the clock ends at %v", got)
	}
}

// Stop reports whether it stopped a timer that would have fired; a
// stopped timer never fires. Stop after the timer fired reports false.
func TestStopBeforeAndAfterTheTimerFires(t *testing.T) {
	t.Parallel()
	f := NewFake()
	var runs atomic.Int32
	done := make(chan struct{}, 2)
	stopped := f.AfterFunc(time.Second, func() { runs.Add(1); done <- struct{}{} })
	kept := f.AfterFunc(2*time.Second, func() { done <- struct{}{} })
	if !stopped.Stop() {
		t.Fatal("Stop of an armed timer reports false")
	}
	if stopped.Stop() {
		t.Fatal("a second Stop reports true")
	}
	if f.Waiters() != 1 {
		t.Fatalf("%d armed after Stop", f.Waiters())
	}
	f.Advance(2 * time.Second)
	fired(t, done, "the timer that was not stopped")
	notFired(t, done, "the stopped timer")
	if runs.Load() != 0 {
		t.Fatal("the stopped timer ran")
	}
	if kept.Stop() {
		t.Fatal("Stop after the timer fired reports true")
	}
}

// Reset re-arms a timer from now, stopped or fired, and reports whether it
// was armed.
func TestResetArmsFromNow(t *testing.T) {
	t.Parallel()
	f := NewFake()
	start := f.Now()
	tm := f.NewTimer(time.Second)
	f.Advance(500 * time.Millisecond)
	if !tm.Reset(time.Second) {
		t.Fatal("Reset of an armed timer reports false")
	}
	if f.Waiters() != 1 {
		t.Fatalf("Reset armed the timer twice: %d", f.Waiters())
	}
	f.Advance(900 * time.Millisecond) // 1.4s: the first deadline is past
	select {
	case <-tm.C():
		t.Fatal("fired at its old deadline")
	default:
	}
	f.Advance(100 * time.Millisecond)
	if at := <-tm.C(); at.Sub(start) != 1500*time.Millisecond {
		t.Fatalf("fired at %v", at.Sub(start))
	}
	if tm.Reset(time.Second) {
		t.Fatal("Reset of a fired timer reports true")
	}
	f.Advance(time.Second)
	if at := <-tm.C(); at.Sub(start) != 2500*time.Millisecond {
		t.Fatalf("fired again at %v", at.Sub(start))
	}
}

// A channel timer's send never blocks Advance: a tick nobody received is
// kept, a second one dropped, as a time.Timer's buffered channel does.
func TestAnUnreadChannelNeverBlocksAdvance(t *testing.T) {
	t.Parallel()
	f := NewFake()
	start := f.Now()
	tm := f.NewTimer(time.Second)
	f.Advance(time.Second)
	tm.Reset(time.Second)
	f.Advance(time.Second)
	if at := <-tm.C(); at.Sub(start) != time.Second {
		t.Fatalf("kept the tick of %v", at.Sub(start))
	}
	select {
	case <-tm.C():
		t.Fatal("two ticks")
	default:
	}
}

// WaitForTimers is how a test knows the code under test reached its wait:
// it returns once that many timers are armed, by any goroutine.
func TestWaitForTimersReturnsOnceTheCodeWaits(t *testing.T) {
	t.Parallel()
	f := NewFake()
	f.WaitForTimers(0)
	waited := make(chan struct{})
	go func() {
		f.WaitForTimers(2)
		close(waited)
	}()
	f.NewTimer(time.Minute)
	select {
	case <-waited:
		t.Fatal("returned with one timer of two")
	case <-time.After(20 * time.Millisecond):
	}
	go f.AfterFunc(time.Minute, func() {})
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("did not return with two timers armed")
	}
}

// A callback that arms a new timer (a back-off that schedules the next)
// does so at the time it fired, and the next Advance fires it.
func TestACallbackMayArmTheNextTimer(t *testing.T) {
	t.Parallel()
	f := NewFake()
	start := f.Now()
	second := make(chan time.Time, 1)
	armed := make(chan struct{})
	f.AfterFunc(time.Second, func() {
		f.AfterFunc(time.Second, func() { second <- f.Now() })
		close(armed)
	})
	f.Advance(time.Second)
	<-armed
	f.Advance(time.Second)
	select {
	case at := <-second:
		if at.Sub(start) != 2*time.Second {
			t.Fatalf("the second timer ran at %v", at.Sub(start))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the second timer did not fire")
	}
}

func TestTheRealClock(t *testing.T) {
	t.Parallel()
	before := time.Now()
	if now := Real.Now(); now.Before(before) {
		t.Fatal("the real clock is behind time.Now")
	}
	done := make(chan struct{})
	tm := Real.AfterFunc(time.Millisecond, func() { close(done) })
	if tm.C() != nil {
		t.Fatal("an AfterFunc timer has a channel")
	}
	fired(t, done, "a real AfterFunc")
	nt := Real.NewTimer(time.Millisecond)
	select {
	case <-nt.C():
	case <-time.After(10 * time.Second):
		t.Fatal("a real timer did not fire")
	}
	if nt.Reset(time.Hour) {
		t.Fatal("Reset of a fired real timer reports true")
	}
	if !nt.Stop() {
		t.Fatal("Stop of an armed real timer reports false")
	}
	if Since(Real, before) <= 0 {
		t.Fatal("Since on the real clock")
	}
}
