package caddymodule

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// counter counts the requests an upstream saw and when.
type counter struct {
	mu    sync.Mutex
	times []time.Time
}

func (c *counter) hit() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.times = append(c.times, time.Now())
	return len(c.times)
}

func (c *counter) n() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.times)
}

// gap is the time between the upstream's first and last request.
func (c *counter) gap() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.times) < 2 {
		return 0
	}
	return c.times[len(c.times)-1].Sub(c.times[0])
}

// rawUpstream serves raw TCP: handle gets each connection after its request
// was read. It is for what net/http cannot do: hang up before headers, or
// never answer.
func rawUpstream(t *testing.T, cnt *counter, handle func(net.Conn)) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	t.Cleanup(func() { ln.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				br := bufio.NewReader(c)
				req, err := http.ReadRequest(br)
				if err != nil {
					return
				}
				io.Copy(io.Discard, req.Body)
				if req.URL.Path == "/health" {
					io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
					return
				}
				cnt.hit()
				handle(c)
			}()
		}
	}()
	return "http://" + ln.Addr().String()
}

// hangUp resets the connection without a response.
func hangUp(c net.Conn) {
	c.(*net.TCPConn).SetLinger(0)
	c.Close()
}

// chunk is one streamed content event.
func chunk(content string) string {
	return fmt.Sprintf(`data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"primary-model","choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", content)
}

// scripted is an HTTP upstream that counts requests and runs script.
func scripted(t *testing.T, cnt *counter, script func(n int, w http.ResponseWriter, r *http.Request)) string {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		script(cnt.hit(), w, r)
	})
	return up.URL
}

func streamText(t *testing.T, model string) (string, error) {
	t.Helper()
	return readStream(sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams(model, "hi")))
}

func TestFailuresBeforeAnswerMoveToTheFallback(t *testing.T) {
	type check struct {
		primaryHits int           // requests the primary saw
		maxWall     time.Duration // the whole request's bound
		minGap      time.Duration // least time between the primary's attempts
	}
	cases := []struct {
		name    string
		extra   string // primary engine lines
		raw     func(net.Conn)
		script  func(n int, w http.ResponseWriter, r *http.Request)
		stream  bool
		want    check
		healthy bool // after the failure the primary answers (second attempt)
	}{
		{name: "reset before headers is retried once then falls back", raw: hangUp,
			want: check{primaryHits: 2, maxWall: 3 * time.Second, minGap: 125 * time.Millisecond}},
		{name: "accept and never answer: header timeout, no retry", extra: "header_timeout 300ms",
			raw:  func(c net.Conn) { io.Copy(io.Discard, c) },
			want: check{primaryHits: 1, maxWall: 2 * time.Second}},
		{name: "headers then nothing: first-token timeout, no retry", extra: "first_token_timeout 300ms", stream: true,
			script: func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "text/event-stream")
				io.WriteString(w, `data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
				w.(http.Flusher).Flush()
				<-r.Context().Done()
			},
			want: check{primaryHits: 1, maxWall: 2 * time.Second}},
		{name: "429 without Retry-After: retried after back-off, then fallback",
			script: func(_ int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(429) },
			want:   check{primaryHits: 2, maxWall: 3 * time.Second, minGap: 125 * time.Millisecond}},
		{name: "429 with Retry-After 1 is waited out",
			script: func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "1")
				w.WriteHeader(429)
			},
			want: check{primaryHits: 2, maxWall: 4 * time.Second, minGap: time.Second}},
		{name: "429 with a Retry-After beyond retry_after_max goes to the fallback at once",
			script: func(_ int, w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Retry-After", "30")
				w.WriteHeader(429)
			},
			want: check{primaryHits: 1, maxWall: time.Second}},
		{name: "503 on every try", extra: "retries 2",
			script: func(_ int, w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"busy"}}`, http.StatusServiceUnavailable)
			},
			want: check{primaryHits: 3, maxWall: 5 * time.Second, minGap: 250 * time.Millisecond}},
		{name: "401 from the upstream moves on without retry",
			script: func(_ int, w http.ResponseWriter, r *http.Request) {
				http.Error(w, `{"error":{"message":"bad key"}}`, http.StatusUnauthorized)
			},
			want: check{primaryHits: 1, maxWall: time.Second}},
		{name: "500 once then 200 stays on the primary", healthy: true,
			script: func(n int, w http.ResponseWriter, r *http.Request) {
				if n == 1 {
					w.WriteHeader(500)
					return
				}
				okChat(w, r)
			},
			want: check{primaryHits: 2, maxWall: 3 * time.Second, minGap: 125 * time.Millisecond}},
	}
	for _, c := range cases {
		for _, stream := range []bool{false, true} {
			if c.stream && !stream {
				continue
			}
			t.Run(fmt.Sprintf("%s/stream=%v", c.name, stream), func(t *testing.T) {
				cnt := &counter{}
				var primary string
				if c.raw != nil {
					primary = rawUpstream(t, cnt, c.raw)
				} else {
					primary = scripted(t, cnt, c.script)
				}
				fb := newRecorder(t, sseAnswer("answer", " from", " backup"))
				startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			fallback backup
			%s
		}
		engine backup {
			to %s
			models backup
		}`, primary, c.extra, fb.URL))
				start := time.Now()
				var engine string
				if stream {
					text, err := streamText(t, "big")
					if err != nil {
						t.Fatal(err)
					}
					if !c.healthy && text != "answer from backup" {
						t.Fatalf("text %q", text)
					}
				} else {
					resp, body := post(t, "/v1/chat/completions", `{"model":"big","messages":[]}`)
					if resp.StatusCode != 200 {
						t.Fatalf("%d %s", resp.StatusCode, body)
					}
					engine = resp.Header.Get("X-LLM-Engine")
					want := "backup"
					if c.healthy {
						want = "primary"
					}
					if engine != want {
						t.Fatalf("answered by %q, want %q", engine, want)
					}
				}
				wall := time.Since(start)
				if cnt.n() != c.want.primaryHits {
					t.Fatalf("the primary saw %d attempts, want %d", cnt.n(), c.want.primaryHits)
				}
				if wall > c.want.maxWall {
					t.Fatalf("took %s, bound %s", wall, c.want.maxWall)
				}
				if gap := cnt.gap(); gap < c.want.minGap {
					t.Fatalf("attempts %s apart, want at least %s (no tight loop)", gap, c.want.minGap)
				}
				// and a healthy request is served right after
				if resp, body := post(t, "/v1/chat/completions", `{"model":"backup"}`); resp.StatusCode != 200 {
					t.Fatalf("%d %s", resp.StatusCode, body)
				}
			})
		}
	}
}

