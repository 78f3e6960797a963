package history

import (
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/boltfile"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Options say where a Store keeps its records and for how long.
type Options struct {
	// Path is the embedded file (shared with the key counters); empty keeps
	// the records in memory.
	Path string
	// Keep and MaxAge bound the history (defaults DefaultKeep,
	// DefaultMaxAge). The newest Open's limits apply to a shared store.
	Keep   int
	MaxAge time.Duration
	// OnError is told when a write fails (the records of that write are
	// lost; the next write tries again). It runs on the writer goroutine.
	OnError func(error)
	// Clock ages the records. Default: the wall clock.
	Clock clock.Clock
}

// ErrHeld: another process holds the file (a second server on one data
// directory, or caddy validate beside a running one).
var ErrHeld = boltfile.ErrHeld

// Store is one handle on a process-wide history: handles opened on the
// same file (or both in memory) share its records and its writer, as a
// config reload briefly has two configs that must write to one history.
// Every handle must be closed; the last Close writes what is queued and
// closes the file.
type Store struct {
	core   *core
	closed atomic.Bool
}

var registry = struct {
	sync.Mutex
	cores map[string]*core
}{cores: map[string]*core{}}

// Open returns a handle on the history at opts.Path (or in memory). It
// touches no file and starts nothing: the first record or read opens the
// file and starts the writer, so that `caddy validate`, which provisions a
// config and throws it away, writes nothing.
func Open(opts Options) (*Store, error) {
	id := "memory"
	if opts.Path != "" {
		abs, err := filepath.Abs(opts.Path)
		if err != nil {
			return nil, fmt.Errorf("history %s: %v", opts.Path, err)
		}
		id, opts.Path = "file "+abs, abs
	}
	registry.Lock()
	defer registry.Unlock()
	c := registry.cores[id]
	if c == nil {
		c = newCore(opts)
		c.id = id
		registry.cores[id] = c
	}
	c.setLimits(opts.Keep, opts.MaxAge)
	if opts.OnError != nil {
		c.onError.Store(&opts.OnError)
	}
	c.refs++
	return &Store{core: c}, nil
}

// Add queues r for the writer and reports whether it was queued: when the
// queue is full, r is dropped (and counted in Dropped). It never waits.
func (s *Store) Add(r Record) bool {
	s.core.start()
	select {
	case s.core.in <- r:
		return true
	default:
		s.core.dropped.Add(1)
		return false
	}
}

// Dropped is how many records Add dropped since the store opened.
func (s *Store) Dropped() uint64 { return s.core.dropped.Load() }

// Sync returns once the records queued before it are written.
func (s *Store) Sync() {
	s.core.start()
	done := make(chan struct{})
	select {
	case s.core.flush <- done:
		<-done
	case <-s.core.done:
	}
}

// Query returns the records f selects, newest first, at most f's limit.
// The next page is Filter.Before = the last record's Seq.
func (s *Store) Query(f Filter) ([]Record, error) {
	out := []Record{}
	n := f.limit()
	err := s.Scan(f, func(r *Record) bool {
		out = append(out, *r)
		return len(out) < n
	})
	return out, err
}

// Scan calls fn with the records f selects (its limit aside), newest first,
// until fn returns false. fn must not keep r.
func (s *Store) Scan(f Filter, fn func(r *Record) bool) error {
	c := s.core
	b := c.open()
	cutoff := c.clock.Now().Add(-time.Duration(c.maxAge.Load())).UnixMilli()
	f.Since = max(f.Since, cutoff)
	return b.scan(f, fn)
}

// Limits are the limits in force.
func (s *Store) Limits() (keep int, maxAge time.Duration) {
	return int(s.core.keep.Load()), time.Duration(s.core.maxAge.Load())
}

// InMemory reports whether the records are kept in memory only: by choice,
// or because the file could not be opened.
func (s *Store) InMemory() bool {
	_, mem := s.core.open().(*memory)
	return mem
}

// Close lets go of the handle. Closing twice is harmless.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	registry.Lock()
	defer registry.Unlock()
	c := s.core
	c.refs--
	if c.refs > 0 {
		return nil
	}
	delete(registry.cores, c.id)
	if !c.started.Load() {
		return nil // never used: nothing was opened
	}
	close(c.stop)
	<-c.done
	return c.b.close()
}

// backend keeps the records: the file or memory.
type backend interface {
	// write numbers and stores recs, then drops the oldest records beyond
	// keep and those that arrived before cutoff (Unix milliseconds).
	write(recs []Record, keep int, cutoff int64) error
	// scan calls fn with the records f selects, newest first.
	scan(f Filter, fn func(*Record) bool) error
	close() error
}

