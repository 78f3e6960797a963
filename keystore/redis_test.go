package keystore

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgateway/caddy-llm-gateway/internal/redistest"
)

const testSecret = "a-secret-of-the-test-0123456789abcdef"

// frontDoor is one gateway's store on the shared Redis: a core of its own,
// as a second process would have (Open shares one core per store within a
// process).
func frontDoor(t *testing.T, addr, secret string, interval time.Duration) *Store {
	t.Helper()
	c, err := newCore(Config{Redis: &RedisConfig{Addr: addr, Timeout: time.Second}, Secret: secret, Interval: interval})
	if err != nil {
		t.Fatal(err)
	}
	c.refs = 1
	s := c.handle(nil)
	t.Cleanup(func() { c.close() })
	return s
}

// within polls cond until it holds, and says how long that took; it fails
// past limit.
func within(t *testing.T, limit time.Duration, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > limit {
			t.Fatalf("not within %s", limit)
		}
		time.Sleep(time.Millisecond)
	}
	return time.Since(start)
}

// Two front doors on one Redis: a key issued at one is accepted at the
// other, and a revoke at one is refused by the other within the stated
// bound (DefaultInterval and a round trip), the publication making it
// milliseconds.
func TestTwoFrontDoorsSeeEachOthersChanges(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	b := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	token := issue(t, a, spec("alice", "qwen"))
	took := within(t, DefaultInterval+time.Second, func() bool { return found(t, b, token) == "alice" })
	t.Logf("an issue reached the other front door in %s", took)

	if _, err := b.Update("alice", func(sp *Spec) error { sp.Models = []string{"small"}; return nil }); err != nil {
		t.Fatal(err)
	}
	within(t, DefaultInterval+time.Second, func() bool { kr, _ := a.Find(token); return kr != nil && kr.Allows("small") })

	if err := a.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	if found(t, a, token) != "" {
		t.Fatal("the front door that revoked still accepts the key")
	}
	took = within(t, DefaultInterval+time.Second, func() bool { return found(t, b, token) == "" })
	t.Logf("a revoke reached the other front door in %s (bound: %s and a round trip)", took, DefaultInterval)
}

// Without publications (a lost message, a resubscribe), the poll alone
// brings a revoke within its interval.
func TestARevokeIsSeenByThePollAlone(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, time.Hour)
	b := frontDoor(t, rs.Addr(), testSecret, 200*time.Millisecond)
	b.core.be.(*redisStore).sub.Close() // b hears no publication
	token := issue(t, a, spec("alice"))
	within(t, 5*time.Second, func() bool { return found(t, b, token) == "alice" })
	if err := a.Revoke("alice"); err != nil {
		t.Fatal(err)
	}
	took := within(t, 5*time.Second, func() bool { return found(t, b, token) == "" })
	t.Logf("the poll saw the revoke in %s (interval 200ms)", took)
}

// Changes at two front doors at once are both kept: each is a
// compare-and-swap, tried again on what the other wrote.
func TestConcurrentChangesAreNotLost(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	b := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	issue(t, a, spec("shared"))
	var wg sync.WaitGroup
	for i, s := range []*Store{a, b, a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := s.Update("shared", func(sp *Spec) error {
				sp.Models = append(sp.Models, "m"+string(rune('0'+i)))
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if err := a.Refresh(); err != nil {
		t.Fatal(err)
	}
	k, _ := a.Get("shared")
	if len(k.Models) != 4 {
		t.Fatalf("models %v: a change was lost", k.Models)
	}
	// one name, issued at both at once: one wins
	errs := make(chan error, 2)
	for _, s := range []*Store{a, b} {
		go func() { _, _, err := s.Issue(spec("race")); errs <- err }()
	}
	e1, e2 := <-errs, <-errs
	if (e1 == nil) == (e2 == nil) || !errors.Is(errors.Join(e1, e2), ErrExists) {
		t.Fatalf("%v / %v", e1, e2)
	}
}

// Use is summed over the front doors; Redis holds no token.
func TestUseIsSharedAndRedisHoldsNoToken(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	b := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	token := issue(t, a, spec("alice"))
	within(t, 5*time.Second, func() bool { return found(t, b, token) == "alice" })
	found(t, a, token)
	a.Charge("alice", 10)
	b.Charge("alice", 5)
	for _, s := range []*Store{a, b, a} {
		if err := s.Refresh(); err != nil {
			t.Fatal(err)
		}
	}
	if k, _ := a.Get("alice"); k.Requests != 2 || k.TokensUsed != 15 {
		t.Fatalf("%+v", k.Use)
	}
	c := redis.NewClient(&redis.Options{Addr: rs.Addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	ctx := context.Background()
	names, err := c.Keys(ctx, "*").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		dump, _ := c.Dump(ctx, name).Result()
		if strings.Contains(dump, token) || strings.Contains(dump, strings.TrimPrefix(token, tokenPrefix)) {
			t.Fatalf("redis key %s holds the token", name)
		}
	}
}

// A front door with another secret refuses every key and says so, rather
// than refusing them one by one.
func TestAFrontDoorWithAnotherSecretSaysSo(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	issue(t, a, spec("alice"))
	b := frontDoor(t, rs.Addr(), strings.Repeat("x", 40), DefaultInterval)
	if !b.Degraded() || len(b.All()) != 1 {
		t.Fatal("another secret was not noticed")
	}
	if _, _, err := b.Issue(spec("bob")); !errors.Is(err, ErrUnavailable) || !strings.Contains(err.Error(), "another secret") {
		t.Fatalf("%v", err)
	}
}

// Redis away: the keys known are still accepted, changes are refused with
// ErrUnavailable, and everything resumes when Redis is back.
func TestRedisAwayKeepsTheKeysKnown(t *testing.T) {
	rs := redistest.Start(t)
	a := frontDoor(t, rs.Addr(), testSecret, DefaultInterval)
	token := issue(t, a, spec("alice"))
	rs.Stop()
	if err := a.Refresh(); err == nil || !a.Degraded() {
		t.Fatal("a refresh without Redis succeeded")
	}
	if found(t, a, token) != "alice" {
		t.Fatal("a known key was refused while Redis is away")
	}
	if _, _, err := a.Issue(spec("bob")); !errors.Is(err, ErrUnavailable) {
		t.Fatalf("issued without Redis: %v", err)
	}
	rs.Restart(t)
	within(t, 10*time.Second, func() bool { return a.Refresh() == nil })
	if a.Degraded() {
		t.Fatal("still degraded")
	}
	issue(t, a, spec("bob"))
}
