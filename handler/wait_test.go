package handler

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// An engine's max_concurrent as the handler sees it: a request
// beyond the limit (and its queue) is an engine that is busy, which moves on
// like an upstream 429 but touches no breaker, and without anywhere to go is
// a 429 engine_busy of the gateway's own, with Retry-After.

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
