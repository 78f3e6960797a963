package handler

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The fixtures the handler's tests share. Decisions below Caddy: a Gateway
// built from engines.New over httptest upstreams, served by an httptest
// server on 127.0.0.1.

// benchChunk is one chunk of an OpenAI stream as the API sends it.
var benchChunk = []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}` + "\n\n")

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

// chunk is one streamed chat chunk carrying text.
func chunk(id, text string) string {
	b, _ := json.Marshal(text)
	return `data: {"id":"` + id + `","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"content":` + string(b) + `},"finish_reason":null}]}` + "\n\n"
}

// loggingUpstream is an upstream on 127.0.0.1 that logs one line per
// request (what line makes of it and its body) and answers with respond;
// lines returns the log so far.
func loggingUpstream(t *testing.T, line func(r *http.Request, body []byte) string, respond http.HandlerFunc) (url string, lines func() []string) {
	var mu sync.Mutex
	var log []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, line(r, b))
		mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(up.Close)
	return up.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func answerJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

// multipartBody is an upload as the OpenAI SDKs send it: fields and a file.
func multipartBody(t *testing.T, fields [][2]string, file []byte) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "speech.wav")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
}

// drain empties served of earlier requests' results.
func drain() {
	for {
		select {
		case <-served:
		default:
			return
		}
	}
}

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

const (
	teamKey  = "team-a-key-0123456789"
	otherKey = "other-key-0123456789ab"
)

func limits(t *testing.T, specs ...string) []quota.Limit {
	t.Helper()
	var out []quota.Limit
	for _, s := range specs {
		l, err := quota.ParseLimit(s)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l)
	}
	return out
}

// budgetGateway serves cfg with an in-memory limiter on clock.
func budgetGateway(t *testing.T, cfg config.Config, clock *clock.Fake) string {
	t.Helper()
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	lim, err := quota.Open(quota.Config{Clock: clock})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	g, url := testGateway(t, cfg, clock)
	g.SetLimiter(lim)
	return url
}

// usageEngine answers chat completions, streamed or not, reporting usage
// of tokens per answer; it records the bodies it was sent.
type usageEngine struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []string
}

func newUsageEngine(t *testing.T, name string, tokens int) *usageEngine {
	e := &usageEngine{}
	e.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.bodies = append(e.bodies, string(b))
		e.mu.Unlock()
		usage := fmt.Sprintf(`{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, tokens/2, tokens-tokens/2, tokens)
		if !strings.Contains(string(b), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			w.Header().Set("X-Ratelimit-Limit-Requests", "999999") // the engine's own, not the caller's
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"from %s"}}],"usage":%s}`, name, name, usage)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from %s\"},\"finish_reason\":null}]}\n\n", name)
		fmt.Fprint(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n")
		if strings.Contains(string(b), `"include_usage":true`) {
			fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"choices\":[],\"usage\":%s}\n\n", usage)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(e.Close)
	return e
}

func (e *usageEngine) calls() int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.bodies)
}

// laxUpstream is a laxengine on 127.0.0.1.
func laxUpstream(t *testing.T) (*laxengine.Engine, string) {
	e := &laxengine.Engine{}
	srv := httptest.NewServer(e)
	t.Cleanup(srv.Close)
	return e, srv.URL
}
