package keystore

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Config says where the issued keys live and how they are hashed.
type Config struct {
	// Path is the embedded store's file (the key counters' own). Ignored
	// when Redis is set.
	Path string
	// Redis shares the keys of several front doors.
	Redis *RedisConfig
	// Secret keys the tokens' hash. Empty: the secret generated into
	// SecretPath at the first issue (embedded store only).
	Secret string
	// SecretPath is where a generated secret lives, a file of its own
	// beside the store's.
	SecretPath string
	// Max is the most keys issued at once. Default: none.
	Max int
	// Interval is how often use is saved, and Redis asked for changes.
	// Default: DefaultInterval.
	Interval time.Duration
	// OnError is told when the store stops answering or refuses every
	// issued key (err != nil), and when that ends (nil): only on changes,
	// so it may log. It is this handle's: it stops being called when the
	// handle is closed. No error names a token or the secret.
	OnError func(err error)
	// Clock is what expiries, overlaps and last uses are read on. Default:
	// the wall clock.
	Clock clock.Clock
}

// DefaultInterval is how often use is saved and Redis asked for changes:
// the bound, with one round trip, on how long another front door accepts a
// key revoked here when a publication is lost.
const DefaultInterval = time.Second

// storeID names the store and the secret a Config uses: handles with the
// same one share a core.
func (cfg Config) storeID() (string, error) {
	secret := "file " + cfg.SecretPath
	if cfg.Secret != "" {
		sum := sha256.Sum256([]byte(cfg.Secret))
		secret = "given " + hex.EncodeToString(sum[:8])
	}
	if r := cfg.Redis; r != nil {
		return "redis " + r.Addr + " " + strconv.Itoa(r.DB) + " " + r.prefix() + " " + secret, nil
	}
	if cfg.Path == "" {
		return "", fmt.Errorf("the issued keys need a store: a file or Redis")
	}
	abs, err := filepath.Abs(cfg.Path)
	if err != nil {
		return "", fmt.Errorf("the issued keys' store %s: %v", cfg.Path, err)
	}
	return "file " + abs + " " + secret, nil
}

var registry = struct {
	sync.Mutex
	cores map[string]*core
}{cores: map[string]*core{}}

