package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"

	"bufio"
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// failing is an upstream that answers every request 503 and counts them.
func failing(t *testing.T) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, `{"error":{"message":"`+strings.Repeat("overloaded ", 8000)+`"}}`)
	}))
	t.Cleanup(s.Close)
	return s, &n
}

func fiveEngines(url string) config.Config {
	zero := 0
	var cfg config.Config
	for _, name := range []string{"p", "a", "b", "c", "d", "e"} {
		cfg.Engines = append(cfg.Engines, engines.Config{Name: name, To: url, Models: []string{name}, Retries: &zero, BreakerFailures: 1000})
	}
	return cfg
}

func TestBodyFallbacksOverTheCapAreRefusedBeforeAnythingIsSent(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","b","c","d","e"]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "too_many_fallbacks") || !strings.Contains(body, "max_fallbacks is 4") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if hits.Load() != 0 {
		t.Fatalf("%d upstream calls for a refused request", hits.Load())
	}
	// 60,000 items are refused as fast, without resolving them
	items := strings.TrimSuffix(strings.Repeat(`"a",`, 60000), ",")
	resp, body = postJSON(t, url, `{"model":"p","fallbacks":[`+items+`]}`)
	if resp.StatusCode != 400 || hits.Load() != 0 {
		t.Fatalf("%d %s", resp.StatusCode, body[:min(len(body), 200)])
	}
}

func TestRepeatedBodyFallbacksCountOnce(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","a","a/a","b","a","b","a","a"]}`)
	if resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if n := hits.Load(); n != 3 {
		t.Fatalf("%d upstream calls, want 3 (p, a, b)", n)
	}
	// the error passed on is the primary's, whole; the attempts are listed
	if !strings.Contains(body, "attempts: p=503, a=503, b=503") || len(body) < 80000 {
		t.Fatalf("%d bytes: %s", len(body), body[len(body)-200:])
	}
}

func TestMaxAttemptsBoundsEveryKindOfAttempt(t *testing.T) {
	up, hits := failing(t)
	three := 3
	cfg := fiveEngines(up.URL)
	cfg.MaxAttempts = 5
	cfg.Engines[0].Retries = &three
	cfg.Engines[0].RetryAfterMax = 0
	_, url := testGateway(t, cfg, nil)
	resp, body := postJSON(t, url, `{"model":"p","fallbacks":["a","b","c","d"]}`)
	if resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body[:200])
	}
	if n := hits.Load(); n != 5 {
		t.Fatalf("%d upstream calls, want max_attempts 5", n)
	}
	if h := resp.Header.Get("X-LLM-Attempts"); strings.Count(h, "=") != 5 {
		t.Fatalf("X-LLM-Attempts %q", h)
	}
}

func TestAMemberNamedTwiceUnderCaseFoldingIsRefused(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	for _, body := range []string{
		`{"model":"p","Model":"gpt-4-expensive"}`,
		`{"model":"p","MODEL":"a"}`,
		`{"model":"p","mod\u0065l":"a"}`,
		`{"model":"p","model":"a"}`,
		`{"model":"p","stream":false,"ſtream":true}`, // U+017F folds to s
		`{"model":"p","fallbacks":[],"FallBacks":["a"]}`,
	} {
		resp, got := postJSON(t, url, body)
		if resp.StatusCode != 400 || !strings.Contains(got, "ambiguous_member") {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("an ambiguous body reached an engine")
	}
}

func TestShortOrEmptyGatewayKeysAreRefusedAtLoad(t *testing.T) {
	base := config.Config{Engines: []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}}
	for _, keys := range []string{"short", "a-long-enough-key-1,", "a-long-enough-key-1,,a-long-enough-key-2", " ", "a-long-enough-key-1 tiny"} {
		cfg := base
		cfg.Keys = []config.Key{{Value: keys}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("keys %q accepted", keys)
		}
	}
	cfg := base
	cfg.Keys = []config.Key{{Value: "a-long-enough-key-1, a-long-enough-key-2"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAClientThatLeavesIsCounted499(t *testing.T) {
	arrived := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body) // so the server watches the connection for a hang-up
		close(arrived)
		<-r.Context().Done()
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}, nil)
	for len(served) > 0 {
		<-served
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"m"}`))
	go func() {
		<-arrived
		cancel()
	}()
	if _, err := http.DefaultClient.Do(req); err == nil {
		t.Fatal("no error for a canceled request")
	}
	if res := <-served; res.Status != StatusClientClosed {
		t.Fatalf("status %d, want 499", res.Status)
	}
}

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
}

func TestAStreamWaitingForItsFirstTokenGetsThePreambleAndKeepAlives(t *testing.T) {
	clock := clock.NewFake()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		<-release // minutes of prompt processing
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("c1", "hello")+`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}, clock)

	got := make(chan *http.Response, 1)
	go func() {
		resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":"m","stream":true}`))
		if err != nil {
			t.Error(err)
			close(got)
			return
		}
		got <- resp
	}()
	<-arrived
	clock.Advance(time.Second) // past the preamble's half second
	resp := <-got
	if resp == nil {
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", resp.StatusCode, resp.Header)
	}
	// the preamble's timer re-arms itself for the first keep-alive after it
	// sent the preamble: wait for that (the header budget is the other timer)
	clock.WaitForTimers(2)
	clock.Advance(3 * time.Second) // a keep-alive
	r := bufio.NewReader(resp.Body)
	if line, err := r.ReadString('\n'); err != nil || line != ": keep-alive\n" {
		t.Fatalf("%q %v", line, err)
	}
	close(release)
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "hello") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("%v %q", err, rest)
	}
}

// A stream that waited gets its headers before the engine is known: the
// engine is named in the stream and in the trailers.
func TestAStreamThatWaitedNamesItsEngineInTrailers(t *testing.T) {
	clock := clock.NewFake()
	arrived, release := make(chan struct{}), make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		<-release
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("c1", "hello")+`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "slowpoke", To: up.URL, Models: []string{"m"}}}}, clock)
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
	close(release)
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(body), ": engine slowpoke\n") {
		t.Fatalf("%v %q", err, body)
	}
	if resp.Trailer.Get("X-LLM-Engine") != "slowpoke" {
		t.Fatalf("trailers %v", resp.Trailer)
	}
}

// pipeBody is a request body as HTTP/2 gives one: its bytes, and io.EOF
// only on a read after them (as a bytes.Reader reads), holding a buffer of
// its own until it is closed.
type pipeBody struct {
	*bytes.Reader
	closed bool
}

func (b *pipeBody) Close() error { b.closed = true; return nil }

// A body read whole over HTTP/2 is closed at once. A read that stops at
// its Content-Length never asks for the end, and the stream's body buffer
// stays held until the body is closed, which the server does only when the
// answer ends: 1 KiB per open stream (issue 30).
func TestABodyReadWholeIsClosedAtOnce(t *testing.T) {
	up, _ := failing(t)
	g, _ := testGateway(t, fiveEngines(up.URL), nil)
	const body = `{"model":"p","stream":true}`
	pb := &pipeBody{Reader: bytes.NewReader([]byte(body))}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.Body, r.ContentLength = pb, int64(len(body))
	got, gerr := g.readBodyOnce(httptest.NewRecorder(), r)
	if gerr != nil || string(got) != body {
		t.Fatalf("read %q, %v", got, gerr)
	}
	if !pb.closed {
		t.Fatal("the body was read whole and left open")
	}
}
