package handler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// balancedPool is a gateway whose pool "auto" has n remote members e0…,
// on a fake clock; edit changes the engines' and the pool's configs.
func balancedPool(t testing.TB, n int, edit func(*engines.Config, *config.PoolConfig)) (*pool, []*engines.Engine, *clock.Fake) {
	t.Helper()
	cfg := config.Config{Pools: []config.PoolConfig{{Name: "auto", StickyHeader: "X-Session-Id"}}}
	for i := range n {
		ec := engines.Config{Name: fmt.Sprint("e", i), To: fmt.Sprintf("http://127.0.0.1:%d", i+1), Models: []string{fmt.Sprint("m", i)}}
		if edit != nil {
			edit(&ec, &cfg.Pools[0])
		}
		cfg.Engines = append(cfg.Engines, ec)
		cfg.Pools[0].Members = append(cfg.Pools[0].Members, ec.Name)
	}
	clk := clock.NewFake()
	var es []*engines.Engine
	for _, ec := range cfg.Engines {
		e, err := engines.New(ec, http.DefaultTransport, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		e.SetClock(clk)
		t.Cleanup(func() { e.Destruct() })
		es = append(es, e)
	}
	g, err := New(cfg, es, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return g.pools["auto"], es, clk
}

// conversation is the body of turn n of conversation c: its system prompt,
// then n exchanges of about 400 bytes each.
func conversation(c, n int) string {
	var b strings.Builder
	fmt.Fprintf(&b, `{"model":"auto","stream":true,"messages":[{"role":"system","content":"You help conversation %d."}`, c)
	for i := range n {
		fmt.Fprintf(&b, `,{"role":"user","content":"turn %d of %d: %s"},{"role":"assistant","content":"%s"}`,
			i, c, strings.Repeat("tell me more ", 15), strings.Repeat("here is more ", 15))
	}
	b.WriteString(`]}`)
	return b.String()
}

func poolRequest(t testing.TB, body string, header ...string) *request {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	for i := 0; i+1 < len(header); i += 2 {
		r.Header.Set(header[i], header[i+1])
	}
	f, err := jsonmember.ScanRequest([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return &request{r: r, body: []byte(body), fields: f, model: "auto", op: opChat}
}

// choice plans the request and returns its first member and the reason.
func choice(t testing.TB, p *pool, body string, header ...string) (string, string) {
	t.Helper()
	var res Result
	req := poolRequest(t, body, header...)
	plan := p.plan(req, nil, &res)
	if len(plan) == 0 {
		t.Fatal("no member")
	}
	p.answered(plan[0].label, req.blocks) // as the first member's answer does
	if res.Pool != "auto" {
		t.Fatalf("pool %q", res.Pool)
	}
	return plan[0].label, res.PoolChoice
}

func TestAConversationFollowsTheMemberThatHoldsItsPrefix(t *testing.T) {
	p, _, _ := balancedPool(t, 4, nil)
	first := map[int]string{}
	for c := range 8 {
		m, why := choice(t, p, conversation(c, 1))
		if why != ChoiceLoad {
			t.Fatalf("a new conversation chose by %s", why)
		}
		first[c] = m
	}
	spread := map[string]bool{}
	for _, m := range first {
		spread[m] = true
	}
	if len(spread) != 4 {
		t.Fatalf("new conversations on an idle pool did not spread: %v", first)
	}
	for turn := 2; turn <= 5; turn++ {
		for c := range 8 {
			m, why := choice(t, p, conversation(c, turn))
			if m != first[c] || why != ChoiceAffinity {
				t.Fatalf("conversation %d turn %d went to %s (%s), its prefix is on %s", c, turn, m, why, first[c])
			}
		}
	}
}

func TestAffinityNeedsTheCacheThresholdOfThePrompt(t *testing.T) {
	for _, tc := range []struct {
		threshold float64
		want      string
	}{{0.9, ChoiceLoad}, {0, ChoiceAffinity}} { // 0 is the default, 0.3
		p, _, _ := balancedPool(t, 4, func(_ *engines.Config, pc *config.PoolConfig) {
			pc.Balance = &config.Balance{CacheThreshold: tc.threshold}
		})
		home, _ := choice(t, p, conversation(1, 4))
		// turn 5 begins with the 4 turns home was sent: about 0.8 of it
		m, why := choice(t, p, conversation(1, 5))
		if why != tc.want || (why == ChoiceAffinity && m != home) {
			t.Fatalf("cache_threshold %g: %s (%s), want %s (home %s)", tc.threshold, m, why, tc.want, home)
		}
	}
}

func TestAnImbalancedPoolBalancesInsteadOfFollowingThePrefix(t *testing.T) {
	p, es, _ := balancedPool(t, 3, nil)
	home, _ := choice(t, p, conversation(7, 2))
	var e *engines.Engine
	for _, x := range es {
		if x.Name() == home {
			e = x
		}
	}
	var leases []*engines.Lease
	hold := func(n int) {
		for range n {
			l := e.TryAcquire()
			if l == nil {
				t.Fatal("no lease")
			}
			leases = append(leases, l)
		}
	}
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	hold(64) // busiest − idlest = 64: not more than the threshold
	if m, why := choice(t, p, conversation(7, 3)); m != home || why != ChoiceAffinity {
		t.Fatalf("load 64 against 0: %s (%s), want %s by affinity", m, why, home)
	}
	hold(1) // 65 > 64 and 65 > 1.5 × 0
	if m, why := choice(t, p, conversation(7, 4)); m == home || why != ChoiceLoad {
		t.Fatalf("an imbalanced pool still followed the prefix to %s (%s)", m, why)
	}
}

func TestTheImbalanceThresholdIsTheMembersCapacityWhenKnown(t *testing.T) {
	// engines that serve 4 at once (max_concurrent 4), all full of other
	// front doors' requests (their /metrics say so): one more than 4
	// requests busier than another is imbalanced, not 64 more
	var running atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "llamacpp:requests_processing %d\nllamacpp:requests_deferred 0\n", running.Load())
	}))
	t.Cleanup(srv.Close)
	p, es, _ := balancedPool(t, 3, func(ec *engines.Config, _ *config.PoolConfig) {
		ec.To, ec.Signals, ec.SignalsSlotsPath, ec.MaxConcurrent, ec.Queue = srv.URL, engines.SignalsMetrics, engines.SignalsOff, 4, 8
	})
	home, _ := choice(t, p, conversation(9, 2))
	running.Store(4)
	var e *engines.Engine
	for _, x := range es {
		x.ReadSignals()
		if x.Name() == home {
			e = x
		}
	}
	running.Store(8)
	e.ReadSignals()
	if o := e.Occupancy(); o.Load != 8 || o.Capacity != 4 || o.Saturated {
		t.Fatalf("occupancy %+v", o)
	}
	if m, why := choice(t, p, conversation(9, 3)); m != home || why != ChoiceAffinity {
		t.Fatalf("load 8 against 4 with capacity 4: %s (%s), want %s by affinity", m, why, home)
	}
	running.Store(9)
	e.ReadSignals()
	// a threshold the operator set wins over the capacity
	p.bal.AbsThreshold = 64
	if m, why := choice(t, p, conversation(9, 4)); m != home || why != ChoiceAffinity {
		t.Fatalf("balance_abs_threshold 64, load 9 against 4: %s (%s), want %s by affinity", m, why, home)
	}
	p.bal.AbsThreshold = 0
	if m, why := choice(t, p, conversation(9, 5)); m == home || why != ChoiceLoad {
		t.Fatalf("load 9 against 4 with capacity 4: still followed the prefix to %s (%s)", m, why)
	}
}

