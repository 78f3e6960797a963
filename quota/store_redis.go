package quota

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisConfig shares counters through a Redis server (standalone; the keys
// of one gateway key carry a hash tag, so a cluster would keep them in one
// slot, but only a single server is supported).
type RedisConfig struct {
	// Addr is host:port of the server. Required.
	Addr string
	// Username and Password authenticate (ACL user, or requirepass alone).
	// Default: none. The password appears in no error or log.
	Username string
	Password string
	// DB is the database number. Default 0.
	DB int
	// Prefix starts every Redis key. Default "llm_gateway:quota".
	Prefix string
	// SyncInterval is how often deltas are pushed and totals pulled.
	// Default 200ms.
	SyncInterval time.Duration
	// Timeout is the request path's budget for Redis: it bounds each round
	// trip a request may wait for, the rate script of Admit (unless
	// LocalRates) and the first read of a key's counters (the key's first
	// Admit or Usage). Past it the request is decided on local counters and
	// the store is degraded until a sync succeeds, so every gateway admits
	// on its own meanwhile (the package doc's overshoot). A loaded host or
	// Redis alone can miss a tight budget: raise it where that happens.
	// Background syncs, pushes and Reset get max(10 × Timeout, 1s).
	// Default 100ms.
	Timeout time.Duration
	// LocalRates counts rate limits like token budgets: locally, pushed
	// every SyncInterval, so Admit never waits for Redis, at the price of
	// the overshoot described in the package doc. Default false: rate
	// limits are exact across gateways.
	LocalRates bool
}

func (rc RedisConfig) prefix() string {
	if rc.Prefix == "" {
		return "llm_gateway:quota"
	}
	return rc.Prefix
}

// expiryMargin keeps a window's Redis key this long past the window's end,
// so a gateway whose clock is a little behind still finds it.
const expiryMargin = 10 * 60

type redisStore struct {
	client       *redis.Client
	addr, prefix string
	timeout      time.Duration // the request path's budget
	syncTimeout  time.Duration // a background push's budget
	syncInterval time.Duration
	localRates   bool
}

func newRedisStore(rc RedisConfig) (*redisStore, error) {
	if rc.Addr == "" {
		return nil, fmt.Errorf("quota store redis: no address")
	}
	s := &redisStore{addr: rc.Addr, prefix: rc.prefix(), timeout: rc.Timeout, syncInterval: rc.SyncInterval, localRates: rc.LocalRates}
	if s.timeout <= 0 {
		s.timeout = DefaultRedisTimeout
	}
	if s.syncInterval <= 0 {
		s.syncInterval = DefaultSyncInterval
	}
	s.syncTimeout = max(10*s.timeout, time.Second)
	s.client = redis.NewClient(&redis.Options{
		Addr:     rc.Addr,
		Username: rc.Username,
		Password: rc.Password,
		DB:       rc.DB,
		Protocol: 2,
		// a counter store that blinks must cost a request one timeout, not
		// retries with back-off: the local counters answer instead
		MaxRetries:            -1,
		DialerRetries:         1,
		DialTimeout:           s.syncTimeout,
		ReadTimeout:           s.syncTimeout,
		WriteTimeout:          s.syncTimeout,
		ContextTimeoutEnabled: true,
		DisableIdentity:       true,
		MaintNotificationsConfig: &maintnotifications.Config{
			Mode: maintnotifications.ModeDisabled,
		},
	})
	return s, nil
}

func (s *redisStore) exactRates() bool { return !s.localRates }

// key is the Redis key of one counter in one window:
// PREFIX:{NAME}:r|t|s:WINDOW:START. The window's start in the name makes
// every window a key of its own, which expires after the window.
func (s *redisStore) key(name string, row int, w Window, start int64) string {
	return s.prefix + ":{" + name + "}:" + "rts"[row:row+1] + ":" + w.String() + ":" + strconv.FormatInt(start, 10)
}

// rateScript checks and counts one request against several windows at
// once, atomically: every KEYS[i] must stay within ARGV[2i-1] after one
// more, or none is counted. ARGV[2i] is the unix time the key may expire.
// It answers {admitted (1|0), count of KEYS[1], count of KEYS[2], …}, the
// counts after the increment when admitted.
var rateScript = redis.NewScript(`
local ok = 1
local counts = {}
for i = 1, #KEYS do
  counts[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  if counts[i] + 1 > tonumber(ARGV[2*i-1]) then ok = 0 end
end
if ok == 1 then
  for i = 1, #KEYS do
    counts[i] = redis.call('INCR', KEYS[i])
    redis.call('EXPIREAT', KEYS[i], ARGV[2*i])
  end
end
table.insert(counts, 1, ok)
return counts
`)

// scriptOutcome is how a rate script run ended, for the caller's counting.
type scriptOutcome int

const (
	// decided: Redis answered; its answer is the decision.
	decided scriptOutcome = iota
	// unsent: the script never reached Redis (no connection, or one that
	// could not be set up in time): Redis did not count the request.
	unsent
	// unanswered: the script was sent and no answer came in time. Redis
	// may run it yet, when a stall ends: whether it counts the request is
	// unknown here.
	unanswered
)

// admitShared is Admit with rate limits decided by Redis: one script run,
// bounded by the timeout, with no lock held. The token check follows on
// the local counters. Unless the outcome is decided, the caller decides
// locally, and the Limiter is degraded until a sync succeeds.
func (c *core) admitShared(ks *keyState, rules Rules, estimate Cost, alone bool) (*Ticket, Decision, scriptOutcome) {
	s := c.redis
	now := c.clock.Now()
	unix := now.Unix()
	// each window once, with its tightest count
	var tightest [numWindows]int64
	var windows uint8
	for _, l := range rules.Rate {
		if windows&(1<<l.Window) == 0 || l.N < tightest[l.Window] {
			tightest[l.Window] = l.N
		}
		windows |= 1 << l.Window
	}
	keys := make([]string, 0, numWindows)
	args := make([]any, 0, 2*numWindows)
	var order [numWindows]Window
	var ends [numWindows]int64
	for w := Window(0); w < numWindows; w++ {
		if windows&(1<<w) == 0 {
			continue
		}
		start, end := w.bounds(unix)
		order[len(keys)], ends[len(keys)] = w, end
		keys = append(keys, s.key(ks.name, requestsRow, w, start))
		args = append(args, tightest[w], end+expiryMargin)
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	counts, err := rateScript.Run(ctx, s.client, keys, args...).Int64Slice()
	cancel()
	if err == nil && len(counts) != len(keys)+1 {
		err = fmt.Errorf("rate script answered %d values for %d windows", len(counts), len(keys))
	}
	if err != nil {
		c.setHealth(fmt.Errorf("quota store redis %s: %v", s.addr, err))
		return nil, Decision{}, outcomeOf(err)
	}
	ks.mu.Lock()
	defer ks.mu.Unlock()
	var blocked int64
	for i, w := range order[:len(keys)] {
		ctr, _ := ks.roll(requestsRow, w, unix)
		ctr.used = counts[i+1] + ctr.unsynced
		if counts[0] == 0 && counts[i+1]+1 > tightest[w] {
			blocked = max(blocked, ends[i])
		}
	}
	if counts[0] == 0 {
		if blocked == 0 { // refused while every count fits: a reset raced
			blocked = ends[0]
		}
		return nil, ks.refusal(ReasonRate, rules, blocked, now), decided
	}
	t, d := ks.reserve(c, rules, estimate, alone, now)
	return t, d, decided
}

// outcomeOf tells a script that was sent and not answered (an error while
// reading its reply: a timeout, or a connection reset) from one that did
// not run (a failed dial; a new connection whose handshake timed out, which
// go-redis reports without the read error of a command; an error Redis
// answered). Misjudged one way, a request is counted twice; the other way,
// once too few, and only if Redis never runs the script.
// TestARedisStallCountsEachAdmissionOnce and
// TestRedisStoppedServesLocallyAndRecovers hold the two ways.
func outcomeOf(err error) scriptOutcome {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "read" {
		return unanswered
	}
	return unsent
}

// push adds each record's delta to its Redis counter (INCRBY 0 reads it)
// and answers the totals, in one pipelined round trip. Delivery is at
// least once: a push whose answer is lost is pushed again.
func (s *redisStore) push(recs []record) ([]int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), s.syncTimeout)
	defer cancel()
	pipe := s.client.Pipeline()
	cmds := make([]*redis.IntCmd, len(recs))
	for i, r := range recs {
		k := s.key(r.key, r.row, r.window, r.start)
		cmds[i] = pipe.IncrBy(ctx, k, r.delta)
		pipe.ExpireAt(ctx, k, time.Unix(r.end+expiryMargin, 0))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("quota store redis %s: %v", s.addr, err)
	}
	totals := make([]int64, len(recs))
	for i, cmd := range cmds {
		totals[i] = cmd.Val()
	}
	return totals, nil
}

