// Package clock is the time the gateway runs on: the wall clock in production,
// a fake one that tests advance.
package clock

import (
	"sort"
	"sync"
	"time"
)

// Clock is the time engines and the handler run on: the real one in
// production, a Fake in tests, so that budgets, back-offs, idle stops
// and fallback_after are tested without waiting for them.
type Clock interface {
	Now() time.Time
	// AfterFunc runs f in its own goroutine once d has passed.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTimer sends the time on C() once d has passed.
	NewTimer(d time.Duration) Timer
}

// Since is c.Now().Sub(t). On the real clock it is time.Since, which
// reads only the monotonic clock: half of what Now costs (a budget touched
// at every read of a stream reads it ten times a stream).
func Since(c Clock, t time.Time) time.Duration {
	if _, ok := c.(realClock); ok {
		return time.Since(t)
	}
	return c.Now().Sub(t)
}

// Timer is a *time.Timer behind the Clock interface.
type Timer interface {
	C() <-chan time.Time // nil for an AfterFunc timer
	Stop() bool
	Reset(d time.Duration) bool
}

// Real is the wall clock.
var Real Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// Fake is a Clock that moves only when a test advances it. Timers
// whose time has come fire in order of their deadlines: AfterFunc callbacks
// each in a goroutine of their own (as the real ones do), channel timers by
// a send the timer's owner receives when it is ready.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	timers  []*fakeTimer
	changed chan struct{} // closed and replaced whenever a timer is armed
}

// NewFake makes a fake clock standing at a fixed instant.
func NewFake() *Fake {
	return &Fake{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), changed: make(chan struct{})}
}

// Now is the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// AfterFunc arms a timer that calls fn in a new goroutine.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	return f.arm(d, fn, nil)
}

// NewTimer arms a timer that sends on its channel.
func (f *Fake) NewTimer(d time.Duration) Timer {
	return f.arm(d, nil, make(chan time.Time, 1))
}

func (f *Fake) arm(d time.Duration, fn func(), c chan time.Time) *fakeTimer {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := &fakeTimer{clock: f, fn: fn, c: c}
	f.schedule(t, d)
	return t
}

// schedule puts t in the queue d from now. Call with mu held.
func (f *Fake) schedule(t *fakeTimer, d time.Duration) {
	t.at = f.now.Add(d)
	t.armed = true
	f.timers = append(f.timers, t)
	close(f.changed)
	f.changed = make(chan struct{})
}

// Advance moves the clock by d, firing every timer that comes due on the way.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	end := f.now.Add(d)
	for {
		sort.SliceStable(f.timers, func(i, j int) bool { return f.timers[i].at.Before(f.timers[j].at) })
		if len(f.timers) == 0 || f.timers[0].at.After(end) {
			break
		}
		t := f.timers[0]
		f.timers = f.timers[1:]
		t.armed = false
		if t.at.After(f.now) {
			f.now = t.at
		}
		if t.fn != nil {
			go t.fn()
		} else {
			select {
			case t.c <- f.now:
			default:
			}
		}
	}
	f.now = end
	f.mu.Unlock()
}

// Waiters is how many timers are armed now.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// WaitForTimers blocks until at least n timers are armed: the way a test
// knows the code under test has reached its wait before advancing time.
func (f *Fake) WaitForTimers(n int) {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return
		}
		ch := f.changed
		f.mu.Unlock()
		<-ch
	}
}

type fakeTimer struct {
	clock *Fake
	at    time.Time
	fn    func()
	c     chan time.Time
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.c }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	return t.unarm()
}

// unarm takes t out of the queue. Call with the clock's mu held.
func (t *fakeTimer) unarm() bool {
	if !t.armed {
		return false
	}
	f := t.clock
	for i, o := range f.timers {
		if o == t {
			f.timers = append(f.timers[:i], f.timers[i+1:]...)
			break
		}
	}
	t.armed = false
	return true
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.unarm()
	f.schedule(t, d)
	return was
}
