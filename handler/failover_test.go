package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"

	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Decisions below Caddy: a Gateway built from engines.New over httptest
// upstreams, served by an httptest server on 127.0.0.1.

// testGateway builds a gateway for cfg and serves it; clock may be nil.
func testGateway(t *testing.T, cfg config.Config, clock clock.Clock) (*Gateway, string) {
	t.Helper()
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	var es []*engines.Engine
	for _, ec := range cfg.Engines {
		e, err := engines.New(ec, tr, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		if clock != nil {
			e.SetClock(clock)
		}
		t.Cleanup(func() { e.Destruct() })
		es = append(es, e)
	}
	g, err := New(cfg, es, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	if clock != nil {
		g.SetClock(clock)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var res Result
		defer func() { // also after an aborted answer, as the caddy module reads it
			lastResult.Store(&res)
			select {
			case served <- &res:
			default:
			}
		}()
		g.ServeHTTP(w, r, &res)
	}))
	t.Cleanup(srv.Close)
	return g, srv.URL
}

// lastResult is the Result of the last request served by a testGateway;
// served hears of each (a test that waits for one drains it first).
var (
	lastResult atomic.Pointer[Result]
	served     = make(chan *Result, 64)
)

func postJSON(t *testing.T, url, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// answer is a response and its body.
type answer struct {
	resp *http.Response
	body string
}

// postLater posts body in the background; the channel gets the answer.
func postLater(t *testing.T, url, body string) <-chan answer {
	done := make(chan answer, 1)
	go func() {
		resp, b := postJSON(t, url, body)
		done <- answer{resp, b}
	}()
	return done
}

func answerOK(w http.ResponseWriter, model string) {
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`, model)
}

// modelOf is the "model" of a request body.
func modelOf(r *http.Request) string {
	var b struct{ Model string }
	_ = json.NewDecoder(r.Body).Decode(&b)
	return b.Model
}

func TestOverloadedModelOpensOnlyItsOwnBreaker(t *testing.T) {
	var mu sync.Mutex
	hits := map[string]int{}
	cloud := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m := modelOf(&http.Request{Body: io.NopCloser(strings.NewReader(string(body)))})
		mu.Lock()
		hits[m]++
		mu.Unlock()
		switch {
		case m == "A":
			w.WriteHeader(http.StatusServiceUnavailable)
			io.WriteString(w, `{"error":{"message":"model A is overloaded"}}`)
		case strings.Contains(string(body), "forbidden topic"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			io.WriteString(w, `{"error":{"message":"flagged by the content filter","code":"content_filter"}}`)
		default:
			answerOK(w, m)
		}
	}))
	defer cloud.Close()
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "backup") }))
	defer backup.Close()
	zero := 0
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "cloud", To: cloud.URL, Models: []string{"A", "B"}, Fallback: "backup", Retries: &zero, BreakerFailures: 2},
		{Name: "backup", To: backup.URL, Models: []string{"backup"}},
	}}, nil)

	for i := range 5 {
		resp, body := postJSON(t, url, `{"model":"A"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "backup" {
			t.Fatalf("A, request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	mu.Lock()
	if hits["A"] != 2 {
		t.Fatalf("the engine saw %d requests for A, want 2 (then A's breaker opened)", hits["A"])
	}
	mu.Unlock()
	for i := range 3 {
		resp, body := postJSON(t, url, `{"model":"B"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "cloud" {
			t.Fatalf("B, request %d went elsewhere: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	resp, body := postJSON(t, url, `{"model":"B","messages":[{"role":"user","content":"forbidden topic"}]}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "content_filter") || resp.Header.Get("X-LLM-Engine") != "cloud" {
		t.Fatalf("the content filter's 400: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	if res := lastResult.Load(); res.Attempts != 1 {
		t.Fatalf("the 400 took %d attempts", res.Attempts)
	}
}

// hangUp closes the client's connection without an answer.
func hangUp(w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err == nil {
		conn.Close()
	}
}

func TestHangUpAfterLongSilenceMovesOnWithoutASecondTry(t *testing.T) {
	clock := clock.NewFake()
	var hits atomic.Int32
	arrived := make(chan struct{}, 4)
	release := make(chan struct{})
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		arrived <- struct{}{}
		<-release
		hangUp(w)
	}))
	defer silent.Close()
	backup := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "backup") }))
	defer backup.Close()
	three := 3
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "silent", To: silent.URL, Models: []string{"m"}, Fallback: "backup", Retries: &three},
		{Name: "backup", To: backup.URL, Models: []string{"backup"}},
	}}, clock)

	done := postLater(t, url, `{"model":"m"}`)
	<-arrived
	clock.Advance(15 * time.Second) // the engine says nothing for 15 s (hangup_grace: dial_timeout 10 s)…
	close(release)                  // …then hangs up
	a := <-done
	if a.resp.StatusCode != 200 || a.resp.Header.Get("X-LLM-Engine") != "backup" {
		t.Fatalf("%d %v %s", a.resp.StatusCode, a.resp.Header, a.body)
	}
	if n := hits.Load(); n != 1 {
		t.Fatalf("the silent engine was tried %d times, want once", n)
	}
	// the request's story: the silent engine's try, then the backup's answer
	tries := lastResult.Load().Tries
	if len(tries) != 2 || tries[0].Engine != "silent" || tries[0].Reason != "closed" || tries[0].Scope != "model" ||
		tries[1].Engine != "backup" || tries[1].Reason != "ok" || tries[1].Status != 200 || tries[1].Address == "" ||
		tries[0].End.Sub(tries[0].Start) != 15*time.Second {
		t.Fatalf("story %+v", tries)
	}
}

