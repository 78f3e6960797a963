package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// An engine's max_concurrent (issue 15) as the handler sees it: a request
// beyond the limit (and its queue) is an engine that is busy, which moves on
// like an upstream 429 but touches no breaker, and without anywhere to go is
// a 429 engine_busy of the gateway's own, with Retry-After.

// heldEngine is an upstream that holds each request until released.
type heldEngine struct {
	*httptest.Server
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHeldEngine(t *testing.T) *heldEngine {
	h := &heldEngine{arrived: make(chan struct{}, 16), release: make(chan struct{})}
	h.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.arrived <- struct{}{}
		<-h.release
		answerOK(w, "held")
	}))
	t.Cleanup(func() { h.free(); h.Close() })
	return h
}

func (h *heldEngine) free() { h.once.Do(func() { close(h.release) }) }

// holdOne sends a request that the engine holds, and returns once it has
// arrived; the channel gets its answer.
func holdOne(t *testing.T, h *heldEngine, url string) <-chan answer {
	done := postLater(t, url, `{"model":"m"}`)
	<-h.arrived
	return done
}

func TestABusyEngineSendsTheOverflowToItsFallbackWithoutTouchingItsBreaker(t *testing.T) {
	gpu := newHeldEngine(t)
	cpu := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "cpu") }))
	defer cpu.Close()
	g, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, Fallback: "cpu", MaxConcurrent: 1, BreakerFailures: 1},
		{Name: "cpu", To: cpu.URL, Models: []string{"cpu"}},
	}}, nil)
	var reasons []string
	g.Hooks.Fallback = func(_, _, reason string) { reasons = append(reasons, reason) }

	first := holdOne(t, gpu, url)
	for i := range 3 {
		resp, body := postJSON(t, url, `{"model":"m"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Fallback") != "cpu" {
			t.Fatalf("overflow request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	gpu.free()
	if status := (<-first).resp.StatusCode; status != 200 {
		t.Fatalf("the request in flight: %d", status)
	}
	if strings.Join(reasons, ",") != "busy,busy,busy" {
		t.Fatalf("fallback reasons %v", reasons)
	}
	if st := g.byName["gpu"].eng.Status(); st.Breaker != "closed" {
		t.Fatalf("busy opened the engine's breaker: %+v", st)
	}
	resp, body := postJSON(t, url, `{"model":"m"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "gpu" {
		t.Fatalf("with a place free again: %d %v %s", resp.StatusCode, resp.Header, body)
	}
}

func TestABusyEngineWithNowhereToGoAnswers429EngineBusyWithRetryAfter(t *testing.T) {
	gpu := newHeldEngine(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, MaxConcurrent: 1},
	}}, nil)
	first := holdOne(t, gpu, url)
	defer func() { gpu.free(); <-first }()

	resp, body := postJSON(t, url, `{"model":"m"}`)
	var e struct {
		Error struct{ Message, Type, Code string }
	}
	if err := json.Unmarshal([]byte(body), &e); err != nil {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp.StatusCode != 429 || e.Error.Code != "engine_busy" || e.Error.Type != "rate_limit_error" || resp.Header.Get("Retry-After") != "1" {
		t.Fatalf("%d Retry-After %q %s", resp.StatusCode, resp.Header.Get("Retry-After"), body)
	}
	if !strings.Contains(e.Error.Message, "engine gpu is busy") || !strings.Contains(e.Error.Message, "max_concurrent 1") {
		t.Fatalf("message %q", e.Error.Message)
	}

	// on the Messages API it is Anthropic's rate limit error
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(`{"model":"m","max_tokens":10}`))
	req.Header.Set("Content-Type", "application/json")
	aresp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer aresp.Body.Close()
	var ae struct {
		Type  string
		Error struct{ Type, Message string }
	}
	if err := json.NewDecoder(aresp.Body).Decode(&ae); err != nil || aresp.StatusCode != 429 ||
		ae.Type != "error" || ae.Error.Type != "rate_limit_error" || aresp.Header.Get("Retry-After") == "" {
		t.Fatalf("Messages API: %d %v %+v (%v)", aresp.StatusCode, aresp.Header, ae, err)
	}
}

