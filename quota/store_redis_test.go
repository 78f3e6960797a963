package quota

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/redistest"
)

// redisServer is a real redis-server on a free loopback port (see
// internal/redistest), with the test it serves.
type redisServer struct {
	*redistest.Server
	t testing.TB
}

func startRedis(t testing.TB) *redisServer { return &redisServer{redistest.Start(t), t} }

func (s *redisServer) addr() string { return s.Addr() }
func (s *redisServer) stop()        { s.Stop() }
func (s *redisServer) restart()     { s.Restart(s.t) }

// get reads one Redis key with a client of the test's own.
func (s *redisServer) get(key string) int64 {
	s.t.Helper()
	c := redis.NewClient(&redis.Options{Addr: s.addr(), Protocol: 2, DisableIdentity: true})
	defer c.Close()
	v, err := c.Get(context.Background(), key).Int64()
	if err != nil && !errors.Is(err, redis.Nil) {
		s.t.Fatal(err)
	}
	return v
}

// clockNearNow is a fake clock at the start of the current real minute:
// Redis expires window keys by its own clock, so fake windows must be real
// ones (2026-01-01 has long passed, and its keys would expire at once).
func clockNearNow() *clock.Fake {
	c := clock.NewFake()
	c.Advance(time.Now().Truncate(time.Minute).Sub(c.Now()))
	return c
}

