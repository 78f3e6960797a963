package keystore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/go-redis/v9/maintnotifications"
)

// RedisConfig shares the issued keys of several front doors through a
// Redis server (the one of their counters, `store redis`).
type RedisConfig struct {
	// Addr is host:port of the server. Required.
	Addr string
	// Username and Password authenticate. Default: none. The password
	// appears in no error or log.
	Username string
	Password string
	// DB is the database number. Default 0.
	DB int
	// Prefix starts every Redis key. Default "llm_gateway:keys".
	Prefix string
	// Timeout bounds each round trip (never one of a request: Find reads
	// memory only). Default 1s.
	Timeout time.Duration
}

func (rc RedisConfig) prefix() string {
	if rc.Prefix == "" {
		return "llm_gateway:keys"
	}
	return rc.Prefix
}

// redisStore keeps the records under the prefix P:
//
//	P:records        hash: name → the record's JSON
//	P:version        a counter every change increments
//	P:check          the secret's check value
//	P:use:{name}     hash: requests, tokens, last (unix ms)
//	P:changes        the channel every change's version is published on
type redisStore struct {
	client  *redis.Client
	addr    string
	p       string
	timeout time.Duration
	sub     *redis.PubSub
	nudge   chan struct{}
	stop    context.CancelFunc
	done    chan struct{}
}

func newRedisStore(rc RedisConfig) (*redisStore, error) {
	if rc.Addr == "" {
		return nil, fmt.Errorf("issued keys' store redis: no address")
	}
	s := &redisStore{addr: rc.Addr, p: rc.prefix(), timeout: rc.Timeout, nudge: make(chan struct{}, 1), done: make(chan struct{})}
	if s.timeout <= 0 {
		s.timeout = time.Second
	}
	// as the counters' client (quota): a store that blinks costs one
	// timeout, never retries with back-off
	s.client = redis.NewClient(&redis.Options{
		Addr: rc.Addr, Username: rc.Username, Password: rc.Password, DB: rc.DB,
		Protocol: 2, MaxRetries: -1, DialerRetries: 1,
		DialTimeout: s.timeout, ReadTimeout: s.timeout, WriteTimeout: s.timeout,
		ContextTimeoutEnabled: true, DisableIdentity: true,
		MaintNotificationsConfig: &maintnotifications.Config{Mode: maintnotifications.ModeDisabled},
	})
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	// the channel's messages only hurry the next poll: go-redis
	// resubscribes after a lost connection, and what is published
	// meanwhile the poll finds
	s.sub = s.client.Subscribe(ctx, s.p+":changes")
	go func() {
		defer close(s.done)
		ch := s.sub.Channel()
		for {
			select {
			case <-ctx.Done():
				return
			case _, ok := <-ch:
				if !ok {
					return
				}
				select {
				case s.nudge <- struct{}{}:
				default:
				}
			}
		}
	}()
	return s, nil
}

// changed is nudged when another front door published a change.
func (s *redisStore) changed() <-chan struct{} { return s.nudge }

func (s *redisStore) ctx(parent context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(parent, s.timeout)
}

func (s *redisStore) err(what string, err error) error {
	return fmt.Errorf("issued keys' store redis %s: %s: %v", s.addr, what, err)
}

func (s *redisStore) load(parent context.Context) (map[string][]byte, []byte, int64, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	pipe := s.client.Pipeline()
	ver := pipe.Get(ctx, s.p+":version")
	all := pipe.HGetAll(ctx, s.p+":records")
	check := pipe.Get(ctx, s.p+":check")
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, 0, s.err("reading the keys", err)
	}
	v, _ := ver.Int64() // none yet: 0
	recs := map[string][]byte{}
	for name, rec := range all.Val() {
		recs[name] = []byte(rec)
	}
	var c []byte
	if b, err := check.Bytes(); err == nil {
		c = b
	}
	return recs, c, v, nil
}

