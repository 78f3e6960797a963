package quota

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Config says where a Limiter keeps its counters. It is runtime
// configuration: the handler's JSON and Caddyfile map onto it.
type Config struct {
	// Path is the embedded store's file, e.g.
	// caddy.AppDataDir()/llm_gateway/quota.db; its directory is created.
	// Empty (and no Redis): counters live in memory only and die with the
	// Limiter. Ignored when Redis is set.
	Path string
	// Redis, when set, shares the counters of several gateways through a
	// Redis server instead of the embedded store.
	Redis *RedisConfig
	// FlushInterval is how often the embedded store is written. Default 1s.
	FlushInterval time.Duration
	// OnDegraded is told when the store stops answering (err != nil) and
	// when it answers again (err == nil): only on changes, so it may log
	// and set a metric. It is this handle's: it stops being called when the
	// handle is closed. Errors name no key's secret (the store never sees
	// one).
	OnDegraded func(err error)
	// Clock is the time windows are counted in. Default: the wall clock.
	Clock clock.Clock
}

// Default intervals.
const (
	DefaultFlushInterval = time.Second
	DefaultSyncInterval  = 200 * time.Millisecond
	DefaultRedisTimeout  = 100 * time.Millisecond
)

// storeID names the store a Config counts in: the key of the process-wide
// registry. Empty for a memory-only Limiter, which is never shared.
func (cfg Config) storeID() (string, error) {
	if cfg.Redis != nil {
		return "redis " + cfg.Redis.Addr + " " + strconv.Itoa(cfg.Redis.DB) + " " + cfg.Redis.prefix(), nil
	}
	if cfg.Path == "" {
		return "", nil
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return "", fmt.Errorf("quota store %s: %v", cfg.Path, err)
	}
	return "file " + abs, nil
}

// registry holds the live cores, one per store, with a count of the handles
// on each. A config reload briefly has two configs (the new one is
// provisioned before the old one is cleaned up), and both must count in the
// same counters, not in two copies that overwrite each other's saves: so
// the core outlives configs, as Caddy's usage pools keep state that must
// survive a reload. The last handle's Close flushes and closes the store.
var registry = struct {
	sync.Mutex
	cores map[string]*core
}{cores: map[string]*core{}}

// Open returns a handle on the Limiter of cfg's store. Handles opened with
// the same store (the same Path, or the same Redis address, DB and prefix)
// share one set of counters and one background writer, whatever else their
// Configs say: the first Open's intervals and clock stay in force while any
// handle is open. Every handle must be closed.
func Open(cfg Config) (*Limiter, error) {
	id, err := cfg.storeID()
	if err != nil {
		return nil, err
	}
	if id == "" {
		c, err := newCore(cfg)
		if err != nil {
			return nil, err
		}
		c.refs = 1
		return c.handle(cfg.OnDegraded), nil
	}
	registry.Lock()
	defer registry.Unlock()
	c := registry.cores[id]
	if c == nil {
		if c, err = newCore(cfg); err != nil {
			return nil, err
		}
		c.id = id
		registry.cores[id] = c
	}
	c.refs++
	return c.handle(cfg.OnDegraded), nil
}

// Limiter is one handle on a process-wide set of counters. Its methods are
// safe for concurrent use.
type Limiter struct {
	core   *core
	closed atomic.Bool
}

// Degraded reports whether the store is failing (Redis unreachable, the
// embedded store not writable): counting goes on in memory meanwhile, and
// what was counted is written or pushed once the store answers again.
func (l *Limiter) Degraded() bool { return l.core.degraded.Load() }

// Sync writes the embedded store, or pushes to and pulls from Redis, now
// rather than at the next interval.
func (l *Limiter) Sync() error { return l.core.sync() }

// Reset forgets key's counts in their current windows, here and in the
// store (reservations of requests in flight stay).
func (l *Limiter) Reset(key string) error {
	c := l.core
	// no sync in between: one in flight would bring the old totals back
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	if v, ok := c.keys.Load(key); ok {
		ks := v.(*keyState)
		// a first-sight read in flight ends first, and none starts after:
		// it would bring back the counts being reset
		ks.pulled.Do(func() {})
		ks.mu.Lock()
		for row := range ks.c {
			for w := range ks.c[row] {
				ks.c[row][w].used, ks.c[row][w].unsynced = 0, 0
			}
		}
		ks.dirty = true
		ks.mu.Unlock()
	}
	if c.redis == nil {
		return nil
	}
	// every window of the key, counted here or not: another gateway may
	// have counted it
	ctx, cancel := context.WithTimeout(context.Background(), c.redis.syncTimeout)
	defer cancel()
	if err := c.redis.reset(ctx, key, c.clock.Now().Unix()); err != nil {
		return fmt.Errorf("resetting key %s in the shared store: %v", key, err)
	}
	return nil
}

