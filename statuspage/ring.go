package statuspage

import "sync"

// ring keeps the last items added, numbered in order. Readers follow it by
// number at their own pace: the writer never waits for them and memory never
// grows with them. A reader that falls further behind than the ring holds
// skips ahead to what is kept.
type ring[T any] struct {
	mu      sync.Mutex
	items   []T // items[(n-1)%len] holds item number n
	seq     uint64
	kept    uint64        // how many of the newest items are held (after a resize, fewer than len)
	changed chan struct{} // closed and replaced (lazily) when an item is added
}

func newRing[T any](size int) *ring[T] {
	return &ring[T]{items: make([]T, size)}
}

// add appends v, dropping the oldest item when full, and returns v's number.
func (r *ring[T]) add(v T) uint64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	r.items[(r.seq-1)%uint64(len(r.items))] = v
	r.kept = min(r.kept+1, uint64(len(r.items)))
	if r.changed != nil {
		close(r.changed)
		r.changed = nil
	}
	return r.seq
}

// since returns the kept items numbered after seq, oldest first, how many
// the reader missed because they were no longer kept, the number of the
// newest item, and a channel closed when the next item is added.
func (r *ring[T]) since(seq uint64) (items []T, missed, last uint64, wake <-chan struct{}) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.changed == nil {
		r.changed = make(chan struct{})
	}
	if r.seq <= seq {
		return nil, 0, r.seq, r.changed
	}
	size := uint64(len(r.items))
	first := seq + 1
	if r.seq-seq > r.kept {
		first = r.seq - r.kept + 1
		missed = first - seq - 1
	}
	items = make([]T, 0, r.seq-first+1)
	for n := first; n <= r.seq; n++ {
		items = append(items, r.items[(n-1)%size])
	}
	return items, missed, r.seq, r.changed
}

// resize keeps the newest items that fit in size.
func (r *ring[T]) resize(size int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if size == len(r.items) {
		return
	}
	old, oldSize := r.items, uint64(len(r.items))
	r.items = make([]T, size)
	r.kept = min(r.kept, oldSize, uint64(size))
	for n := r.seq - r.kept + 1; n <= r.seq; n++ {
		r.items[(n-1)%uint64(size)] = old[(n-1)%oldSize]
	}
}

// size is how many items the ring keeps.
func (r *ring[T]) size() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.items)
}