func TestCommittedStreamThatIsCutOrStallsEndsInAnError(t *testing.T) {
	cases := map[string]func(w http.ResponseWriter, r *http.Request){
		"cut after content": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chunk("partial")+chunk(" answer"))
			w.(http.Flusher).Flush()
			panic(http.ErrAbortHandler) // the engine dies: broken chunked encoding
		},
		"cut mid-event": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chunk("partial")+`data: {"id":"s1","obj`)
			// returning ends the body cleanly at the HTTP level, mid-event
		},
		"stall": func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chunk("partial"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		},
	}
	for name, script := range cases {
		t.Run(name, func(t *testing.T) {
			up := newRecorder(t, script)
			fb := newRecorder(t, sseAnswer("never"))
			startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			fallback backup
			stream_idle_timeout 300ms
		}
		engine backup {
			to %s
			models backup
		}`, up.URL, fb.URL))
			start := time.Now()
			text, err := streamText(t, "big")
			if err == nil {
				t.Fatalf("a cut stream ended like a complete one: %q", text)
			}
			if !strings.Contains(err.Error(), "engine primary cut the stream") && !strings.Contains(err.Error(), "unexpected EOF") {
				t.Fatalf("error %v", err)
			}
			if !strings.HasPrefix(text, "partial") {
				t.Fatalf("text %q", text)
			}
			if len(fb.all()) != 0 {
				t.Fatal("a committed stream switched to the fallback")
			}
			if took := time.Since(start); took > 3*time.Second {
				t.Fatalf("took %s with stream_idle_timeout 300ms", took)
			}
		})
	}
}

func TestMalformedEventIsDroppedAndStreamWithoutDoneEndsAtOnce(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("one")+"data: {not json\n\n"+chunk(" two"))
		io.WriteString(w, `data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		w.(http.Flusher).Flush()
		// no [DONE]: the handler returns and the body ends cleanly, after
		// the finish_reason that says the answer is whole
	})
	logFile := startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
		}`, up.URL))
	text, err := streamText(t, "big")
	if err != nil || text != "one two" {
		t.Fatalf("%q %v", text, err)
	}
	if !strings.Contains(readFile(t, logFile), "dropped a malformed event") {
		t.Fatal("the dropped event was not logged")
	}
}

func TestContextTooLongGoesToContextFallbackOtherBadRequestsDoNot(t *testing.T) {
	var policy atomic.Bool
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(400)
		if policy.Load() {
			io.WriteString(w, `{"error":{"message":"Your request was rejected","type":"invalid_request_error","code":"content_policy_violation"}}`)
			return
		}
		io.WriteString(w, `{"error":{"message":"This model's maximum context length is 8192 tokens","type":"invalid_request_error","code":"context_length_exceeded"}}`)
	})
	big := newRecorder(t, okChat)
	fb := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		engine small {
			to %s
			models m
			fallback backup
			context_fallback bigctx/m-128k
		}
		engine bigctx {
			to %s
			models m-128k
		}
		engine backup {
			to %s
			models backup
		}`, up.URL, big.URL, fb.URL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "bigctx" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if got := string(big.all()[0].body); got != `{"model":"m-128k"}` {
		t.Fatalf("context fallback was sent %s", got)
	}
	policy.Store(true)
	resp, body = post(t, "/v1/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != 400 || !strings.Contains(body, "content_policy_violation") || strings.Contains(body, "attempts") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(fb.all()) != 0 || len(big.all()) != 1 {
		t.Fatal("a plain 400 went to a fallback")
	}
}

