package history

import (
	"sync"
	"time"
)

// lateness is how much earlier than the records after it a record may have
// arrived: records are numbered as requests end, so a long stream is
// numbered after shorter requests that arrived later. A scan from the
// newest stops at a record that arrived this long before the filter's
// Since.
const lateness = time.Hour

// memory keeps the records in a ring, as the file would: the newest keep,
// none older than the age limit.
type memory struct {
	mu    sync.RWMutex
	ring  []Record // ring[(seq-1) % len(ring)] holds record number seq
	first uint64   // the oldest kept record's number; first > last: none
	last  uint64
}

func newMemory() *memory { return &memory{first: 1} }

func (m *memory) write(recs []Record, keep int, cutoff int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.ring) != keep {
		m.resize(keep)
	}
	size := uint64(len(m.ring))
	for _, r := range recs {
		m.last++
		r.Seq = m.last
		m.ring[(m.last-1)%size] = r
	}
	if m.last-m.first+1 > size {
		m.first = m.last - size + 1
	}
	for m.first <= m.last && m.ring[(m.first-1)%size].Time < cutoff {
		m.ring[(m.first-1)%size] = Record{}
		m.first++
	}
	return nil
}

// resize keeps the newest records that fit in keep.
func (m *memory) resize(keep int) {
	old, oldSize := m.ring, uint64(len(m.ring))
	m.ring = make([]Record, keep)
	if m.last >= m.first && m.last-m.first+1 > uint64(keep) {
		m.first = m.last - uint64(keep) + 1
	}
	for n := m.first; n <= m.last && oldSize > 0; n++ {
		m.ring[(n-1)%uint64(keep)] = old[(n-1)%oldSize]
	}
}

func (m *memory) scan(f Filter, fn func(*Record) bool) error {
	m.mu.RLock()
	defer m.mu.RUnlock()
	size := uint64(len(m.ring))
	stop := f.Since - lateness.Milliseconds()
	for n := m.last; n >= m.first && n > 0; n-- {
		r := &m.ring[(n-1)%size]
		if r.Time < stop {
			return nil
		}
		if f.match(r) && !fn(r) {
			return nil
		}
	}
	return nil
}

func (m *memory) close() error { return nil }
