package caddymodule

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// max_concurrent and queue through Caddy: real sockets, the
// official SDK as client, an upstream that holds its requests until the test
// lets them go.

// heldUpstream answers chat completions (streamed when asked) once released;
// arrived hears of each request as it comes in.
type heldUpstream struct {
	*recorder
	arrived chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHeldUpstream(t *testing.T) *heldUpstream {
	h := &heldUpstream{arrived: make(chan struct{}, 64), release: make(chan struct{})}
	answer := sseAnswer("served", " after", " waiting")
	h.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		h.arrived <- struct{}{}
		select {
		case <-h.release:
		case <-r.Context().Done():
			return
		}
		answer(w, r)
	})
	t.Cleanup(h.free)
	return h
}

func (h *heldUpstream) free() { h.once.Do(func() { close(h.release) }) }

// awaitArrivals waits until n more requests reached the upstream.
func (h *heldUpstream) awaitArrivals(t *testing.T, n int) {
	t.Helper()
	for range n {
		select {
		case <-h.arrived:
		case <-time.After(15 * time.Second):
			t.Fatal("a request never reached the upstream")
		}
	}
}

// awaitQueued polls the admin API until n requests wait in the engine's
// queue (the queue has no event of its own; the admin API is where an
// operator sees it).
func awaitQueued(t *testing.T, name string, n int) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		s := status(t, name)
		if s.Limit == nil {
			t.Fatalf("engine %s has no limit in its status: %+v", name, s)
		}
		if s.Limit.Queued == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("engine %s: %d queued, want %d", name, s.Limit.Queued, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// chatAsync asks for a chat completion in the background.
func chatAsync(ctx context.Context, model string) <-chan error {
	done := make(chan error, 1)
	go func() {
		_, err := sdk("").Chat.Completions.New(ctx, chatParams(model, "hi"))
		done <- err
	}()
	return done
}

func TestMaxConcurrentTwoQueueTwoServesTwoQueuesTwoAndRefusesTwo(t *testing.T) {
	up := newHeldUpstream(t)
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			to %s
			models busy-model
			max_concurrent 2
			queue 2 1m
		}`, up.URL))
	before := scrape(t)

	inFlight := []<-chan error{chatAsync(context.Background(), "busy-model"), chatAsync(context.Background(), "busy-model")}
	up.awaitArrivals(t, 2)
	queued := []<-chan error{chatAsync(context.Background(), "busy-model")}
	awaitQueued(t, "gpu", 1)
	queued = append(queued, chatAsync(context.Background(), "busy-model"))
	awaitQueued(t, "gpu", 2)
	if s := status(t, "gpu").Limit; s.InFlight != 2 || s.MaxConcurrent != 2 || s.Queue != 2 {
		t.Fatalf("admin status %+v", s)
	}
	if m := scrape(t); sample(t, m, "llm_gateway_queue_length", `engine="gpu"`) != 2 ||
		sample(t, m, "llm_gateway_concurrent_in_flight", `engine="gpu"`) != 2 {
		t.Fatal("the queue is not in the metrics")
	}

	// the fifth and sixth find both places taken and the queue full
	for i := range 2 {
		_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("busy-model", "hi"))
		e := apiError(t, err, http.StatusTooManyRequests)
		if e.Code != "engine_busy" || !strings.Contains(e.Message, "engine gpu is busy") {
			t.Fatalf("refusal %d: %s %s", i, e.Code, e.Message)
		}
		if ra := e.Response.Header.Get("Retry-After"); ra == "" || ra == "0" {
			t.Fatalf("refusal %d without Retry-After: %v", i, e.Response.Header)
		}
	}
	select {
	case <-up.arrived:
		t.Fatal("a refused or queued request reached the upstream")
	default:
	}

	up.free()
	for i, done := range append(inFlight, queued...) {
		if err := <-done; err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
	}
	if n := len(up.all()); n != 4 {
		t.Fatalf("the upstream saw %d requests, want 4", n)
	}
	if s := status(t, "gpu").Limit; s.InFlight != 0 || s.Queued != 0 {
		t.Fatalf("after every answer: %+v", s)
	}
	after := scrape(t)
	delta := func(name, labels string) float64 {
		return sample(t, after, name, labels) - sample(t, before, name, labels)
	}
	if d := delta("llm_gateway_busy_total", `engine="gpu",reason="queue_full"`); d != 2 {
		t.Fatalf("busy_total grew by %v, want 2", d)
	}
	if d := delta("llm_gateway_queue_wait_seconds_count", `engine="gpu",outcome="served"`); d != 2 {
		t.Fatalf("%v queue waits served, want 2", d)
	}
	if d := delta("llm_gateway_requests_total", `engine="",key="",model="busy-model",status="429"`); d != 2 {
		t.Fatalf("%v requests counted 429, want 2", d)
	}
}

func TestAQueuedClientThatLeavesFreesItsPlaceAtOnce(t *testing.T) {
	up := newHeldUpstream(t)
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			to %s
			models leave-model
			max_concurrent 1
			queue 1
		}`, up.URL))
	first := chatAsync(context.Background(), "leave-model")
	up.awaitArrivals(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	leaving := chatAsync(ctx, "leave-model")
	awaitQueued(t, "gpu", 1)

	cancel()
	if err := <-leaving; !errors.Is(err, context.Canceled) {
		t.Fatalf("the client that left: %v", err)
	}
	awaitQueued(t, "gpu", 0)
	// its place is free: the next request waits instead of being refused
	next := chatAsync(context.Background(), "leave-model")
	awaitQueued(t, "gpu", 1)
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("leave-model", "hi"))
	apiError(t, err, http.StatusTooManyRequests) // and the queue is full again

	up.free()
	for _, done := range []<-chan error{first, next} {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	if n := len(up.all()); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2 (the one that left never reached it)", n)
	}
}