// core is one history and its writer.
type core struct {
	id   string
	refs int // registry's lock
	path string

	in      chan Record
	flush   chan chan struct{}
	dropped atomic.Uint64
	keep    atomic.Int64
	maxAge  atomic.Int64 // nanoseconds
	onError atomic.Pointer[func(error)]
	clock   clock.Clock

	// the backend, opened at first use by the writer it starts
	startOnce sync.Once
	started   atomic.Bool
	opened    chan struct{} // closed once b is set
	b         backend

	stop, done chan struct{}
}

func newCore(opts Options) *core {
	c := &core{
		path:   opts.Path,
		in:     make(chan Record, queueSize),
		flush:  make(chan chan struct{}),
		clock:  opts.Clock,
		opened: make(chan struct{}),
		stop:   make(chan struct{}),
		done:   make(chan struct{}),
	}
	if c.clock == nil {
		c.clock = clock.Real
	}
	return c
}

// start starts the writer, once; it opens the backend first.
func (c *core) start() {
	c.startOnce.Do(func() {
		c.started.Store(true)
		go c.loop()
	})
}

// open returns the backend, starting the writer and waiting for it to open
// the backend if need be.
func (c *core) open() backend {
	c.start()
	<-c.opened
	return c.b
}

// openBackend opens the file; one that cannot be opened (held by another
// process, unwritable) is told to OnError, and the records are kept in
// memory instead.
func (c *core) openBackend() backend {
	if c.path == "" {
		return newMemory()
	}
	fb, err := openFile(c.path)
	if err == nil {
		return fb
	}
	if errors.Is(err, boltfile.ErrHeld) {
		err = fmt.Errorf("history %s is %w: keeping the request history in memory", c.path, err)
	} else {
		err = fmt.Errorf("history %s: %v; keeping the request history in memory", c.path, err)
	}
	c.tell(err)
	return newMemory()
}

func (c *core) tell(err error) {
	if f := c.onError.Load(); f != nil {
		(*f)(err)
	}
}

func (c *core) setLimits(keep int, maxAge time.Duration) {
	if keep <= 0 {
		keep = DefaultKeep
	}
	if maxAge <= 0 {
		maxAge = DefaultMaxAge
	}
	c.keep.Store(int64(keep))
	c.maxAge.Store(int64(maxAge))
}

// loop is the one writer: it takes what is queued, up to maxBatch records,
// and writes it in one transaction. It ends at stop, after writing what is
// still queued.
func (c *core) loop() {
	defer close(c.done)
	c.b = c.openBackend()
	close(c.opened)
	batch := make([]Record, 0, maxBatch)
	for {
		select {
		case r := <-c.in:
			batch = c.drain(append(batch[:0], r))
			c.write(batch)
			if len(batch) < maxBatch {
				c.rest()
			}
		case ack := <-c.flush:
			for batch = c.drain(batch[:0]); len(batch) > 0; batch = c.drain(batch[:0]) {
				c.write(batch)
			}
			close(ack)
		case <-c.stop:
			for batch = c.drain(batch[:0]); len(batch) > 0; batch = c.drain(batch[:0]) {
				c.write(batch)
			}
			return
		}
	}
}

// rest lets records gather for writeEvery after a write that took all
// there was, so that a busy gateway makes one transaction (and one sync of
// the file) per writeEvery, not one per request. A flush or a stop ends it.
func (c *core) rest() {
	t := time.NewTimer(writeEvery)
	defer t.Stop()
	select {
	case <-t.C:
	case <-c.stop:
	case ack := <-c.flush:
		for batch := c.drain(nil); len(batch) > 0; batch = c.drain(nil) {
			c.write(batch)
		}
		close(ack)
	}
}

// drain adds what is queued to batch, up to maxBatch, without waiting.
func (c *core) drain(batch []Record) []Record {
	for len(batch) < maxBatch {
		select {
		case r := <-c.in:
			batch = append(batch, r)
		default:
			return batch
		}
	}
	return batch
}

func (c *core) write(batch []Record) {
	if len(batch) == 0 {
		return
	}
	cutoff := c.clock.Now().Add(-time.Duration(c.maxAge.Load())).UnixMilli()
	if err := c.b.write(batch, int(c.keep.Load()), cutoff); err != nil {
		c.tell(err)
	}
	clear(batch) // the strings go with the records
}