func TestAllFailedGivesThePrimarysErrorWithEveryAttempt(t *testing.T) {
	cnt := &counter{}
	primary := scripted(t, cnt, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"overloaded","type":"server_error","code":"overloaded"}}`)
	})
	dead := newRecorder(t, okChat)
	deadURL := dead.URL
	dead.Close()
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			fallback backup
		}
		engine backup {
			to %s
			models backup
		}`, primary, deadURL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"big"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, `overloaded (attempts: primary=503, primary=503, backup=connect)`) ||
		!strings.Contains(body, `"code":"overloaded"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	// streaming: the same error reaches the SDK
	_, err := streamText(t, "big")
	if e := apiError(t, err, 503); !strings.Contains(e.Message, "overloaded (attempts:") {
		t.Fatalf("stream error %q", e.Message)
	}
}

func TestBreakerSendsAFlappingPrimarysTrafficToItsFallbackUntilItRecovers(t *testing.T) {
	var down atomic.Bool
	down.Store(true)
	cnt := &counter{}
	primary := scripted(t, cnt, func(_ int, w http.ResponseWriter, r *http.Request) {
		if down.Load() {
			w.WriteHeader(503)
			return
		}
		okChat(w, r)
	})
	fb := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			fallback backup
			retries 0
			breaker 3 1s
		}
		engine backup {
			to %s
			models backup
		}`, primary, fb.URL))
	for i := range 10 {
		resp, body := post(t, "/v1/chat/completions", `{"model":"big"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "backup" {
			t.Fatalf("request %d during the outage: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	if got := cnt.n(); got != 3 {
		t.Fatalf("the primary saw %d requests during its outage, want 3 (then the breaker opened)", got)
	}
	if s := status(t, "primary"); s.Breaker != "open" {
		t.Fatalf("breaker %s", s.Breaker)
	}
	down.Store(false)
	recovered := time.Now()
	for {
		resp, _ := post(t, "/v1/chat/completions", `{"model":"big"}`)
		if resp.Header.Get("X-LLM-Engine") == "primary" {
			break
		}
		if time.Since(recovered) > 15*time.Second {
			t.Fatal("the primary did not get its traffic back long after its cool-down")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if s := status(t, "primary"); s.Breaker != "closed" {
		t.Fatalf("breaker %s after a good trial", s.Breaker)
	}
}

func TestOpenBreakerWithoutFallbackAnswers503AtOnce(t *testing.T) {
	cnt := &counter{}
	primary := scripted(t, cnt, func(_ int, w http.ResponseWriter, r *http.Request) { w.WriteHeader(502) })
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			retries 0
			breaker 1 1m
		}`, primary))
	post(t, "/v1/chat/completions", `{"model":"big"}`)
	resp, body := post(t, "/v1/chat/completions", `{"model":"big"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "breaker") || cnt.n() != 1 {
		t.Fatalf("%d %s (%d upstream hits)", resp.StatusCode, body, cnt.n())
	}
}

func TestAnswerThatStallsAfterItsHeadersIsCutWithinTheIdleBudget(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Content-Length", "200")
		io.WriteString(w, `{"id":"c1","object":"chat.completion",`)
		w.(http.Flusher).Flush()
		<-r.Context().Done()
	})
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			stream_idle_timeout 300ms
		}`, up.URL))
	start := time.Now()
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("big", "hi"))
	if err == nil {
		t.Fatal("a stalled answer came back as a success")
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a stalled answer held the request %s with a 300ms budget", took)
	}
}