func TestABusyFallbackIsNotUsedEither(t *testing.T) {
	gpu, cpu := newHeldEngine(t), newHeldEngine(t)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, Fallback: "cpu", MaxConcurrent: 1},
		{Name: "cpu", To: cpu.URL, Models: []string{"c"}, MaxConcurrent: 1},
	}}, nil)
	first := holdOne(t, gpu, url)
	second := make(chan int, 1)
	go func() { // takes the fallback's one place
		resp, _ := postJSON(t, url, `{"model":"c"}`)
		second <- resp.StatusCode
	}()
	<-cpu.arrived
	defer func() { gpu.free(); cpu.free(); <-first; <-second }()

	resp, body := postJSON(t, url, `{"model":"m"}`)
	if resp.StatusCode != 429 || resp.Header.Get("X-LLM-Attempts") != "gpu=busy, cpu=busy" || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
}

func TestAQueuedRequestGoesToTheFallbackAfterFallbackAfter(t *testing.T) {
	clock := clock.NewFake()
	gpu := newHeldEngine(t)
	cpu := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "cpu") }))
	defer cpu.Close()
	g, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, Fallback: "cpu", MaxConcurrent: 1, Queue: 1},
		{Name: "cpu", To: cpu.URL, Models: []string{"cpu"}},
	}}, clock)
	var reasons []string
	g.Hooks.Fallback = func(_, _, reason string) { reasons = append(reasons, reason) }
	first := holdOne(t, gpu, url) // its header_timeout is armed
	defer func() { gpu.free(); <-first }()

	done := postLater(t, url, `{"model":"m"}`)
	// queued: its keep-alive, fallback_after and queue timeout are armed
	clock.WaitForTimers(4)
	if st := g.byName["gpu"].eng.Status(); st.Limit.Queued != 1 {
		t.Fatalf("not queued: %+v", st.Limit)
	}
	clock.Advance(10 * time.Second)
	a := <-done
	if a.resp.StatusCode != 200 || a.resp.Header.Get("X-LLM-Fallback") != "cpu" {
		t.Fatalf("%d %v %s", a.resp.StatusCode, a.resp.Header, a.body)
	}
	if strings.Join(reasons, ",") != "busy" {
		t.Fatalf("fallback reasons %v", reasons)
	}
	if st := g.byName["gpu"].eng.Status(); st.Limit.Queued != 0 {
		t.Fatalf("the request that left still waits: %+v", st.Limit)
	}
}

func TestAPoolPrefersAnIdleMemberToABusyOnesQueue(t *testing.T) {
	held := newHeldEngine(t)
	idle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "idle") }))
	defer idle.Close()
	_, url := testGateway(t, config.Config{
		Engines: []engines.Config{
			{Name: "a", To: held.URL, Models: []string{"m-a"}, ModelName: "m", MaxConcurrent: 1, Queue: 4},
			{Name: "b", To: idle.URL, Models: []string{"m-b"}, ModelName: "m", MaxConcurrent: 1, Queue: 4},
		},
		Pools: []config.PoolConfig{{Name: "m", Members: []string{"a", "b"}}},
	}, nil)
	// a holds one request; every next request goes to b, whatever the
	// rotation says, instead of waiting in a's queue
	var first <-chan answer
	for first == nil {
		done := postLater(t, url, `{"model":"m"}`)
		select {
		case <-held.arrived:
			first = done
		case a := <-done: // the rotation gave it to b
			if a.resp.StatusCode != 200 {
				t.Fatalf("%d", a.resp.StatusCode)
			}
		}
	}
	for range 4 {
		resp, body := postJSON(t, url, `{"model":"m"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "b" {
			t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-LLM-Engine"), body)
		}
	}
	held.free()
	if a := <-first; a.resp.StatusCode != 200 {
		t.Fatalf("the held request: %d", a.resp.StatusCode)
	}
}