func (s *redisStore) version(parent context.Context) (int64, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	v, err := s.client.Get(ctx, s.p+":version").Int64()
	if errors.Is(err, redis.Nil) {
		return 0, nil
	}
	if err != nil {
		return 0, s.err("reading the version", err)
	}
	return v, nil
}

func (s *redisStore) get(parent context.Context, name string) ([]byte, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	b, err := s.client.HGet(ctx, s.p+":records", name).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, s.err("reading key "+name, err)
	}
	return b, nil
}

// swapScript is backend.swap, atomically: KEYS records, version, use;
// ARGV name, old (” for none), new (” to delete), max, channel. It
// answers 1 swapped, 0 conflict, -1 full.
var swapScript = redis.NewScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur == false then cur = '' end
if cur ~= ARGV[2] then return 0 end
if ARGV[3] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  redis.call('DEL', KEYS[3])
else
  if ARGV[2] == '' and tonumber(ARGV[4]) > 0 and redis.call('HLEN', KEYS[1]) >= tonumber(ARGV[4]) then return -1 end
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
end
local v = redis.call('INCR', KEYS[2])
redis.call('PUBLISH', ARGV[5], v)
return 1
`)

func (s *redisStore) swap(parent context.Context, name string, old, new []byte, max int) (swapResult, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	n, err := swapScript.Run(ctx, s.client, []string{s.p + ":records", s.p + ":version", s.useKey(name)},
		name, string(old), string(new), max, s.p+":changes").Int64()
	if err != nil {
		return 0, s.err("writing key "+name, err)
	}
	switch n {
	case 1:
		return swapped, nil
	case -1:
		return swapFull, nil
	}
	return swapConflict, nil
}

func (s *redisStore) setCheck(parent context.Context, check []byte) ([]byte, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	if err := s.client.SetNX(ctx, s.p+":check", check, 0).Err(); err != nil {
		return nil, s.err("writing the secret's check", err)
	}
	b, err := s.client.Get(ctx, s.p+":check").Bytes()
	if err != nil {
		return nil, s.err("reading the secret's check", err)
	}
	return b, nil
}

func (s *redisStore) useKey(name string) string { return s.p + ":use:{" + name + "}" }

// useScript adds one key's deltas unless the key was revoked: KEYS use,
// records; ARGV name, requests, tokens, last (unix ms).
var useScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HINCRBY', KEYS[1], 'requests', ARGV[2])
redis.call('HINCRBY', KEYS[1], 'tokens', ARGV[3])
local last = tonumber(redis.call('HGET', KEYS[1], 'last') or '0')
if tonumber(ARGV[4]) > last then redis.call('HSET', KEYS[1], 'last', ARGV[4]) end
return 1
`)

func (s *redisStore) addUse(parent context.Context, deltas map[string]Use, names []string) (map[string]Use, error) {
	ctx, cancel := s.ctx(parent)
	defer cancel()
	pipe := s.client.Pipeline()
	for name, d := range deltas {
		var last int64
		if !d.LastUsed.IsZero() {
			last = d.LastUsed.UnixMilli()
		}
		useScript.Eval(ctx, pipe, []string{s.useKey(name), s.p + ":records"}, name, d.Requests, d.TokensUsed, last)
	}
	reads := make([]*redis.SliceCmd, len(names))
	for i, name := range names {
		reads[i] = pipe.HMGet(ctx, s.useKey(name), "requests", "tokens", "last")
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, s.err("writing the keys' use", err)
	}
	totals := map[string]Use{}
	for i, name := range names {
		vals := reads[i].Val()
		if len(vals) != 3 {
			continue
		}
		var u Use
		u.Requests, u.TokensUsed = redisInt(vals[0]), redisInt(vals[1])
		if last := redisInt(vals[2]); last > 0 {
			u.LastUsed = time.UnixMilli(last).UTC()
		}
		totals[name] = u
	}
	return totals, nil
}

func redisInt(v any) int64 {
	s, _ := v.(string)
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func (s *redisStore) close() error {
	s.stop()
	err := s.sub.Close()
	<-s.done
	return errors.Join(err, s.client.Close())
}
