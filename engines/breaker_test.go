package engines

import (
	"sync"
	"testing"
	"time"
)

// fakeClock is a clock the test moves by hand.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestBreakerOpensAfterConsecutiveFailuresAndLetsOneTrialThrough(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBreaker(3, 30*time.Second, clock.now)

	for i := range 2 {
		if ok, _ := b.Allow(); !ok {
			t.Fatalf("refused after %d failures", i)
		}
		b.Failure()
	}
	b.Success() // a success in between resets the count
	for range 3 {
		if ok, _ := b.Allow(); !ok {
			t.Fatal("refused before the threshold")
		}
		b.Failure()
	}
	if ok, _ := b.Allow(); ok || b.State() != BreakerOpen {
		t.Fatalf("not open after 3 consecutive failures: %v", b.State())
	}
	if got := b.RetryIn(); got != 30*time.Second {
		t.Fatalf("retry in %s", got)
	}

	clock.advance(29 * time.Second)
	if ok, _ := b.Allow(); ok {
		t.Fatal("let a request through before the cool-down ended")
	}
	clock.advance(time.Second)
	ok, trial := b.Allow()
	if !ok || !trial {
		t.Fatalf("no trial after the cool-down: %v %v", ok, trial)
	}
	if ok, _ := b.Allow(); ok {
		t.Fatal("a second request went through while the trial is out")
	}
	b.Failure() // the trial failed: open for another full cool-down
	clock.advance(29 * time.Second)
	if ok, _ := b.Allow(); ok {
		t.Fatal("a failed trial did not restart the cool-down")
	}
	clock.advance(time.Second)
	if ok, trial := b.Allow(); !ok || !trial {
		t.Fatal("no second trial")
	}
	b.Success()
	if ok, trial := b.Allow(); !ok || trial || b.State() != BreakerClosed {
		t.Fatalf("a good trial did not close it: %v", b.State())
	}
}

func TestAbandonedTrialLetsTheNextRequestTry(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1000, 0)}
	b := NewBreaker(1, time.Minute, clock.now)
	b.Allow()
	b.Failure()
	clock.advance(time.Minute)
	_, trial := b.Allow()
	b.Abandon(trial) // the client went away: nothing learned
	if ok, trial := b.Allow(); !ok || !trial {
		t.Fatal("the next request after an abandoned trial is not the trial")
	}
}
