package idle

import (
	"container/heap"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// scheduler keeps the watchdogs of one clock in a min-heap ordered by when
// each is to be looked at next, with one clock timer armed for the earliest.
// No goroutine runs between expiries: the timer's callback looks at every
// watchdog whose turn has come, fires the expired ones, puts the others back
// for the rest of their gap, and re-arms for the new earliest. A watchdog
// costs its place in the heap, not a runtime timer; a busy stream is looked
// at about once per budget, whatever its event rate.
type scheduler struct {
	clock clock.Clock
	epoch time.Time // queue times are ns since epoch

	mu     sync.Mutex
	queue  queue
	timer  clock.Timer // nil until first armed
	armed  bool
	armsAt int64 // when the timer fires, while armed
}

// schedulers holds one scheduler per clock: the real clock's serves the
// whole process, a test's fake clock gets its own, so fake time drives it.
// A fake clock's scheduler, once made, stays for the life of the process
// (a stopped timer and an empty heap).
var schedulers sync.Map // clock.Clock -> *scheduler

func schedulerOf(c clock.Clock) *scheduler {
	if s, ok := schedulers.Load(c); ok {
		return s.(*scheduler)
	}
	s, _ := schedulers.LoadOrStore(c, &scheduler{clock: c, epoch: c.Now()})
	return s.(*scheduler)
}

// add queues w to be looked at at.
func (s *scheduler) add(w *Watchdog, at time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.s = s
	w.due = int64(at.Sub(s.epoch))
	heap.Push(&s.queue, w)
	s.arm()
}

// remove takes w out of the queue.
func (s *scheduler) remove(w *Watchdog) {
	s.mu.Lock()
	defer s.mu.Unlock()
	w.stopped = true
	if w.index < 0 {
		return
	}
	heap.Remove(&s.queue, w.index)
	if len(s.queue) == 0 && s.armed {
		// nothing to wait for: no timer stays armed for an idle gateway
		// (an earliest that left early leaves a spurious wake-up, harmless)
		s.timer.Stop()
		s.armed = false
	}
}

// arm makes the timer fire when the earliest watchdog is due. Call with mu held.
func (s *scheduler) arm() {
	if len(s.queue) == 0 {
		return
	}
	at := s.queue[0].due
	if s.armed && s.armsAt <= at {
		return
	}
	d := time.Duration(at) - s.clock.Now().Sub(s.epoch)
	if s.timer == nil {
		s.timer = s.clock.AfterFunc(d, s.run)
	} else {
		s.timer.Reset(d)
	}
	s.armed, s.armsAt = true, at
}

// run is the timer's callback: it looks at every watchdog that is due.
func (s *scheduler) run() {
	var expired []*Watchdog
	s.mu.Lock()
	s.armed = false
	now := s.clock.Now()
	at := int64(now.Sub(s.epoch))
	for len(s.queue) > 0 && s.queue[0].due <= at {
		w := s.queue[0]
		next, out := w.next(now)
		if out {
			heap.Pop(&s.queue)
			expired = append(expired, w)
			continue
		}
		w.due = int64(next.Sub(s.epoch))
		heap.Fix(&s.queue, 0)
	}
	s.arm()
	s.mu.Unlock()
	for _, w := range expired {
		go w.fire() // as its own timer's callback would: never under another's
	}
}

// queue is a min-heap of watchdogs by due time (container/heap).
type queue []*Watchdog

func (q queue) Len() int           { return len(q) }
func (q queue) Less(i, j int) bool { return q[i].due < q[j].due }
func (q queue) Swap(i, j int) {
	q[i], q[j] = q[j], q[i]
	q[i].index, q[j].index = i, j
}

func (q *queue) Push(x any) {
	w := x.(*Watchdog)
	w.index = len(*q)
	*q = append(*q, w)
}

func (q *queue) Pop() any {
	old := *q
	n := len(old) - 1
	w := old[n]
	old[n] = nil
	w.index = -1
	*q = old[:n]
	return w
}