// All is the usage of every key in rules, sorted by name.
func (l *Limiter) All(rules map[string]Rules) []KeyUsage {
	names := make([]string, 0, len(rules))
	for name := range rules {
		names = append(names, name)
	}
	sort.Strings(names)
	all := make([]KeyUsage, 0, len(names))
	for _, name := range names {
		all = append(all, l.Usage(name, rules[name]))
	}
	return all
}

// Close lets go of the handle. The last handle on a store stops the
// background writer, writes or pushes what is left, and closes the store.
// Closing twice is harmless.
func (l *Limiter) Close() error {
	if l.closed.Swap(true) {
		return nil
	}
	c := l.core
	c.hooksMu.Lock()
	delete(c.hooks, l)
	c.hooksMu.Unlock()
	if c.id == "" {
		return c.close()
	}
	// close under the registry's lock: an Open of the same store right
	// after must not find the file still held
	registry.Lock()
	defer registry.Unlock()
	c.refs--
	if c.refs > 0 {
		return nil
	}
	delete(registry.cores, c.id)
	return c.close()
}

// core is the counters of one store and the goroutine that saves them.
type core struct {
	id    string // registry key; "" when private
	refs  int    // open handles; registry's lock
	clock clock.Clock
	keys  sync.Map // key name → *keyState

	path  string      // the embedded store's file, or ""
	file  *boltStore  // the embedded store once open (syncMu), or nil
	redis *redisStore // the shared store, or nil

	degraded atomic.Bool
	hooksMu  sync.Mutex
	hooks    map[*Limiter]func(error)
	lastErr  error // why degraded; hooksMu

	syncMu   sync.Mutex // one sync at a time
	interval time.Duration
	stop     chan struct{}
	done     chan struct{}
}

func newCore(cfg Config) (*core, error) {
	c := &core{clock: cfg.Clock, hooks: map[*Limiter]func(error){}}
	if c.clock == nil {
		c.clock = clock.Real
	}
	switch {
	case cfg.Redis != nil:
		r, err := newRedisStore(*cfg.Redis)
		if err != nil {
			return nil, err
		}
		c.redis = r
		c.interval = r.syncInterval
	case cfg.Path != "":
		c.path = cfg.Path
		c.interval = cfg.FlushInterval
		if c.interval <= 0 {
			c.interval = DefaultFlushInterval
		}
		// A file another process holds is no reason to refuse a config:
		// `caddy validate` provisions beside a running server. Count in
		// memory, degraded, and take the file when it is free.
		err := c.openFile(time.Second)
		if err != nil && !errors.Is(err, errStoreHeld) {
			return nil, err
		}
		c.setHealth(err)
	default:
		return c, nil // memory only: nothing to save
	}
	c.stop, c.done = make(chan struct{}), make(chan struct{})
	go c.loop()
	return c, nil
}

func (c *core) handle(onDegraded func(error)) *Limiter {
	l := &Limiter{core: c}
	if onDegraded == nil {
		return l
	}
	c.hooksMu.Lock()
	c.hooks[l] = onDegraded
	err := c.lastErr
	c.hooksMu.Unlock()
	if err != nil {
		onDegraded(err) // a new handle hears of a degraded store at once
	}
	return l
}

// state is key's counters, made on first sight. Key names come from the
// configuration, so the map stays as small as the config. With Redis, first
// sight reads the key's counters from Redis (pull) before anything is
// counted or shown: a key over its budget there is over it here too, right
// after a restart. Callers that come meanwhile wait for
// that read.
func (c *core) state(key string) *keyState {
	v, ok := c.keys.Load(key)
	if !ok {
		v, _ = c.keys.LoadOrStore(key, &keyState{name: key})
	}
	ks := v.(*keyState)
	if c.redis != nil {
		ks.pulled.Do(func() { c.pull(ks) })
	}
	return ks
}