func TestAFullMemberGivesUpATurnWhileAnotherHasRoom(t *testing.T) {
	p, es, _ := balancedPool(t, 3, func(ec *engines.Config, _ *config.PoolConfig) {
		ec.MaxConcurrent, ec.Queue = 2, 8
	})
	byName := map[string]*engines.Engine{}
	for _, e := range es {
		byName[e.Name()] = e
	}
	var leases []*engines.Lease
	hold := func(e *engines.Engine) *engines.Lease {
		l := e.TryAcquire()
		if l == nil {
			t.Fatalf("no place on %s", e.Name())
		}
		leases = append(leases, l)
		return l
	}
	defer func() {
		for _, l := range leases {
			l.Release()
		}
	}()
	home, _ := choice(t, p, conversation(4, 2))
	hold(byName[home])
	if m, why := choice(t, p, conversation(4, 3)); m != home || why != ChoiceAffinity {
		t.Fatalf("one of two places taken: %s (%s), want %s by affinity", m, why, home)
	}
	last := hold(byName[home]) // both places taken: the turn would wait
	away, why := choice(t, p, conversation(4, 4))
	if away == home || why != ChoiceLoad {
		t.Fatalf("home full, the others idle: %s (%s)", away, why)
	}
	// every member full: waiting at home is as good as anywhere, and the
	// prefix is there (turn 4's, now on away)
	for _, e := range es {
		for e.Occupancy().Load < 2 {
			hold(e)
		}
	}
	if m, why := choice(t, p, conversation(4, 5)); m != away || why != ChoiceAffinity {
		t.Fatalf("every member full: %s (%s), want %s by affinity", m, why, away)
	}
	last.Release()
	leases = slices.DeleteFunc(leases, func(l *engines.Lease) bool { return l == last })
	if m, why := choice(t, p, conversation(4, 6)); m != home || why != ChoiceLoad {
		t.Fatalf("only home has room: %s (%s)", m, why)
	}
}

