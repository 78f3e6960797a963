package engines

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// limitedEngine is a remote engine (always ready, no process) with
// max_concurrent and a queue, on a fake clock, and what its observer heard.
func limitedEngine(t *testing.T, maxConcurrent, queue int, timeout time.Duration) (*Engine, *clock.Fake, *queueLog) {
	t.Helper()
	cfg := Config{Name: "limited", To: "http://127.0.0.1:1", Models: []string{"m"},
		MaxConcurrent: maxConcurrent, Queue: queue, QueueTimeout: caddy.Duration(timeout)}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	e, err := New(cfg, http.DefaultTransport, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Destruct() })
	clock := clock.NewFake()
	e.SetClock(clock)
	log := &queueLog{}
	e.SetObserver(log)
	return e, clock, log
}

// queueLog is an Observer that keeps what it heard of the queue.
type queueLog struct {
	mu    sync.Mutex
	waits []QueueOutcome
	busy  []BusyReason
}

func (*queueLog) EngineStarted(string, int, time.Duration) {}
func (*queueLog) EngineStartFailed(string, string)         {}
func (*queueLog) EngineStopped(string, int, StopReason)    {}
func (q *queueLog) EngineBusy(_ string, why BusyReason) {
	q.mu.Lock()
	q.busy = append(q.busy, why)
	q.mu.Unlock()
}
func (q *queueLog) EngineQueueWait(_ string, _ time.Duration, o QueueOutcome) {
	q.mu.Lock()
	q.waits = append(q.waits, o)
	q.mu.Unlock()
}

func (q *queueLog) heard() ([]QueueOutcome, []BusyReason) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return append([]QueueOutcome(nil), q.waits...), append([]BusyReason(nil), q.busy...)
}

type acquireResult struct {
	l   *Lease
	err error
}

// queueUp starts an Acquire and returns once it waits in the queue: each
// waiter arms one queue-timeout timer, so n armed timers are n waiters.
func queueUp(ctx context.Context, e *Engine, clock *clock.Fake, waiters int) <-chan acquireResult {
	ch := make(chan acquireResult, 1)
	go func() {
		l, err := e.Acquire(ctx, true)
		ch <- acquireResult{l, err}
	}()
	clock.WaitForTimers(waiters)
	return ch
}

func mustLease(t *testing.T, e *Engine) *Lease {
	t.Helper()
	l, err := e.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	return l
}

func TestQueuedRequestsAreServedInTheOrderTheyArrived(t *testing.T) {
	e, clock, log := limitedEngine(t, 1, 3, time.Minute)
	first := mustLease(t, e)
	var queued []<-chan acquireResult
	for i := range 3 {
		queued = append(queued, queueUp(context.Background(), e, clock, i+1))
	}
	if s := e.Status().Limit; s == nil || s.InFlight != 1 || s.Queued != 3 || s.MaxConcurrent != 1 || s.Queue != 3 {
		t.Fatalf("status %+v", s)
	}
	if e.TryAcquire() != nil {
		t.Fatal("the fast path overtook the queue")
	}
	// each release hands the place to the oldest waiter, and to nobody else
	held := first
	for i, ch := range queued {
		held.Release()
		r := <-ch
		if r.err != nil {
			t.Fatalf("waiter %d: %v", i, r.err)
		}
		for _, later := range queued[i+1:] {
			select {
			case <-later:
				t.Fatalf("a later waiter got a place before waiter %d", i)
			default:
			}
		}
		held = r.l
	}
	held.Release()
	held.Release() // a second release gives nothing back twice
	if s := e.Status().Limit; s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("after every release: %+v", s)
	}
	if waits, _ := log.heard(); len(waits) != 3 || waits[0] != QueueServed {
		t.Fatalf("queue waits heard: %v", waits)
	}
}

func TestARequestBeyondTheQueueIsRefusedAtOnceWithRetryAfter(t *testing.T) {
	e, clock, log := limitedEngine(t, 1, 1, time.Minute)
	first := mustLease(t, e)
	clock.Advance(7 * time.Second) // one request holds its place for 7 s
	first.Release()
	first = mustLease(t, e)
	defer first.Release()
	waiting := queueUp(context.Background(), e, clock, 1)

	_, err := e.Acquire(context.Background(), true)
	var busy *BusyError
	if !errors.As(err, &busy) || busy.Waited != 0 || busy.Engine != "limited" {
		t.Fatalf("want a BusyError at once, got %v", err)
	}
	if busy.RetryAfter != 7*time.Second {
		t.Fatalf("Retry-After %s, want the 7 s a place is held", busy.RetryAfter)
	}
	if _, busyHeard := log.heard(); len(busyHeard) != 1 || busyHeard[0] != BusyQueueFull {
		t.Fatalf("busy heard: %v", busyHeard)
	}
	if _, err := e.Borrow(); !errors.As(err, &busy) {
		t.Fatalf("a fallback's borrow of a full engine: %v", err)
	}
	first.Release()
	if r := <-waiting; r.err != nil {
		t.Fatal(r.err)
	} else {
		r.l.Release()
	}
}