// pull sets ks's counters to Redis's, every row and window current now, in
// one round trip bounded by the request path's timeout. The counters Redis
// has become active, so the syncer keeps them fresh. If Redis does not
// answer, the Limiter is degraded and the key is counted locally, as any
// key is while degraded; the syncer pulls its active counters once Redis is
// back. While degraded already, pull does not try: the request path never
// waits for a Redis that is known to be failing.
func (c *core) pull(ks *keyState) {
	if c.degraded.Load() {
		return
	}
	now := c.clock.Now().Unix()
	counts, err := c.redis.read(ks.name, now)
	if err != nil {
		c.setHealth(err)
		return
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for row := range counts {
		for w := Window(0); w < numWindows; w++ {
			if counts[row][w] < 0 {
				continue // Redis has no count: nothing to learn
			}
			ctr, _ := ks.roll(row, w, now)
			ctr.used = counts[row][w] + ctr.unsynced
		}
	}
}

// openFile opens the embedded store and adds its counts of the windows
// current now (the store drops the rest) to what was counted in memory
// while the file was held elsewhere. Call before the loop starts or with
// syncMu held.
func (c *core) openFile(wait time.Duration) error {
	f, err := openBoltStore(c.path, wait)
	if err != nil {
		return err
	}
	now := c.clock.Now().Unix()
	recs, err := f.load(now)
	if err != nil {
		f.close()
		return err
	}
	c.file = f
	for _, r := range recs {
		ks := c.state(r.key)
		ks.mu.Lock()
		ctr, _ := ks.roll(r.row, r.window, now)
		if ctr.start == r.start {
			ks.dirty = ks.dirty || ctr.used != 0
			ctr.used += r.used
		}
		ks.mu.Unlock()
	}
	return nil
}

// loop saves the counters every interval until close. Its timer is re-armed
// only after a save has finished, so a slow store never stacks saves, and a
// test on fake time knows a save is over when the timer is armed again.
func (c *core) loop() {
	defer close(c.done)
	t := c.clock.NewTimer(c.interval)
	defer t.Stop()
	for {
		select {
		case <-c.stop:
			return
		case <-t.C():
			c.sync()
			t.Reset(c.interval)
		}
	}
}

// record is one counter as the stores see it.
type record struct {
	ks         *keyState
	key        string
	row        int
	window     Window
	start, end int64 // unix seconds
	used       int64 // the local view, for the embedded store
	delta      int64 // unsynced counts moved out of the counter, for Redis
}

// snapshot copies ks's active counters, rolled to now. With take, the
// unsynced deltas move into the records (the caller pushes them, and hands
// them back with restore if that fails). Takes ks's lock briefly.
func (c *core) snapshot(ks *keyState, now int64, take bool) []record {
	var recs []record
	ks.mu.Lock()
	defer ks.mu.Unlock()
	for row := range ks.c {
		for w := Window(0); w < numWindows; w++ {
			if !ks.c[row][w].active {
				continue
			}
			ctr, end := ks.roll(row, w, now)
			recs = append(recs, record{ks: ks, key: ks.name, row: row, window: w, start: ctr.start, end: end, used: ctr.used, delta: ctr.unsynced})
			if take {
				ctr.unsynced = 0
			}
		}
	}
	return recs
}

// sync is one save: the embedded store gets the keys changed since the last
// one; Redis gets every active counter's delta and gives back its total.
// Failures keep the counts in memory (marked for the next save) and mark
// the Limiter degraded; the first success clears it.
func (c *core) sync() error {
	c.syncMu.Lock()
	defer c.syncMu.Unlock()
	now := c.clock.Now().Unix()
	var err error
	switch {
	case c.path != "":
		if c.file == nil {
			if err = c.openFile(time.Millisecond); err != nil {
				break
			}
		}
		err = c.saveFile(now)
	case c.redis != nil:
		err = c.syncRedis(now)
	}
	c.setHealth(err)
	return err
}

func (c *core) saveFile(now int64) error {
	var recs []record
	c.keys.Range(func(_, v any) bool {
		ks := v.(*keyState)
		ks.mu.Lock()
		dirty := ks.dirty
		ks.dirty = false
		ks.mu.Unlock()
		if dirty {
			recs = append(recs, c.snapshot(ks, now, false)...)
		}
		return true
	})
	if len(recs) == 0 {
		return nil
	}
	if err := c.file.save(recs); err != nil {
		for _, r := range recs {
			r.ks.mu.Lock()
			r.ks.dirty = true
			r.ks.mu.Unlock()
		}
		return err
	}
	return nil
}

func (c *core) syncRedis(now int64) error {
	var recs []record
	c.keys.Range(func(_, v any) bool {
		recs = append(recs, c.snapshot(v.(*keyState), now, true)...)
		return true
	})
	if len(recs) == 0 {
		return c.redis.ping()
	}
	totals, err := c.redis.push(recs)
	for i, r := range recs {
		r.ks.mu.Lock()
		ctr := &r.ks.c[r.row][r.window]
		switch {
		case ctr.start != r.start:
			// the window rolled over meanwhile: its counts are history
		case err != nil:
			// used still holds them: only the push is owed
			ctr.unsynced += r.delta
		default:
			ctr.used = totals[i] + ctr.unsynced
		}
		r.ks.mu.Unlock()
	}
	return err
}

// setHealth records whether the store answered, telling the handles' hooks
// on a change.
func (c *core) setHealth(err error) {
	bad := err != nil
	if !c.degraded.CompareAndSwap(!bad, bad) {
		return
	}
	c.hooksMu.Lock()
	c.lastErr = err
	hooks := make([]func(error), 0, len(c.hooks))
	for _, h := range c.hooks {
		hooks = append(hooks, h)
	}
	c.hooksMu.Unlock()
	for _, h := range hooks {
		h(err)
	}
}

// close stops the loop, saves what is left and closes the store.
func (c *core) close() error {
	if c.stop == nil {
		return nil
	}
	close(c.stop)
	<-c.done
	err := c.sync()
	switch {
	case c.file != nil:
		err = errors.Join(err, c.file.close())
	case c.redis != nil:
		err = errors.Join(err, c.redis.close())
	}
	return err
}
