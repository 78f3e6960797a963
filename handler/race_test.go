package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// silentEngine takes requests and says nothing until the gateway hangs
// up: arrived hears each request, hungUp each hang-up.
type silentEngine struct {
	*httptest.Server
	arrived, hungUp chan struct{}
}

func newSilentEngine(t *testing.T) *silentEngine {
	s := &silentEngine{arrived: make(chan struct{}, 16), hungUp: make(chan struct{}, 16)}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body) // then the server hears a hang-up
		s.arrived <- struct{}{}
		<-r.Context().Done()
		s.hungUp <- struct{}{}
	}))
	t.Cleanup(s.Close)
	return s
}

// streamingEngine answers every request with a two-chunk stream.
func streamingEngine(t *testing.T, id string) *httptest.Server {
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk(id, "hello")+chunk(id, " there")+"data: [DONE]\n\n")
	}))
	t.Cleanup(s.Close)
	return s
}

// hedgeConfig is engine a at aURL, hedged after 300ms to its fallback b at
// bURL.
func hedgeConfig(aURL, bURL string) config.Config {
	zero := 0
	return config.Config{Engines: []engines.Config{
		{Name: "a", To: aURL, Models: []string{"a"}, Retries: &zero, Fallback: "b",
			Hedge: &engines.Hedge{After: caddy.Duration(300 * time.Millisecond)}},
		{Name: "b", To: bURL, Models: []string{"b"}, Retries: &zero},
	}}
}

// hedgeCounter records the gateway's Hedge hook.
func hedgeCounter(g *Gateway) func() []string {
	var mu sync.Mutex
	var got []string
	g.Hooks.Hedge = func(engine, winner string) {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, engine+":"+winner)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), got...)
	}
}

func tries(res *Result) string {
	var s []string
	for _, t := range res.Tries {
		x := t.Engine + "=" + t.Reason
		if t.Hedge {
			x += "(hedge)"
		}
		s = append(s, x)
	}
	return strings.Join(s, " ")
}