// Open returns a handle on the issued keys of cfg's store. Handles with the
// same store and secret share one core (the first Open's Max, Interval and
// Clock hold while any is open). Every handle must be closed.
func Open(cfg Config) (*Store, error) {
	id, err := cfg.storeID()
	if err != nil {
		return nil, err
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
	return c.handle(cfg.OnError), nil
}

// Store is one handle on the issued keys. Its methods are safe for
// concurrent use.
type Store struct {
	core   *core
	closed atomic.Bool
}

// Close lets go of the handle; the last one saves the use and closes the
// store.
func (s *Store) Close() error {
	if !s.closed.CompareAndSwap(false, true) {
		return nil
	}
	c := s.core
	c.hooksMu.Lock()
	delete(c.hooks, s)
	c.hooksMu.Unlock()
	registry.Lock()
	c.refs--
	last := c.refs == 0
	if last {
		delete(registry.cores, c.id)
	}
	registry.Unlock()
	if !last {
		return nil
	}
	return c.close()
}

// Degraded reports whether the store is failing or refuses every issued
// key (a secret that is not theirs): OnError said why.
func (s *Store) Degraded() bool { return s.core.degraded.Load() }

// Refresh saves the use and reads what other front doors changed now,
// rather than at the next interval.
func (s *Store) Refresh() error { return s.core.refresh() }

// Find returns the rules of the issued key whose token this is (the
// keys.Issued of the door): nil when it is none, or no longer (revoked, or
// replaced and past its overlap); a *keys.ExpiredError past its expiry. It
// counts the key's use.
func (s *Store) Find(token string) (*keys.Rules, error) {
	idx := s.core.idx.Load()
	if idx.sec == nil {
		return nil, nil
	}
	e := idx.byHash[idx.sec.sum(token)]
	if e == nil {
		return nil, nil
	}
	now := s.core.clock.Now()
	if !e.until.IsZero() && !now.Before(e.until) {
		return nil, nil
	}
	if exp := e.rec.Expires; !exp.IsZero() && !now.Before(exp) {
		return nil, &keys.ExpiredError{Name: e.rec.Name, At: exp}
	}
	e.act.seen(now)
	return e.rules, nil
}

// All are the rules of every issued key, sorted by name.
func (s *Store) All() []*keys.Rules { return s.core.idx.Load().rules }

// Charge counts an answer's tokens against the key's use; a name that is
// no issued key is none of the store's.
func (s *Store) Charge(name string, tokens int64) {
	if e := s.core.idx.Load().byName[name]; e != nil && tokens > 0 {
		e.act.tokens.Add(tokens)
	}
}

// List is every issued key, sorted by name: no token, no hash.
func (s *Store) List() []Key {
	idx := s.core.idx.Load()
	now := s.core.clock.Now()
	out := make([]Key, 0, len(idx.rules))
	for _, kr := range idx.rules {
		e := idx.byName[kr.Name]
		out = append(out, e.rec.view(e.act.view(), now))
	}
	return out
}

// Get is one issued key.
func (s *Store) Get(name string) (Key, bool) {
	e := s.core.idx.Load().byName[name]
	if e == nil {
		return Key{}, false
	}
	return e.rec.view(e.act.view(), s.core.clock.Now()), true
}

// index is what Find reads: every accepted token's hash, each key by name.
// It is rebuilt whole on every change (keys change at an operator's pace)
// and swapped in, so a request never waits for a change.
type index struct {
	sec    *secret // nil: no token is found (no secret, or not the keys')
	byHash map[[sha256.Size]byte]*entry
	byName map[string]*entry
	rules  []*keys.Rules // sorted by name
}

// entry is one accepted token of a key.
type entry struct {
	rec   *record
	rules *keys.Rules
	act   *activity
	until time.Time // a replaced token's end; zero for the current one
}

// core is the process-wide state of one store.
type core struct {
	id       string
	refs     int // registry's lock
	max      int
	interval time.Duration
	clock    clock.Clock
	path     string // the embedded store's, to open it once it is free

	mu       sync.Mutex // writes, loads and rebuilds, one at a time
	be       backend    // nil while the file is held elsewhere
	sec      *secret    // nil until a key is issued with a generated secret
	secPath  string
	mismatch error // the stored check is not sec's: every key is refused
	recs     map[string]*record
	acts     map[string]*activity
	version  int64
	stale    bool // the last load failed: load again
	idx      atomic.Pointer[index]

	stop, done chan struct{}

	hooksMu  sync.Mutex
	hooks    map[*Store]func(error)
	lastErr  error
	degraded atomic.Bool
}

func newCore(cfg Config) (*core, error) {
	c := &core{max: cfg.Max, interval: cfg.Interval, clock: cfg.Clock, secPath: cfg.SecretPath,
		recs: map[string]*record{}, acts: map[string]*activity{}, hooks: map[*Store]func(error){},
		stop: make(chan struct{}), done: make(chan struct{})}
	if c.clock == nil {
		c.clock = clock.Real
	}
	if c.interval <= 0 {
		c.interval = DefaultInterval
	}
	c.idx.Store(&index{byHash: map[[sha256.Size]byte]*entry{}, byName: map[string]*entry{}})
	var err error
	switch {
	case cfg.Secret != "":
		c.sec = newSecret([]byte(cfg.Secret))
	case cfg.Redis != nil:
		return nil, fmt.Errorf("the issued keys on Redis need a secret: every front door must hash alike")
	default:
		if c.sec, err = readSecretFile(cfg.SecretPath); err != nil {
			return nil, err
		}
	}
	var health error
	if cfg.Redis != nil {
		if c.be, err = newRedisStore(*cfg.Redis); err != nil {
			return nil, err
		}
	} else {
		c.path = cfg.Path
		// a file another process holds is no reason to refuse a config:
		// no issued key is accepted until it is free
		be, err := openBolt(cfg.Path, time.Second)
		if err != nil && !errors.Is(err, errHeld) {
			return nil, err
		}
		if err == nil {
			c.be = be
		}
		health = err
	}
	if c.be != nil {
		c.mu.Lock()
		health = c.load()
		c.mu.Unlock()
	}
	c.setHealth(health)
	go c.loop()
	return c, nil
}

func (c *core) handle(onError func(error)) *Store {
	s := &Store{core: c}
	if onError == nil {
		return s
	}
	c.hooksMu.Lock()
	c.hooks[s] = onError
	err := c.lastErr
	c.hooksMu.Unlock()
	if err != nil {
		onError(err) // a new handle hears of a failing store at once
	}
	return s
}

// load reads every record and rebuilds the index. Call with mu held.
func (c *core) load() error {
	ctx := context.Background()
	raw, check, version, err := c.be.load(ctx)
	if err != nil {
		c.stale = true
		return err
	}
	c.stale = false
	c.version = version
	c.mismatch = nil
	if len(check) > 0 && (c.sec == nil || !c.sec.matches(check)) {
		c.mismatch = fmt.Errorf("the issued keys were hashed with another secret than this gateway's (%s): every issued key is refused, and none can be issued, until that secret is restored", c.secretSays())
	}
	recs := map[string]*record{}
	var bad error
	for name, b := range raw {
		var r record
		if err := json.Unmarshal(b, &r); err != nil || r.Name != name || !r.wellFormed() {
			bad = fmt.Errorf("the issued key %s is not readable in the store: it is refused", name)
			continue
		}
		recs[name] = &r
	}
	c.recs = recs
	c.rebuild()
	// the keys' use as the store counts it, for the list
	return errors.Join(c.mismatch, bad, c.saveUse())
}

func (c *core) secretSays() string {
	if c.secPath != "" {
		return "the secret file " + c.secPath
	}
	return "issued_keys secret"
}

// rebuild swaps in an index of c.recs. Call with mu held.
func (c *core) rebuild() {
	idx := &index{byHash: map[[sha256.Size]byte]*entry{}, byName: map[string]*entry{}}
	if c.mismatch == nil {
		idx.sec = c.sec
	}
	names := make([]string, 0, len(c.recs))
	for name := range c.recs {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		r := c.recs[name]
		act := c.acts[name]
		if act == nil {
			act = &activity{}
			c.acts[name] = act
		}
		e := &entry{rec: r, rules: keys.NewRules(r.Key), act: act}
		idx.byName[name] = e
		idx.rules = append(idx.rules, e.rules)
		idx.byHash[[sha256.Size]byte(r.Hash)] = e
		for _, o := range r.Old {
			old := *e
			old.until = o.Until
			idx.byHash[[sha256.Size]byte(o.Hash)] = &old
		}
	}
	for name := range c.acts {
		if c.recs[name] == nil {
			delete(c.acts, name)
		}
	}
	c.idx.Store(idx)
}