// read is key's counters in the windows current at now, every row and
// window, in one MGET bounded by the request path's timeout: -1 where Redis
// has no count.
func (s *redisStore) read(key string, now int64) (counts [numRows][numWindows]int64, err error) {
	keys := make([]string, 0, numRows*numWindows)
	for row := range numRows {
		for w := Window(0); w < numWindows; w++ {
			start, _ := w.bounds(now)
			keys = append(keys, s.key(key, row, w, start))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err == nil && len(vals) != len(keys) {
		err = fmt.Errorf("MGET answered %d values for %d keys", len(vals), len(keys))
	}
	if err != nil {
		return counts, fmt.Errorf("quota store redis %s: reading key %s: %v", s.addr, key, err)
	}
	for i, v := range vals {
		n := int64(-1)
		if str, ok := v.(string); ok {
			if n, err = strconv.ParseInt(str, 10, 64); err != nil {
				return counts, fmt.Errorf("quota store redis %s: counter %s is %q, not a count", s.addr, keys[i], str)
			}
		}
		counts[i/int(numWindows)][Window(i%int(numWindows))] = n
	}
	return counts, nil
}

// ping is the health check of a sync with nothing to push.
func (s *redisStore) ping() error {
	ctx, cancel := context.WithTimeout(context.Background(), s.syncTimeout)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("quota store redis %s: %v", s.addr, err)
	}
	return nil
}

// reset deletes every counter of key in the windows current at now.
func (s *redisStore) reset(ctx context.Context, key string, now int64) error {
	keys := make([]string, 0, numRows*numWindows)
	for row := range numRows {
		for w := Window(0); w < numWindows; w++ {
			start, _ := w.bounds(now)
			keys = append(keys, s.key(key, row, w, start))
		}
	}
	return s.client.Del(ctx, keys...).Err()
}

func (s *redisStore) close() error { return s.client.Close() }