// frontDoor is one gateway's Limiter on the shared Redis: a private core,
// as a second process would have (Open would share the core of the same
// store within one process).
func frontDoor(t *testing.T, rc RedisConfig, clock clock.Clock, onDegraded func(error)) *Limiter {
	t.Helper()
	if rc.Timeout == 0 {
		rc.Timeout = 10 * time.Second // a busy machine must not look like an outage
	}
	c, err := newCore(Config{Redis: &rc, Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	c.refs = 1
	l := c.handle(onDegraded)
	t.Cleanup(func() { l.Close() })
	return l
}

func TestTwoFrontDoorsOnOneRedisAllowFiveNotTen(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	clock.Advance(20 * time.Second)
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name()}
	a := frontDoor(t, rc, clock, nil)
	b := frontDoor(t, rc, clock, nil)
	r := rules(t, []string{"5/m"}, nil)

	admitted := 0
	var last Decision
	for i := range 10 {
		door := a
		if i%2 == 1 {
			door = b
		}
		tk, d := door.Admit("team-a", r, 0)
		if d.OK {
			admitted++
			tk.Done(0)
		}
		last = d
	}
	if admitted != 5 {
		t.Fatalf("two front doors admitted %d requests under rate 5/m, want 5", admitted)
	}
	if last.Reason != ReasonRate || last.RetryAfter != 40*time.Second {
		t.Errorf("refusal %+v, want rate with RetryAfter 40s", last)
	}
	if a.Degraded() || b.Degraded() {
		t.Error("degraded with Redis up")
	}
	start := clock.Now().Truncate(time.Minute).Unix()
	if n := srv.get(rc.Prefix + ":{team-a}:r:m:" + strconv.FormatInt(start, 10)); n != 5 {
		t.Errorf("Redis counts %d requests, want 5", n)
	}
	// a concurrent burst from both doors, next window: still exactly five
	clock.Advance(time.Minute)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted = 0
	for i := range 20 {
		door := a
		if i%2 == 1 {
			door = b
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, d := door.Admit("team-a", r, 0); d.OK {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 5 {
		t.Errorf("a concurrent burst through two doors admitted %d, want 5", admitted)
	}
}

func TestTwoFrontDoorsShareATokenBudget(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name()}
	a := frontDoor(t, rc, clock, nil)
	b := frontDoor(t, rc, clock, nil)
	r := rules(t, nil, []string{"1000/d"})

	tk, d := a.Admit("k", r, 100)
	if !d.OK {
		t.Fatal(d)
	}
	tk.Done(700)
	// b learns a's usage when a has pushed and b has pulled: one interval
	// each (here, one Sync each)
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	b.Admit("k", r, 1) // b's counter is active from now on, and synced
	if err := b.Sync(); err != nil {
		t.Fatal(err)
	}
	if _, d := b.Admit("k", r, 400); d.OK || d.Reason != ReasonTokens {
		t.Errorf("b admitted 400 more tokens on a budget with 700 of 1000 used elsewhere: %+v", d)
	}
	if u := b.Usage("k", r).Limits[0]; u.Used != 700 || u.Reserved != 1 {
		t.Errorf("b's view: %+v", u)
	}
	if err := b.Reset("k"); err != nil {
		t.Fatal(err)
	}
	if err := a.Sync(); err != nil {
		t.Fatal(err)
	}
	if u := a.Usage("k", r).Limits[0]; u.Used != 0 {
		t.Errorf("a's view after b's Reset: %+v", u)
	}
}

func TestRedisStoppedServesLocallyAndRecovers(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name(), SyncInterval: time.Second}
	var mu sync.Mutex
	var told []error
	l := frontDoor(t, rc, clock, func(err error) {
		mu.Lock()
		told = append(told, err)
		mu.Unlock()
	})
	r := rules(t, []string{"5/m"}, []string{"10k/d"})
	for range 2 {
		tk, d := l.Admit("k", r, 10)
		if !d.OK {
			t.Fatal(d)
		}
		tk.Done(100)
	}
	if err := l.Sync(); err != nil {
		t.Fatal(err)
	}

	srv.stop()
	// requests go on, on local counters: the shared count seen last (2)
	// plus what is counted here
	for i := range 3 {
		tk, d := l.Admit("k", r, 10)
		if !d.OK {
			t.Fatalf("request %d with Redis down: %+v", i+1, d)
		}
		tk.Done(100)
	}
	if !l.Degraded() {
		t.Fatal("not degraded with Redis down")
	}
	if _, d := l.Admit("k", r, 10); d.OK || d.Reason != ReasonRate {
		t.Errorf("sixth request with Redis down: %+v, want the local rate limit", d)
	}
	if err := l.Sync(); err == nil {
		t.Error("sync with Redis down succeeded")
	}
	mu.Lock()
	if len(told) != 1 || told[0] == nil {
		t.Errorf("hook told %v, want one error", told)
	}
	mu.Unlock()

	srv.restart()
	// the background sync (fake time) pushes what was counted meanwhile
	clock.WaitForTimers(1)
	clock.Advance(time.Second)
	clock.WaitForTimers(1)
	if l.Degraded() {
		t.Fatal("still degraded after Redis came back")
	}
	mu.Lock()
	if len(told) != 2 || told[1] != nil {
		t.Errorf("hook told %v, want the error then nil", told)
	}
	mu.Unlock()
	start := clock.Now().Truncate(time.Minute).Unix()
	if n := srv.get(rc.Prefix + ":{k}:r:m:" + strconv.FormatInt(start, 10)); n != 5 {
		t.Errorf("Redis counts %d requests after recovery, want 2 + 3 pushed", n)
	}
	day := clock.Now().Truncate(24 * time.Hour).Unix()
	if n := srv.get(rc.Prefix + ":{k}:t:d:" + strconv.FormatInt(day, 10)); n != 500 {
		t.Errorf("Redis counts %d tokens after recovery, want 500", n)
	}
	// and Redis decides again
	if _, d := l.Admit("k", r, 10); d.OK {
		t.Error("admitted past 5/m after recovery")
	}
}

func TestRedisErrorsNeverShowThePassword(t *testing.T) {
	srv := startRedis(t)
	srv.stop()
	const secret = "hunter2-quota-secret"
	var told error
	l := frontDoor(t, RedisConfig{Addr: srv.addr(), Password: secret, Timeout: time.Second}, clockNearNow(), func(err error) { told = err })
	l.Admit("k", Rules{Rate: []Limit{{5, Minute}}}, 0)
	err := l.Sync()
	if err == nil || told == nil {
		t.Fatalf("no error with Redis down: %v, %v", err, told)
	}
	for _, e := range []error{err, told} {
		if strings.Contains(e.Error(), secret) {
			t.Errorf("error shows the password: %v", e)
		}
	}
}

// The helper process: one gateway of TestTwoProcessesShareOneRedis.
const helperEnv = "QUOTA_TEST_HELPER"

func runHelper() int {
	clock := clock.NewFake()
	at, _ := strconv.ParseInt(os.Getenv("QUOTA_TEST_NOW"), 10, 64)
	clock.Advance(time.Unix(at, 0).Sub(clock.Now()))
	l, err := Open(Config{Clock: clock, Redis: &RedisConfig{
		Addr: os.Getenv("QUOTA_TEST_REDIS"), Prefix: os.Getenv("QUOTA_TEST_PREFIX"), Timeout: 10 * time.Second,
	}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer l.Close()
	r := Rules{Rate: []Limit{{5, Minute}}}
	// both processes start counting together, on a line from the parent
	bufio.NewReader(os.Stdin).ReadString('\n')
	admitted := 0
	for range 5 {
		if _, d := l.Admit("team-a", r, 0); d.OK {
			admitted++
		}
	}
	if l.Degraded() {
		fmt.Fprintln(os.Stderr, "degraded")
		return 2
	}
	fmt.Println(admitted)
	return 0
}

func TestTwoProcessesShareOneRedis(t *testing.T) {
	srv := startRedis(t)
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().Truncate(time.Minute).Unix()
	type proc struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   bytes.Buffer
	}
	procs := make([]*proc, 2)
	for i := range procs {
		p := &proc{cmd: exec.Command(self, "-test.run=^$")}
		p.cmd.Env = append(os.Environ(), helperEnv+"=1", "QUOTA_TEST_REDIS="+srv.addr(),
			"QUOTA_TEST_PREFIX="+t.Name(), "QUOTA_TEST_NOW="+strconv.FormatInt(now, 10))
		p.cmd.Stdout, p.cmd.Stderr = &p.out, &p.out
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
		if err := p.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		procs[i] = p
	}
	for _, p := range procs {
		io.WriteString(p.stdin, "go\n")
		p.stdin.Close()
	}
	total := 0
	for i, p := range procs {
		if err := p.cmd.Wait(); err != nil {
			t.Fatalf("gateway process %d: %v\n%s", i, err, p.out.String())
		}
		n, err := strconv.Atoi(strings.TrimSpace(p.out.String()))
		if err != nil {
			t.Fatalf("gateway process %d said %q", i, p.out.String())
		}
		total += n
	}
	if total != 5 {
		t.Errorf("two gateway processes admitted %d requests under rate 5/m, want 5", total)
	}
}

// A gateway that starts (a restart, a new instance) reads
// a key's counters from Redis before its first admission, and shows them.
func TestARestartedGatewayReadsTheKeysCountsFromRedisFirst(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name()}
	both := rules(t, []string{"5/m"}, []string{"1000/d"})
	tokens := rules(t, nil, []string{"1000/d"})
	rate := rules(t, []string{"5/m"}, nil)

	// the gateway before the restart spends the key's rate and budget
	before := frontDoor(t, rc, clock, nil)
	for range 5 {
		tk, _ := before.Admit("spent", both, 10)
		tk.Done(300) // the fifth is over budget: its fallback's answer counts
	}
	if err := before.Close(); err != nil { // pushes what is left
		t.Fatal(err)
	}

	// the admin API and the page show the store's numbers for a key this
	// gateway has not seen
	after := frontDoor(t, rc, clock, nil)
	all := after.All(map[string]Rules{"spent": both})
	if u := all[0].Limits; u[0].Used != 5 || u[0].Remaining != 0 || u[1].Used != 1500 || u[1].Remaining != 0 {
		t.Errorf("a new gateway shows %+v, want 5 requests and 1500 tokens", u)
	}

	// a burst of 50 on the key's budget, right after the restart: none
	// passes (before: 50 × 200)
	budget := frontDoor(t, rc, clock, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	admitted := 0
	for range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tk, d := budget.Admit("spent", tokens, 10)
			defer tk.Cancel()
			if d.OK {
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if admitted != 0 {
		t.Errorf("a restarted gateway admitted %d of 50 requests on a budget spent in Redis", admitted)
	}

	// with local rates, the rate limit's count is read too
	rcLocal := rc
	rcLocal.LocalRates = true
	local := frontDoor(t, rcLocal, clock, nil)
	if _, d := local.Admit("spent", rate, 0); d.OK || d.Reason != ReasonRate {
		t.Errorf("a restarted gateway with local rates: %+v, want the rate limit", d)
	}
	for _, l := range []*Limiter{after, budget, local} {
		if l.Degraded() {
			t.Error("degraded with Redis up")
		}
	}

	// Redis down: the first sight costs one timeout, then the key is
	// counted locally, degraded
	srv.stop()
	rcDown := rc
	rcDown.Timeout = time.Second
	down := frontDoor(t, rcDown, clock, nil)
	if _, d := down.Admit("spent", tokens, 10); !d.OK || !down.Degraded() {
		t.Errorf("Redis down: %+v, degraded %v; want served locally, degraded", d, down.Degraded())
	}
}

// A Redis stall leaves the count at what was admitted.
// A rate script sent to a stalled Redis times out here and runs there when
// the stall ends; its request was decided on the local counters meanwhile,
// and must not be pushed as well. Requests that never reached Redis (here:
// those after the first timeout, decided locally while degraded) must be.
func TestARedisStallCountsEachAdmissionOnce(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	rc := RedisConfig{Addr: srv.addr(), Prefix: t.Name(), Timeout: 300 * time.Millisecond}
	l := frontDoor(t, rc, clock, nil)
	r := rules(t, []string{"5/m"}, nil)
	admitted := 0
	admit := func() {
		if _, d := l.Admit("k", r, 0); d.OK {
			admitted++
		}
	}
	admit() // Redis knows the script now, and the client has a connection

	// the stall: Redis reads nothing until resumed, then runs what it got
	srv.Stall(t)
	admit() // its script reaches Redis, unanswered: decided locally
	if !l.Degraded() {
		t.Fatal("not degraded while Redis stalls")
	}
	for range 8 {
		admit() // decided locally, without trying Redis
	}
	srv.Resume(t)
	// the script sent during the stall runs now; wait until it has
	key := rc.Prefix + ":{k}:r:m:" + strconv.FormatInt(clock.Now().Truncate(time.Minute).Unix(), 10)
	for deadline := time.Now().Add(10 * time.Second); srv.get(key) < 2 && time.Now().Before(deadline); {
		time.Sleep(10 * time.Millisecond)
	}
	if err := l.Sync(); err != nil { // pushes what was counted meanwhile
		t.Fatal(err)
	}
	if admitted != 5 {
		t.Errorf("admitted %d under rate 5/m", admitted)
	}
	if n := srv.get(key); n != int64(admitted) {
		t.Errorf("Redis counts %d requests after the stall, %d were admitted", n, admitted)
	}
	if u := l.Usage("k", r).Limits[0]; u.Used != int64(admitted) {
		t.Errorf("the gateway counts %+v, %d were admitted", u, admitted)
	}
	if _, d := l.Admit("k", r, 0); d.OK || l.Degraded() {
		t.Errorf("after the stall: %+v, degraded %v; want Redis's refusal", d, l.Degraded())
	}
}

// The request path's budget is RedisConfig.Timeout, not
// a fixed 100ms a loaded host can miss.
func TestTheRequestPathWaitsForRedisAsLongAsTimeoutSays(t *testing.T) {
	srv := startRedis(t)
	clock := clockNearNow()
	const budget = 600 * time.Millisecond
	l := frontDoor(t, RedisConfig{Addr: srv.addr(), Prefix: t.Name(), Timeout: budget}, clock, nil)
	r := rules(t, []string{"5/m"}, nil)
	if _, d := l.Admit("k", r, 0); !d.OK {
		t.Fatal(d)
	}
	srv.Stall(t)
	defer srv.Resume(t)
	begin := time.Now()
	_, d := l.Admit("k", r, 0)
	waited := time.Since(begin)
	if !d.OK || !l.Degraded() {
		t.Errorf("stalled Redis: %+v, degraded %v; want served locally, degraded", d, l.Degraded())
	}
	// a deadline never fires early; the upper bound is wide for a busy host
	if waited < budget || waited > budget+10*time.Second {
		t.Errorf("Admit waited %v for a stalled Redis, want its Timeout of %v", waited, budget)
	}
}
