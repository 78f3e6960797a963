package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
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

func TestAClientThatStopsReadingIsNotBlamedOnTheEngine(t *testing.T) {
	event := "data: " + `{"choices":[{"index":0,"delta":{"content":"` + strings.Repeat("x", 16<<10) + `"}}]}` + "\n\n"
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		w.Header().Set("Content-Type", "text/event-stream")
		for range 1000 { // 16 MB: far more than the sockets between hold
			if _, err := io.WriteString(w, event); err != nil {
				return
			}
		}
		io.WriteString(w, `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	g, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"},
		StreamIdleTimeout: caddy.Duration(time.Second)}}}, nil)
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	// the client pauses (this sleep is the scenario, not a wait for an
	// event) far longer than the engine's stream_idle_timeout, with the
	// gateway blocked writing to it all the while; the timeout is a second,
	// longer than a busy machine's scheduling gaps between two reads
	time.Sleep(4 * time.Second)
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("the stream was cut after %d bytes: %v", len(body), err)
	}
	if !strings.HasSuffix(string(body), "data: [DONE]\n\n") || strings.Contains(string(body), "upstream_stream_cut") {
		t.Fatalf("the stream did not end whole: …%s", body[max(0, len(body)-300):])
	}
	rt := g.byName["e"]
	if rt.eng.ModelBreaker("m").State() != engines.BreakerClosed || rt.eng.Breaker().State() != engines.BreakerClosed {
		t.Fatal("a slow client counted against the engine")
	}
}

func TestAStreamThatEndsWithoutFinishingIsACut(t *testing.T) {
	var finish atomic.Bool
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("c1", "half an ans"))
		if finish.Load() {
			io.WriteString(w, `data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		}
		// and the body ends cleanly, without [DONE]
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}, nil)

	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.Contains(string(body), "upstream_stream_cut") || !strings.Contains(string(body), "before the answer was complete") {
		t.Fatalf("a truncated answer looked whole (read error %v): %s", err, body)
	}
	// its story says it was cut, and how much of it the client had
	if res := lastResult.Load(); res.Status != 200 || res.Cut != "closed" || res.Relayed != int64(len(chunk("c1", "half an ans"))) {
		t.Fatalf("status %d, cut %q after %d bytes", res.Status, res.Cut, res.Relayed)
	}

	finish.Store(true)
	resp, err = http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || strings.Contains(string(body), "error") {
		t.Fatalf("a finished answer without [DONE] was cut: %v %s", err, body)
	}
	if res := lastResult.Load(); res.Cut != "" {
		t.Fatalf("a whole answer told as cut %q", res.Cut)
	}
}

// A stream that waited gets its headers before the engine is known: the
// engine is named in the stream and in the trailers.
func TestAStreamThatWaitedNamesItsEngineInTrailers(t *testing.T) {
	clock := clock.NewFake()
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("c1", "hello")+`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "slowpoke", To: up.URL, Models: []string{"m"}}}}, clock)
	// registered last, so run first: a failed assertion before free below
	// releases the upstream before either server's Close waits for it
	t.Cleanup(free)
	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
		if err != nil {
			t.Error(err)
		}
		got <- resp
	}()
	<-arrived
	clock.Advance(time.Second) // the preamble goes out
	resp := <-got
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if resp.Header.Get("X-LLM-Engine") != "" {
		t.Fatal("the engine was named before it was known")
	}
	free()
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(body), ": engine slowpoke\n") {
		t.Fatalf("%v %q", err, body)
	}
	if resp.Trailer.Get("X-LLM-Engine") != "slowpoke" {
		t.Fatalf("trailers %v", resp.Trailer)
	}
}

// BenchmarkRelayPerEvent is what one more event of a committed stream
// costs the gateway: streams of 1,050 chunks against streams of 50 (the
// upstream, the client and the request's own cost cancel out), in
// allocations and bytes per event. None.
func BenchmarkRelayPerEvent(b *testing.B) {
	srv := benchGateway(b)
	client := &http.Client{Transport: &http.Transport{}}
	stream := func(chunks int) {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("X-Bench-Chunks", strconv.Itoa(chunks))
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	cost := func(chunks int) (allocs, bytes float64) {
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		for range 20 {
			stream(chunks)
		}
		runtime.ReadMemStats(&m1)
		return float64(m1.Mallocs-m0.Mallocs) / 20, float64(m1.TotalAlloc-m0.TotalAlloc) / 20
	}
	stream(1050) // the pools and the connection
	var allocs, bytes float64
	for b.Loop() {
		sa, sb := cost(50)
		la, lb := cost(1050)
		allocs, bytes = (la-sa)/1000, (lb-sb)/1000
	}
	b.ReportMetric(allocs, "allocs/event")
	b.ReportMetric(bytes, "B/event")
}