func TestAQueuedRequestIsRefusedWhenItsWaitRunsOut(t *testing.T) {
	e, clock, log := limitedEngine(t, 1, 2, 30*time.Second)
	held := mustLease(t, e)
	defer held.Release()
	ch := queueUp(context.Background(), e, clock, 1)
	clock.Advance(29 * time.Second)
	select {
	case r := <-ch:
		t.Fatalf("left the queue before its timeout: %v", r.err)
	default:
	}
	clock.Advance(time.Second)
	r := <-ch
	var busy *BusyError
	if !errors.As(r.err, &busy) || busy.Waited != 30*time.Second {
		t.Fatalf("want a BusyError after 30s, got %v", r.err)
	}
	if s := e.Status().Limit; s.Queued != 0 || s.InFlight != 1 {
		t.Fatalf("after the timeout: %+v", s)
	}
	waits, busyHeard := log.heard()
	if len(waits) != 1 || waits[0] != QueueTimedOut || len(busyHeard) != 1 || busyHeard[0] != BusyQueueTimeout {
		t.Fatalf("heard waits %v, busy %v", waits, busyHeard)
	}
}

func TestAQueuedRequestThatLeavesFreesItsPlaceAtOnce(t *testing.T) {
	e, clock, log := limitedEngine(t, 1, 1, time.Minute)
	held := mustLease(t, e)
	ctx, cancel := context.WithCancel(context.Background())
	leaving := queueUp(ctx, e, clock, 1)
	cancel()
	if r := <-leaving; !errors.Is(r.err, context.Canceled) {
		t.Fatalf("want the caller's cancel, got %v", r.err)
	}
	if s := e.Status().Limit; s.Queued != 0 {
		t.Fatalf("the request that left still waits: %+v", s)
	}
	// its place in the queue is free: the next request waits, not refused
	next := queueUp(context.Background(), e, clock, 1)
	held.Release()
	r := <-next
	if r.err != nil {
		t.Fatal(r.err)
	}
	r.l.Release()
	if waits, _ := log.heard(); len(waits) != 2 || waits[0] != QueueLeft || waits[1] != QueueServed {
		t.Fatalf("queue waits heard: %v", waits)
	}
	if s := e.Status().Limit; s.InFlight != 0 {
		t.Fatalf("a place is still taken: %+v", s)
	}
}

func TestWithoutAQueueTheRequestAfterMaxConcurrentIsRefused(t *testing.T) {
	e, _, _ := limitedEngine(t, 2, 0, 0)
	a, b := mustLease(t, e), mustLease(t, e)
	if !e.Busy() {
		t.Fatal("two of two places taken, not busy")
	}
	var busy *BusyError
	if _, err := e.Acquire(context.Background(), true); !errors.As(err, &busy) {
		t.Fatalf("got %v", err)
	}
	a.Release()
	if e.Busy() {
		t.Fatal("busy with a place free")
	}
	// a fallback's borrow takes a place but no lease
	l, err := e.Borrow()
	if err != nil || l == nil {
		t.Fatalf("borrow: %v", err)
	}
	if s := e.Status(); s.Leases != 1 || s.Limit.InFlight != 2 {
		t.Fatalf("after a borrow: leases %d, %+v", s.Leases, s.Limit)
	}
	l.Release()
	b.Release()
	if s := e.Status(); s.Leases != 0 || s.Limit.InFlight != 0 {
		t.Fatalf("after every release: leases %d, %+v", s.Leases, s.Limit)
	}
}