func TestASilentEngineIsHedgedToItsFallbackAndTheLoserIsDisconnected(t *testing.T) {
	a := newSilentEngine(t)
	b := streamingEngine(t, "b1")
	fake := clock.NewFake()
	g, url := testGateway(t, hedgeConfig(a.URL, b.URL), fake)
	hedges := hedgeCounter(g)
	drain()
	got := postLater(t, url, `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-a.arrived
	fake.Advance(300 * time.Millisecond) // hedge_after: b starts beside a
	ans := <-got
	if ans.resp.StatusCode != 200 || ans.resp.Header.Get("X-LLM-Engine") != "b" {
		t.Fatalf("%d engine %q: %s", ans.resp.StatusCode, ans.resp.Header.Get("X-LLM-Engine"), ans.body)
	}
	if !strings.Contains(ans.body, "hello") || !strings.Contains(ans.body, " there") || !strings.HasSuffix(ans.body, "data: [DONE]\n\n") {
		t.Fatalf("body %q", ans.body)
	}
	<-a.hungUp // the loser's connection is closed
	res := <-served
	if s := tries(res); s != "b=ok(hedge) a=lost" {
		t.Fatalf("story %q, want the hedge's answer and a lost", s)
	}
	if res.Tries[1].LostFor < 0 {
		t.Fatalf("lost for %v", res.Tries[1].LostFor)
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:hedge" {
		t.Fatalf("hedge hook %v", h)
	}
}

func TestTheFirstAttemptWinsWhenItsContentComesFirst(t *testing.T) {
	release := make(chan struct{})
	arrivedA := make(chan struct{}, 1)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivedA <- struct{}{}
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("a1", "first")+"data: [DONE]\n\n")
	}))
	defer a.Close()
	b := newSilentEngine(t)
	fake := clock.NewFake()
	g, url := testGateway(t, hedgeConfig(a.URL, b.URL), fake)
	hedges := hedgeCounter(g)
	drain()
	got := postLater(t, url, `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-arrivedA
	fake.Advance(300 * time.Millisecond)
	<-b.arrived // the hedge went out
	close(release)
	ans := <-got
	if ans.resp.Header.Get("X-LLM-Engine") != "a" || !strings.Contains(ans.body, "first") {
		t.Fatalf("engine %q: %s", ans.resp.Header.Get("X-LLM-Engine"), ans.body)
	}
	<-b.hungUp
	res := <-served
	if s := tries(res); s != "a=ok b=lost(hedge)" {
		t.Fatalf("story %q", s)
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:first" {
		t.Fatalf("hedge hook %v", h)
	}
}

func TestAKeyWithHedgeOffWaitsForItsEngine(t *testing.T) {
	a := newSilentEngine(t)
	b := streamingEngine(t, "b1")
	cfg := hedgeConfig(a.URL, b.URL)
	cfg.Engines[0].HeaderTimeout = caddy.Duration(30 * time.Second)
	cfg.Keys = []config.Key{{Name: "batch", Value: "sk-batch", NoHedge: true}}
	fake := clock.NewFake()
	_, url := testGateway(t, cfg, fake)
	drain()
	done := make(chan answer, 1)
	go func() {
		resp, body := postJSON(t, url, `{"model":"a","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer sk-batch")
		done <- answer{resp, body}
	}()
	<-a.arrived
	fake.Advance(30 * time.Second) // no hedge: the header timeout ends a, then b
	ans := <-done
	if ans.resp.Header.Get("X-LLM-Engine") != "b" {
		t.Fatalf("engine %q: %s", ans.resp.Header.Get("X-LLM-Engine"), ans.body)
	}
	res := <-served
	if s := tries(res); s != "a=timeout b=ok" {
		t.Fatalf("story %q, want no hedge", s)
	}
}

func TestWhenBothFailTheClientGetsBothFailures(t *testing.T) {
	release := make(chan struct{})
	arrivedA := make(chan struct{}, 1)
	a := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivedA <- struct{}{}
		<-release
		http.Error(w, `{"error":{"message":"boom"}}`, http.StatusInternalServerError)
	}))
	defer a.Close()
	arrivedB := make(chan struct{}, 1)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrivedB <- struct{}{}
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	}))
	defer b.Close()
	fake := clock.NewFake()
	g, url := testGateway(t, hedgeConfig(a.URL, b.URL), fake)
	hedges := hedgeCounter(g)
	drain()
	got := postLater(t, url, `{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
	<-arrivedA
	fake.Advance(300 * time.Millisecond)
	<-arrivedB // the hedge failed at once; a is still in the race
	close(release)
	ans := <-got
	if ans.resp.StatusCode < 500 {
		t.Fatalf("%d %s", ans.resp.StatusCode, ans.body)
	}
	if h := ans.resp.Header.Get("X-LLM-Attempts"); !strings.Contains(h, "a=500") || !strings.Contains(h, "b=503") {
		t.Fatalf("X-LLM-Attempts %q", h)
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:none" {
		t.Fatalf("hedge hook %v", h)
	}
}

func TestNoHedgeGoesToACandidateWhoseBreakerIsOpen(t *testing.T) {
	a := newSilentEngine(t)
	b := streamingEngine(t, "b1")
	cfg := hedgeConfig(a.URL, b.URL)
	cfg.Engines[0].HeaderTimeout = caddy.Duration(30 * time.Second)
	cfg.Engines[1].BreakerFailures, cfg.Engines[1].BreakerCooldown = 1, caddy.Duration(time.Hour)
	fake := clock.NewFake()
	g, url := testGateway(t, cfg, fake)
	hedges := hedgeCounter(g)
	g.byName["b"].eng.Breaker().Failure() // open
	drain()
	got := postLater(t, url, `{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
	<-a.arrived
	fake.Advance(300 * time.Millisecond) // no hedge: b's breaker is open
	fake.Advance(30 * time.Second)       // a's header timeout; b is skipped
	ans := <-got
	if ans.resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("%d %s", ans.resp.StatusCode, ans.body)
	}
	res := <-served
	if s := tries(res); s != "a=timeout b=open" {
		t.Fatalf("story %q", s)
	}
	if h := hedges(); len(h) != 0 {
		t.Fatalf("hedge hook %v", h)
	}
}

func TestAPoolHedgesToItsNextMember(t *testing.T) {
	a := newSilentEngine(t)
	b := streamingEngine(t, "b1")
	zero := 0
	cfg := config.Config{
		Engines: []engines.Config{
			{Name: "a", To: a.URL, Models: []string{"a"}, Retries: &zero},
			{Name: "b", To: b.URL, Models: []string{"b"}, Retries: &zero},
		},
		Pools: []config.PoolConfig{{Name: "chat", Members: []string{"a", "b"},
			Balance: &config.Balance{Policy: config.BalanceRoundRobin},
			Hedge:   &engines.Hedge{After: caddy.Duration(time.Second), Budget: 1}}},
	}
	fake := clock.NewFake()
	g, url := testGateway(t, cfg, fake)
	hedges := hedgeCounter(g)
	for i := range 2 { // round robin: one of the two starts on a
		drain()
		got := postLater(t, url, `{"model":"chat","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
		var ans answer
		select {
		case ans = <-got:
		case <-a.arrived:
			fake.Advance(time.Second)
			ans = <-got
			<-a.hungUp
		}
		if ans.resp.StatusCode != 200 || !strings.Contains(ans.body, "hello") {
			t.Fatalf("request %d: %d %s", i, ans.resp.StatusCode, ans.body)
		}
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:hedge" {
		t.Fatalf("hedge hook %v, want one hedge from a that b won", h)
	}
}

func TestHedgesCountAgainstMaxAttempts(t *testing.T) {
	a, b := newSilentEngine(t), newSilentEngine(t)
	c := streamingEngine(t, "c1")
	cfg := hedgeConfig(a.URL, b.URL)
	cfg.MaxAttempts = 2
	cfg.Engines[0].HeaderTimeout = caddy.Duration(30 * time.Second)
	cfg.Engines[1].HeaderTimeout = caddy.Duration(30 * time.Second)
	zero := 0
	cfg.Engines = append(cfg.Engines, engines.Config{Name: "c", To: c.URL, Models: []string{"c"}, Retries: &zero})
	fake := clock.NewFake()
	_, url := testGateway(t, cfg, fake)
	drain()
	got := postLater(t, url, `{"model":"a","messages":[{"role":"user","content":"hi"}],"fallbacks":["c"]}`)
	<-a.arrived
	fake.Advance(300 * time.Millisecond)
	<-b.arrived // the hedge: the second of two attempts
	fake.Advance(30 * time.Second)
	ans := <-got
	if ans.resp.StatusCode != http.StatusGatewayTimeout {
		t.Fatalf("%d %s", ans.resp.StatusCode, ans.body)
	}
	res := <-served
	if s := tries(res); s != "a=timeout b=timeout(hedge)" && s != "b=timeout(hedge) a=timeout" {
		t.Fatalf("story %q: c is a third attempt, beyond max_attempts 2", s)
	}
}

// flakyEngine answers its first request with status (and header), and
// every later one with later (with status again when later is nil);
// arrived hears each request's number.
type flakyEngine struct {
	*httptest.Server
	arrived chan int // the request's number, from 1
}

func newFlakyEngine(t *testing.T, status int, header http.Header, later func(w http.ResponseWriter, r *http.Request)) *flakyEngine {
	f := &flakyEngine{arrived: make(chan int, 16)}
	var n atomic.Int32
	f.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		i := int(n.Add(1))
		f.arrived <- i
		if i == 1 || later == nil {
			for k, v := range header {
				w.Header()[k] = v
			}
			http.Error(w, `{"error":{"message":"transient"}}`, status)
			return
		}
		later(w, r)
	}))
	t.Cleanup(f.Close)
	return f
}

// answers is a flaky engine's later answer: a stream of its name.
func answers(id string) func(w http.ResponseWriter, r *http.Request) {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk(id, "from "+id)+"data: [DONE]\n\n")
	}
}

