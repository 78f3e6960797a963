package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/providers/bedrock"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
	"github.com/llmgateway/caddy-llm-gateway/providers/openai"
)

// cloudUpstream is a cloud on 127.0.0.1: it answers no GET /health (404,
// as every cloud does), and each request as status says, counting them.
func cloudUpstream(t *testing.T, status func() int, body string) (*httptest.Server, *atomic.Int32) {
	var n atomic.Int32
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodGet {
			http.NotFound(w, r)
			return
		}
		n.Add(1)
		if st := status(); st != http.StatusOK {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(st)
			io.WriteString(w, body)
			return
		}
		answerOK(w, "cloud")
	}))
	t.Cleanup(s.Close)
	return s, &n
}

// A provider's engine's state is its answers: failing after a failure it
// answered, ready after a good answer, with the last one in its status.
func TestAProvidersAnswersAreItsState(t *testing.T) {
	var status atomic.Int32
	status.Store(http.StatusServiceUnavailable)
	up, _ := cloudUpstream(t, func() int { return int(status.Load()) }, `{"error":{"message":"busy"}}`)
	zero := 0
	g, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "oai", Provider: new(openai.OpenAI), To: up.URL, APIKey: "sk-cloud-0123456789", Models: []string{"gpt"}, Retries: &zero},
	}}, nil)
	eng := g.byName["oai"].eng
	if st := eng.Status(); st.State != "ready" || st.Provider.LastAnswer != nil {
		t.Fatalf("before any answer: %s %+v", st.State, st.Provider)
	}
	if resp, body := postJSON(t, url, `{"model":"gpt","messages":[]}`); resp.StatusCode != 503 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if st := eng.Status(); st.State != "failing" || st.Provider.LastAnswer.Status != 503 || !st.Provider.LastAnswer.Failed {
		t.Fatalf("after a 503: %s %+v", st.State, st.Provider.LastAnswer)
	}
	status.Store(http.StatusOK)
	if resp, body := postJSON(t, url, `{"model":"gpt","messages":[]}`); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if st := eng.Status(); st.State != "ready" || st.Provider.LastAnswer.Status != 200 || st.Provider.LastAnswer.Reason != "ok" {
		t.Fatalf("after a 200: %s %+v", st.State, st.Provider.LastAnswer)
	}
}

// A request queued on a busy engine goes to its cloud fallback after
// fallback_after: the fallback is asked nothing first (no cloud answers
// GET /health, which kept such a request waiting for its own engine).
func TestAQueuedRequestGoesToItsCloudFallback(t *testing.T) {
	clock := clock.NewFake()
	gpu := newHeldEngine(t)
	cloud, sent := cloudUpstream(t, func() int { return http.StatusOK }, "")
	g, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "gpu", To: gpu.URL, Models: []string{"m"}, Fallback: "cloud", MaxConcurrent: 1, Queue: 1},
		{Name: "cloud", Provider: new(openai.OpenAI), To: cloud.URL, APIKey: "sk-cloud-0123456789", Models: []string{"gpt"}},
	}}, clock)
	first := holdOne(t, gpu, url)
	defer func() { gpu.free(); <-first }()
	done := postLater(t, url, `{"model":"m"}`)
	clock.WaitForTimers(4) // queued: its keep-alive, fallback_after and queue timeout
	clock.Advance(10 * time.Second)
	a := <-done
	if a.resp.StatusCode != 200 || a.resp.Header.Get("X-LLM-Fallback") != "cloud" || sent.Load() != 1 {
		t.Fatalf("%d %v %s, the cloud sent %d", a.resp.StatusCode, a.resp.Header, a.body, sent.Load())
	}
	if st := g.byName["cloud"].eng.Status(); st.State != "ready" {
		t.Fatalf("the cloud fallback: %s", st.State)
	}
}

// A provider reads its failures in its own words: Google's 429 asks for
// its wait in a RetryInfo detail (60 s, past retry_after_max: no retry
// here, the fallback at once), and Bedrock's 424, a model's own failure,
// is a 500 to the table (retried, then the fallback).
func TestAProviderReadsItsOwnFailures(t *testing.T) {
	for _, c := range []struct {
		name   string
		cfg    engines.Config
		status int
		body   string
		sent   int32 // requests the cloud was sent: 1 moved on at once, 2 retried once
	}{
		{"gemini 429 RetryInfo 60s", engines.Config{Provider: new(gemini.Gemini), APIKey: "AIza-0123456789"}, 429,
			`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"60s"}]}}`, 1},
		{"bedrock 424", engines.Config{Provider: &bedrock.Bedrock{Region: "us-east-1"}, APIKey: "bedrock-api-key-0123"}, 424,
			`{"message":"The model failed"}`, 2},
	} {
		t.Run(c.name, func(t *testing.T) {
			cloud, sent := cloudUpstream(t, func() int { return c.status }, c.body)
			local := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "local") }))
			defer local.Close()
			ec := c.cfg
			ec.Name, ec.To, ec.Models, ec.Fallback = "cloud", cloud.URL, []string{"m"}, "local"
			_, url := testGateway(t, config.Config{Engines: []engines.Config{ec, {Name: "local", To: local.URL, Models: []string{"l"}}}}, nil)
			resp, body := postJSON(t, url, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
			if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Fallback") != "local" || sent.Load() != c.sent {
				t.Fatalf("%d %s: the cloud was sent %d, want %d", resp.StatusCode, body, sent.Load(), c.sent)
			}
			tries := lastResult.Load().Tries
			if len(tries) == 0 || tries[0].Status != c.status {
				t.Fatalf("tries %+v", tries)
			}
		})
	}
}