func TestInstantResetIsRetriedOnTheSameEngine(t *testing.T) {
	var hits atomic.Int32
	flaky := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if hits.Add(1) == 1 {
			hangUp(w)
			return
		}
		answerOK(w, "m")
	}))
	defer flaky.Close()
	one := 1
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "flaky", To: flaky.URL, Models: []string{"m"}, Retries: &one},
	}}, nil)
	resp, body := postJSON(t, url, `{"model":"m"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "flaky" || hits.Load() != 2 {
		t.Fatalf("%d after %d tries: %s", resp.StatusCode, hits.Load(), body)
	}
}

// chunk is one streamed chat chunk carrying text.
func chunk(id, text string) string {
	b, _ := json.Marshal(text)
	return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}` + "\n\n"
}

func TestCutStreamIsCompletedByTheSameEngine(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := http.NewResponseController(w)
		if n == 1 {
			io.WriteString(w, `data: {"id":"first","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, chunk("first", "Hello, "))
			io.WriteString(w, chunk("first", "wor"))
			fl.Flush()
			panic(http.ErrAbortHandler) // the engine dies mid-answer
		}
		io.WriteString(w, chunk("second", "ld!"))
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer eng.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "local", To: eng.URL, Models: []string{"m"}, Resume: new(true), Prefill: new(true)},
	}}, nil)

	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"greet"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	seams, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ": resumed on "):
			seams++
			if line != ": resumed on local" {
				t.Fatalf("seam %q", line)
			}
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			var c struct {
				ID      string
				Created int
				Choices []struct{ Delta struct{ Content string } }
			}
			if err := json.Unmarshal([]byte(line[6:]), &c); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if c.ID != "first" || c.Created != 7 {
				t.Fatalf("a chunk of the continuation reads as another answer: %s", line)
			}
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Hello, world!" || seams != 1 || !done {
		t.Fatalf("text %q, %d seams, [DONE] %v", text.String(), seams, done)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || !strings.Contains(bodies[1], `{"role":"assistant","content":"Hello, wor"}]`) {
		t.Fatalf("the engine was sent %q", bodies)
	}
}

func TestCallersKeyNeverReachesTheEngine(t *testing.T) {
	got := make(chan http.Header, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got <- r.Header.Clone()
		answerOK(w, "m")
	}))
	defer up.Close()
	_, url := testGateway(t, config.Config{
		Keys:    []config.Key{{Value: "caller-secret-key-123"}},
		Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}, APIKey: "engine-own-key-456"}},
	}, nil)
	resp, body := postJSON(t, url, `{"model":"m"}`,
		"Authorization", "Bearer caller-secret-key-123", "X-Api-Key", "caller-secret-key-123",
		"Api-Key", "caller-secret-key-123", "Proxy-Authorization", "Basic xyz")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	h := <-got
	for k, vv := range h {
		for _, v := range vv {
			if strings.Contains(v, "caller-secret") || k == "Proxy-Authorization" {
				t.Fatalf("the caller's credential reached the engine in %s", k)
			}
		}
	}
	if h.Get("Authorization") != "Bearer engine-own-key-456" {
		t.Fatalf("the engine's own key: %q", h.Get("Authorization"))
	}
}

func TestAResumeIsAnAttemptAndReportsTheWholeAnswersUsage(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			io.WriteString(w, chunk("first", strings.Repeat("word ", 8))) // 40 bytes: about 10 tokens
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the engine dies mid-answer
		}
		io.WriteString(w, chunk("second", "end."))
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer eng.Close()
	const body = `{"model":"m","stream":true,"max_tokens":100,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`
	for _, maxAttempts := range []int{1, 0} {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		_, url := testGateway(t, config.Config{MaxAttempts: maxAttempts, Engines: []engines.Config{
			{Name: "local", To: eng.URL, Models: []string{"m"}, Resume: new(true), Prefill: new(true)},
		}}, nil)
		drain()
		resp, out := postJSON(t, url, body)
		resp.Body.Close()
		res := <-served
		mu.Lock()
		calls := len(bodies)
		sent := append([]string(nil), bodies...)
		mu.Unlock()
		if maxAttempts == 1 {
			if calls != 1 || !strings.Contains(out, "upstream_stream_cut") {
				t.Fatalf("max_attempts 1: %d upstream calls, answer %s", calls, out)
			}
			continue
		}
		if calls != 2 || !strings.Contains(sent[1], `"max_tokens":90`) {
			t.Fatalf("the continuation was sent %q", sent)
		}
		if !strings.Contains(out, `"usage":{"prompt_tokens":30,"completion_tokens":15,"total_tokens":45}`) {
			t.Fatalf("the answer's usage is not the whole answer's:\n%s", out)
		}
		if res.Attempts != 2 || res.Usage != (grammar.Usage{Prompt: 30, Completion: 15}) {
			t.Fatalf("the access log says %d attempts and usage %+v", res.Attempts, res.Usage)
		}
		if len(res.Tries) != 2 || res.Tries[0].Resume || !res.Tries[1].Resume || res.Tries[1].Reason != "ok" {
			t.Fatalf("story %+v", res.Tries)
		}
	}
}