// signalled starts a fake engine /metrics that reports deferred requests.
func signalled(t *testing.T, deferred *atomic.Int32) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "llamacpp:requests_processing 1\nllamacpp:requests_deferred %d\n", deferred.Load())
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

func TestAMemberWhoseEngineQueuesIsPassedOverUntilItsSignalIsStale(t *testing.T) {
	var deferred atomic.Int32
	url := signalled(t, &deferred)
	p, es, clk := balancedPool(t, 3, func(ec *engines.Config, _ *config.PoolConfig) {
		ec.To, ec.Signals = url, engines.SignalsMetrics
	})
	home, _ := choice(t, p, conversation(3, 3))
	deferred.Store(4)
	for _, e := range es {
		if e.Name() == home {
			e.ReadSignals()
			if o := e.Occupancy(); !o.Saturated || o.Load != 5 {
				t.Fatalf("%+v after reading 1 processing and 4 deferred", o)
			}
		}
	}
	// home holds the whole prompt, but its engine queues: passed over
	plan := p.plan(poolRequest(t, conversation(3, 2)), nil, nil)
	if plan[0].label == home || plan[len(plan)-1].label != home {
		t.Fatalf("plan %s, %s %s, whose engine defers requests, should be last", plan[0].label, plan[len(plan)-1].label, home)
	}
	clk.Advance(engines.DefaultSignalsStale + time.Millisecond)
	if m, why := choice(t, p, conversation(3, 4)); m != home || why != ChoiceAffinity {
		t.Fatalf("a stale signal still counts: %s (%s), want %s", m, why, home)
	}
}

func TestASessionKeyIsStrongerThanAffinity(t *testing.T) {
	p, _, _ := balancedPool(t, 4, nil)
	choice(t, p, conversation(5, 3))
	want := pinnedIn(p, "user-42")
	for turn := 3; turn < 6; turn++ {
		if m, why := choice(t, p, conversation(5, turn), "X-Session-Id", "user-42"); m != want || why != ChoiceSession {
			t.Fatalf("turn %d: %s (%s), the session is on %s", turn, m, why, want)
		}
	}
}

// pinnedIn is the member a request of the anonymous scope with session key
// key goes to.
func pinnedIn(p *pool, key string) string {
	scoped, _ := (&request{}).session(key, 0)
	return p.order(scoped, nil)[0].id
}

// A tenant's data is its own: a key's prompt prefix and session
// keys are found only by the same key.

// keyed is the request as the key named name sends it ("" for a key
// without a name).
func keyed(t testing.TB, name, body string, header ...string) *request {
	req := poolRequest(t, body, header...)
	req.key = &keys.Rules{Name: name}
	return req
}

// planned plans req in p and records its first member's answer in the
// index; it returns that member and why it was chosen.
func planned(p *pool, req *request) (string, string) {
	var res Result
	plan := p.plan(req, nil, &res)
	p.answered(plan[0].label, req.blocks)
	return plan[0].label, res.PoolChoice
}

func TestAnotherKeysPromptNeverFollowsThisKeysPrefix(t *testing.T) {
	p, _, _ := balancedPool(t, 4, nil)
	home, _ := planned(p, keyed(t, "alice", conversation(1, 3)))
	for _, other := range []string{"bob", ""} {
		// the same conversation as alice's, one turn on: by load, not where alice's prefix is
		if m, why := planned(p, keyed(t, other, conversation(1, 4))); why != ChoiceLoad {
			t.Fatalf("key %q followed alice's prefix to %s (%s)", other, m, why)
		}
	}
	if m, why := planned(p, keyed(t, "alice", conversation(1, 5))); m != home || why != ChoiceAffinity {
		t.Fatalf("alice's own next turn went to %s (%s), her prefix is on %s", m, why, home)
	}
	// requests without a key share one scope
	planned(p, poolRequest(t, conversation(2, 3)))
	if _, why := planned(p, poolRequest(t, conversation(2, 4))); why != ChoiceAffinity {
		t.Fatalf("requests without a key did not share their scope: %s", why)
	}
}