// An engine whose config names no max_concurrent has DefaultMaxConcurrent
// places and no queue: the next request is refused at once, saying the cap
// is the default; below it the engine shows no limit and the scheduler
// reads it as it did without one.
func TestWithoutMaxConcurrentTheDefaultCapsAnEngine(t *testing.T) {
	e, _, log := limitedEngine(t, 0, 0, 0)
	leases := make([]*Lease, 0, DefaultMaxConcurrent)
	for range DefaultMaxConcurrent - 1 {
		leases = append(leases, mustLease(t, e))
	}
	if e.Busy() || e.Status().Limit != nil || e.Occupancy().Capacity != 0 || e.Occupancy().Saturated {
		t.Fatalf("below the default cap: busy %v, limit %+v, %+v", e.Busy(), e.Status().Limit, e.Occupancy())
	}
	if l := e.TryAcquire(); l == nil {
		t.Fatal("the last place of the default cap was refused")
	} else {
		leases = append(leases, l)
	}
	if !e.Busy() || !e.Occupancy().Saturated || e.Occupancy().Load != DefaultMaxConcurrent {
		t.Fatalf("at the default cap: busy %v, %+v", e.Busy(), e.Occupancy())
	}
	if e.TryAcquire() != nil {
		t.Fatal("a lease past the default cap")
	}
	var busy *BusyError
	_, err := e.Acquire(context.Background(), true)
	if !errors.As(err, &busy) || busy.MaxConcurrent != DefaultMaxConcurrent || busy.RetryAfter <= 0 ||
		err.Error() != "engine limited is busy: 1024 requests in flight, the default max_concurrent (an engine's max_concurrent line allows more)" {
		t.Fatalf("past the default cap: %v", err)
	}
	if l, err := e.Borrow(); l != nil || !errors.As(err, &busy) {
		t.Fatalf("a fallback's borrow past the default cap: %v %v", l, err)
	}
	if _, why := log.heard(); len(why) != 2 || why[0] != BusyQueueFull {
		t.Fatalf("the observer heard %v", why)
	}
	leases[0].Release()
	if l := e.TryAcquire(); l == nil {
		t.Fatal("a place given back was not free")
	}
}

func TestAQueueNeedsMaxConcurrent(t *testing.T) {
	cfg := Config{Name: "q", To: "http://127.0.0.1:1", Models: []string{"m"}, Queue: 3}
	if err := cfg.WithDefaults().Validate(); err == nil {
		t.Fatal("a queue without max_concurrent was accepted")
	}
	if d := (Config{MaxConcurrent: 1, Queue: 1}).WithDefaults().QueueTimeout; time.Duration(d) != DefaultQueueTimeout {
		t.Fatalf("default queue timeout %s", time.Duration(d))
	}
}

func TestQueuedRequestsLeaveWhenTheEngineIsTornDown(t *testing.T) {
	e, clock, _ := limitedEngine(t, 1, 1, time.Hour)
	held := mustLease(t, e)
	waiting := queueUp(context.Background(), e, clock, 1)
	destructed := make(chan struct{})
	go func() { e.Destruct(); close(destructed) }()
	if r := <-waiting; !errors.Is(r.err, ErrClosed) {
		t.Fatalf("a queued request of a torn-down engine: %v", r.err)
	}
	held.Release()
	<-destructed
}

func TestAdminStartTakesNoPlace(t *testing.T) {
	e, _, _ := limitedEngine(t, 1, 0, 0)
	held := mustLease(t, e)
	defer held.Release()
	if err := e.Start(context.Background()); err != nil {
		t.Fatalf("start of a busy engine: %v", err)
	}
}

func TestHigherPriorityGoesFirstAndKeysTakeTurns(t *testing.T) {
	e, clock, _ := limitedEngine(t, 1, 5, time.Minute)
	held := mustLease(t, e)
	ctx := context.Background()
	batch := WithPriority(ctx, 0, "batch")
	var order []string
	var queued []<-chan acquireResult
	names := []string{"batch-1", "batch-2", "batch-3", "interactive", "other"}
	for i, c := range []context.Context{batch, batch, batch, WithPriority(ctx, 10, "app"), WithPriority(ctx, 0, "other")} {
		queued = append(queued, queueUp(c, e, clock, i+1))
	}
	type served struct {
		i int
		r acquireResult
	}
	all := make(chan served, len(queued))
	for i, ch := range queued {
		go func() { all <- served{i, <-ch} }()
	}
	for range names {
		held.Release()
		s := <-all // one place freed: exactly one waiter gets it
		if s.r.err != nil {
			t.Fatal(s.r.err)
		}
		held = s.r.l
		order = append(order, names[s.i])
	}
	held.Release()
	if want := "interactive batch-1 other batch-2 batch-3"; strings.Join(order, " ") != want {
		t.Fatalf("served %v, want %s", order, want)
	}
}