func TestAQueuedStreamGetsItsPreambleAndKeepAlivesThenTheAnswer(t *testing.T) {
	up := newHeldUpstream(t)
	startGateway(t, fmt.Sprintf(`
		keepalive 100ms
		engine gpu {
			to %s
			models stream-model
			max_concurrent 1
			queue 1
		}`, up.URL))
	first := chatAsync(context.Background(), "stream-model")
	up.awaitArrivals(t, 1)

	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"stream-model","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// the headers came while it waits in the queue
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("preamble: %d %v", resp.StatusCode, resp.Header)
	}
	if s := status(t, "gpu").Limit; s.Queued != 1 {
		t.Fatalf("the stream is not queued: %+v", s)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() && sc.Text() != ": keep-alive" {
	}
	up.free()
	var text strings.Builder
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, `"content":"`); i >= 0 {
			text.WriteString(strings.SplitN(line[i+len(`"content":"`):], `"`, 2)[0])
		}
	}
	if text.String() != "served after waiting" {
		t.Fatalf("the stream said %q", text.String())
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
}

// The SDK sees the refusal as the rate limit it is: with its retries on, it
// waits Retry-After and tries again, and the retry is served.
func TestTheSDKRetriesAnEngineBusyAfterRetryAfter(t *testing.T) {
	up := newHeldUpstream(t)
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			to %s
			models retry-model
			max_concurrent 1
		}`, up.URL))
	first := chatAsync(context.Background(), "retry-model")
	up.awaitArrivals(t, 1)
	refused := busyCount(t, "gpu")
	done := make(chan error, 1)
	go func() {
		_, err := sdk("", option.WithMaxRetries(2)).Chat.Completions.New(context.Background(), chatParams("retry-model", "hi"))
		done <- err
	}()
	// the first try is refused; the place is free before the SDK retries
	for deadline := time.Now().Add(15 * time.Second); busyCount(t, "gpu") == refused; {
		if time.Now().After(deadline) {
			t.Fatal("the SDK's first try was never refused")
		}
		time.Sleep(5 * time.Millisecond)
	}
	up.free()
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the SDK's retry: %v", err)
	}
	if n := len(up.all()); n != 2 {
		t.Fatalf("the upstream saw %d requests, want 2", n)
	}
}

// busyCount is how many requests the engine's limit has refused.
func busyCount(t *testing.T, engine string) float64 {
	return sample(t, scrape(t), "llm_gateway_busy_total", `engine="`+engine+`",reason="queue_full"`)
}