// Keys without a name (`keys {env.GATEWAY_KEYS}`, a token per tenant) are
// as many tenants: one's prefix is not another's, nor a keyless request's,
// and a token keeps its scope across a reload (a new ring).
func TestAKeyWithoutANameIsATenantOfItsOwn(t *testing.T) {
	p, _, _ := balancedPool(t, 4, nil)
	tokens := []config.Key{{Value: "tenant-one-token-0001"}, {Value: "tenant-two-token-0002"}}
	ring := keys.NewRing(tokens)
	as := func(kr *keys.Rules, body string) *request {
		req := poolRequest(t, body)
		req.key = kr
		return req
	}
	home, _ := planned(p, as(ring.Rules[0], conversation(3, 3)))
	for _, other := range []*keys.Rules{ring.Rules[1], nil} {
		if m, why := planned(p, as(other, conversation(3, 4))); why != ChoiceLoad {
			t.Fatalf("%v followed the first tenant's prefix to %s (%s)", other.Scope() != "", m, why)
		}
	}
	reloaded := keys.NewRing(tokens)
	if m, why := planned(p, as(reloaded.Rules[0], conversation(3, 5))); m != home || why != ChoiceAffinity {
		t.Fatalf("the first tenant's next turn after a reload went to %s (%s), its prefix is on %s", m, why, home)
	}
}

// TestAnotherKeysSessionIDIsAnotherSession: the same X-Session-Id from two
// keys is two sessions, placed independently (a session id is not a way to
// reach another tenant's member), while each key's own stays put.
func TestAnotherKeysSessionIDIsAnotherSession(t *testing.T) {
	p, _, _ := balancedPool(t, 4, nil)
	same := 0
	for i := range 200 {
		sid := fmt.Sprint("session-", i)
		a, _ := planned(p, keyed(t, "alice", `{"model":"auto"}`, "X-Session-Id", sid))
		b, _ := planned(p, keyed(t, "bob", `{"model":"auto"}`, "X-Session-Id", sid))
		if again, _ := planned(p, keyed(t, "alice", `{"model":"auto"}`, "X-Session-Id", sid)); again != a {
			t.Fatalf("alice's session %s moved from %s to %s", sid, a, again)
		}
		if a == b {
			same++
		}
	}
	if same > 80 { // about 1 in 4 by chance; all 200 when the key is the session
		t.Fatalf("bob's same session id went to alice's member %d times of 200", same)
	}
}

func TestRoundRobinAndLeastLoadedIgnoreThePrefix(t *testing.T) {
	for _, policy := range []string{config.BalanceRoundRobin, config.BalanceLeastLoaded} {
		p, _, _ := balancedPool(t, 4, func(_ *engines.Config, pc *config.PoolConfig) {
			pc.Balance = &config.Balance{Policy: policy}
		})
		seen := map[string]bool{}
		for turn := 1; turn <= 4; turn++ {
			m, why := choice(t, p, conversation(9, turn))
			if want := map[string]string{config.BalanceRoundRobin: ChoiceRotation, config.BalanceLeastLoaded: ChoiceLoad}[policy]; why != want {
				t.Fatalf("%s chose by %s", policy, why)
			}
			seen[m] = true
		}
		if len(seen) != 4 {
			t.Fatalf("%s: four turns on an idle pool went to %v", policy, seen)
		}
		if p.index.Len() != 0 {
			t.Fatalf("%s fed the prefix index", policy)
		}
	}
}

// BenchmarkPoolChoice64 is one routing decision at 64 members (the issue's
// goal: ≤ 20 µs): hashing a ~4 KB conversation, the lookup, 64 loads.
func BenchmarkPoolChoice64(b *testing.B) {
	p, _, _ := balancedPool(b, 64, nil)
	for c := range 256 {
		choice(b, p, conversation(c, 3))
	}
	req := poolRequest(b, conversation(17, 8))
	b.ReportAllocs()
	for b.Loop() {
		p.plan(req, nil, nil)
	}
}