// engineOf is the engine that answered: its header, or the stream's
// comment when the stream's preamble went out before it was known.
func engineOf(ans answer) string {
	if e := ans.resp.Header.Get("X-LLM-Engine"); e != "" {
		return e
	}
	for _, line := range strings.Split(ans.body, "\n") {
		if e, ok := strings.CutPrefix(line, ": engine "); ok {
			return e
		}
		if e, ok := strings.CutPrefix(line, ": fallback "); ok {
			return e
		}
	}
	return ""
}

// arrivedB is a fallback that answers at once and says when it was asked.
func arrivedB(t *testing.T) (*httptest.Server, chan struct{}) {
	asked := make(chan struct{}, 4)
	b := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		asked <- struct{}{}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("b1", "from b")+"data: [DONE]\n\n")
	}))
	t.Cleanup(b.Close)
	return b, asked
}

func retryConfig(aURL, bURL string) config.Config {
	cfg := hedgeConfig(aURL, bURL)
	one := 1
	cfg.Engines[0].Retries = &one
	return cfg
}

// A single 500 of a hedged engine: the fallback starts at once, and the
// engine's retry after its back-off answers before the fallback's answer
// may go (the retry's hedge_after): the model asked for keeps the request.
func TestAHedgedEnginesSingle500IsAnsweredByItsRetryNotTheFallback(t *testing.T) {
	a := newFlakyEngine(t, http.StatusInternalServerError, nil, answers("a"))
	b, asked := arrivedB(t)
	fake := clock.NewFake()
	g, url := testGateway(t, retryConfig(a.URL, b.URL), fake)
	hedges := hedgeCounter(g)
	drain()
	got := postLater(t, url, `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-a.arrived
	<-asked                              // the fallback started at once, beside the back-off
	fake.Advance(250 * time.Millisecond) // the back-off (125-250 ms): the retry goes
	if n := <-a.arrived; n != 2 {
		t.Fatalf("request %d", n)
	}
	ans := <-got
	if engineOf(ans) != "a" || !strings.Contains(ans.body, "from a") {
		t.Fatalf("engine %q: %s", engineOf(ans), ans.body)
	}
	res := <-served
	if s := tries(res); s != "a=500 a=ok b=lost(hedge)" {
		t.Fatalf("story %q", s)
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:first" {
		t.Fatalf("hedge hook %v", h)
	}
}

// A 429 with Retry-After: 1 of a hedged engine is retried after that
// second, beside the fallback, and the retry answers.
func TestAHedgedEngines429RetryAfterIsAnsweredByItsRetry(t *testing.T) {
	a := newFlakyEngine(t, http.StatusTooManyRequests, http.Header{"Retry-After": {"1"}}, answers("a"))
	b, asked := arrivedB(t)
	fake := clock.NewFake()
	_, url := testGateway(t, retryConfig(a.URL, b.URL), fake)
	drain()
	got := postLater(t, url, `{"model":"a","messages":[{"role":"user","content":"hi"}],"stream":true}`)
	<-a.arrived
	<-asked
	fake.Advance(time.Second) // Retry-After
	<-a.arrived
	if ans := <-got; engineOf(ans) != "a" || !strings.Contains(ans.body, "from a") {
		t.Fatalf("engine %q: %s", engineOf(ans), ans.body)
	}
	if s := tries(<-served); s != "a=429 a=ok b=lost(hedge)" {
		t.Fatalf("story %q", s)
	}
}

// The fallback's answer waits for the retry no longer than the retry's
// hedge_after once it is sent: a retry that says nothing loses to it.
func TestTheFallbacksAnswerWaitsForTheRetryOnlyItsHedgeAfter(t *testing.T) {
	a := newFlakyEngine(t, http.StatusInternalServerError, nil, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	b, asked := arrivedB(t)
	fake := clock.NewFake()
	g, url := testGateway(t, retryConfig(a.URL, b.URL), fake)
	hedges := hedgeCounter(g)
	drain()
	got := postLater(t, url, `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-a.arrived
	<-asked
	fake.Advance(250 * time.Millisecond) // the retry goes, and says nothing
	<-a.arrived
	fake.Advance(300 * time.Millisecond) // its hedge_after: the fallback's answer goes
	ans := <-got
	if engineOf(ans) != "b" || !strings.Contains(ans.body, "from b") {
		t.Fatalf("engine %q: %s", engineOf(ans), ans.body)
	}
	if s := tries(<-served); s != "a=500 b=ok(hedge) a=lost" {
		t.Fatalf("story %q", s)
	}
	if h := hedges(); len(h) != 1 || h[0] != "a:hedge" {
		t.Fatalf("hedge hook %v", h)
	}
}

// A retry that fails again lets the fallback's answer go at once.
func TestARetryThatFailsAgainLetsTheFallbacksAnswerGo(t *testing.T) {
	a := newFlakyEngine(t, http.StatusServiceUnavailable, nil, nil)
	b, asked := arrivedB(t)
	fake := clock.NewFake()
	_, url := testGateway(t, retryConfig(a.URL, b.URL), fake)
	drain()
	got := postLater(t, url, `{"model":"a","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	<-a.arrived
	<-asked
	fake.Advance(250 * time.Millisecond)
	<-a.arrived
	ans := <-got
	if engineOf(ans) != "b" {
		t.Fatalf("engine %q: %s", engineOf(ans), ans.body)
	}
	if s := tries(<-served); s != "a=503 a=503 b=ok(hedge)" {
		t.Fatalf("story %q", s)
	}
}

// An answer held for a retry that won is charged what it reported: the
// engine made the whole answer.
func TestAHeldAnswerThatLostIsChargedItsUsage(t *testing.T) {
	req := &request{op: opChat, body: []byte(`{"model":"b","messages":[{"role":"user","content":"hi"}]}`)}
	a := &attempt{req: req, leasedAt: time.Now(), resp: &http.Response{
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   io.NopCloser(strings.NewReader(`{"id":"c1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`)),
	}}
	a.readLostAnswer()
	if u := loserUsage(req, a); u.Input != 5 || u.Output != 7 {
		t.Fatalf("charged %+v, want its usage 5 + 7", u)
	}
	unread := &attempt{req: req, leasedAt: time.Now()}
	if u, want := loserUsage(req, unread), promptTokens(req); int64(u.Input) != want || u.Output != 0 {
		t.Fatalf("charged %+v, want its prompt %d", u, want)
	}
}