// TestStickyBodyUserReadsAnthropicsMetadataUserID: `sticky body user` keeps
// a caller's requests on one member whichever API family spells it: OpenAI's
// "user", Anthropic's "metadata": {"user_id": …}.
func TestStickyBodyUserReadsAnthropicsMetadataUserID(t *testing.T) {
	p, _, _ := balancedPool(t, 4, func(_ *engines.Config, pc *config.PoolConfig) {
		pc.StickyHeader, pc.StickyBody = "", "user"
	})
	for i := range 8 {
		user := fmt.Sprint("user-", i)
		openai := poolRequest(t, fmt.Sprintf(`{"model":"auto","user":%q,"messages":[]}`, user))
		anthropic := poolRequest(t, fmt.Sprintf(`{"model":"auto","max_tokens":9,"metadata":{"user_id":%q},"messages":[]}`, user))
		anthropic.op = opMessages
		if k := p.sessionKey(openai); k != user {
			t.Fatalf("OpenAI's user read as %q", k)
		}
		if k := p.sessionKey(anthropic); k != user {
			t.Fatalf("Anthropic's metadata.user_id read as %q", k)
		}
		var res Result
		if plan := p.plan(anthropic, nil, &res); plan[0].label != pinnedIn(p, user) || res.PoolChoice != ChoiceSession {
			t.Fatalf("%s: planned %s (%s), the session is on %s", user, plan[0].label, res.PoolChoice, pinnedIn(p, user))
		}
	}
	// an OpenAI body's metadata is not a session, nor a user_id elsewhere
	for _, body := range []string{`{"model":"auto","metadata":{"user_id":"u"}}`, `{"model":"auto","user_id":"u","metadata":"u"}`} {
		req := poolRequest(t, body)
		if k := p.sessionKey(req); k != "" {
			t.Fatalf("%s: session %q", body, k)
		}
		req.op = opMessages
		if k := p.sessionKey(req); k != "" && !strings.Contains(body, `{"user_id":"u"}`) {
			t.Fatalf("%s: session %q", body, k)
		}
	}
}

// TestThePrefixIndexLearnsWhoAnswered: a turn that fails over from the
// member planned first is recorded for the member that answered, so the
// next turn goes there, not back to the member that failed.
func TestThePrefixIndexLearnsWhoAnswered(t *testing.T) {
	var failed atomic.Int32
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		failed.Add(1)
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	t.Cleanup(down.Close)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "up") }))
	t.Cleanup(up.Close)
	cfg := config.Config{
		Engines: []engines.Config{
			{Name: "down", To: down.URL, Models: []string{"m-down"}},
			{Name: "up", To: up.URL, Models: []string{"m-up"}},
		},
		// a breaker that stays closed: only the index keeps the turns off "down"
		Pools: []config.PoolConfig{{Name: "auto", Members: []string{"down", "up"}, BreakerFailures: 100}},
	}
	_, url := testGateway(t, cfg, clock.NewFake())
	for turn := 1; turn <= 3; turn++ {
		resp, body := postJSON(t, url, conversation(4, turn))
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "up" {
			t.Fatalf("turn %d: %d %s by %q", turn, resp.StatusCode, body, resp.Header.Get("X-LLM-Engine"))
		}
	}
	// turn 1 was planned on "down" first (rotation starts there); turns 2
	// and 3 follow the prefix to "up", which answered turn 1
	if n := failed.Load(); n != 1 {
		t.Fatalf("the failing member was tried %d times, want once", n)
	}
}

// Conversations arriving one after another on an idle pool: each new one
// breaks a tie, and only those move the rotation, so they spread whatever
// the number of turns of each and the number of members.
func TestSequentialConversationsSpreadOverThePool(t *testing.T) {
	for _, tc := range []struct{ members, turns int }{{2, 4}, {2, 2}, {3, 3}, {2, 1}} {
		p, _, _ := balancedPool(t, tc.members, nil)
		first := map[string]int{}
		for c := range 10 {
			var home string
			for turn := 1; turn <= tc.turns; turn++ {
				m, why := choice(t, p, conversation(c, turn))
				if turn == 1 {
					home = m
					first[m]++
				} else if m != home || why != ChoiceAffinity {
					t.Fatalf("%+v: conversation %d turn %d went to %s (%s), its prefix is on %s", tc, c, turn, m, why, home)
				}
			}
		}
		if len(first) != tc.members {
			t.Fatalf("%+v: 10 conversations in sequence began on %v", tc, first)
		}
		for m, n := range first {
			if n < 10/tc.members-1 {
				t.Fatalf("%+v: %s began %d conversations of 10: %v", tc, m, n, first)
			}
		}
	}
}

func TestInterleavedConversationsSpreadOverThePool(t *testing.T) {
	p, _, _ := balancedPool(t, 2, nil)
	home := map[int]string{}
	count := map[string]int{}
	for turn := 1; turn <= 4; turn++ {
		for c := range 10 {
			m, why := choice(t, p, conversation(c, turn))
			if turn == 1 {
				home[c] = m
				count[m]++
			} else if m != home[c] || why != ChoiceAffinity {
				t.Fatalf("conversation %d turn %d went to %s (%s), its prefix is on %s", c, turn, m, why, home[c])
			}
		}
	}
	if count["e0"] != 5 || count["e1"] != 5 {
		t.Fatalf("10 interleaved conversations began on %v", count)
	}
}
