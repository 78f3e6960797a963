package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// benchGateway serves a gateway over httptest in front of an upstream that
// answers a 50-chunk stream (the number in X-Bench-Chunks, when given) or a
// small JSON completion.
func benchGateway(b *testing.B) *httptest.Server { return benchGatewayHedged(b, false) }

// benchGatewayHedged is benchGateway, its engine hedged after 1s to a
// fallback on the same upstream when hedge is true: what hedging costs a
// healthy engine's requests, which are never hedged.
func benchGatewayHedged(b *testing.B, hedge bool) *httptest.Server {
	up := benchUpstream(b)
	cfgs := []engines.Config{{Name: "up", To: up.URL, Models: []string{"m"}}}
	if hedge {
		cfgs[0].Fallback, cfgs[0].Hedge = "up2", &engines.Hedge{After: caddy.Duration(time.Second)}
		cfgs = append(cfgs, engines.Config{Name: "up2", To: up.URL, Models: []string{"m2"}})
	}
	return benchServe(b, cfgs)
}

// benchGatewayHedging serves a gateway whose engine never answers: every
// request is hedged after 1ms (a budget of 100%) to its fallback, which
// answers, and the engine's attempt loses. What a hedged request costs.
func benchGatewayHedging(b *testing.B) *httptest.Server {
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	b.Cleanup(silent.Close)
	up := benchUpstream(b)
	return benchServe(b, []engines.Config{
		{Name: "up", To: silent.URL, Models: []string{"m"}, Fallback: "up2",
			Hedge: &engines.Hedge{After: caddy.Duration(time.Millisecond), Budget: 1}},
		{Name: "up2", To: up.URL, Models: []string{"m2"}},
	})
}

// benchUpstream answers a 50-chunk stream (the number in X-Bench-Chunks,
// when given) or a small JSON completion.
func benchUpstream(b *testing.B) *httptest.Server {
	stream := bytes.Repeat(benchChunk, 50)
	stream = append(stream, "data: [DONE]\n\n"...)
	streams := map[int][]byte{}
	for _, n := range []int{50, 1050} {
		streams[n] = append(bytes.Repeat(benchChunk, n), "data: [DONE]\n\n"...)
	}
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
			if n, err := strconv.Atoi(r.Header.Get("X-Bench-Chunks")); err == nil {
				w.Write(streams[n])
				return
			}
			w.Write(stream)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`)
	}))
	b.Cleanup(up.Close)
	return up
}

// benchServe serves a gateway of cfgs over httptest.
func benchServe(b *testing.B, cfgs []engines.Config) *httptest.Server {
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	var es []*engines.Engine
	for _, c := range cfgs {
		e, err := engines.New(c, tr, zap.NewNop())
		if err != nil {
			b.Fatal(err)
		}
		es = append(es, e)
		cfgs[len(es)-1] = e.Config()
	}
	g, err := New(config.Config{Engines: cfgs}, es, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.ServeHTTP(w, r, &Result{}) }))
	b.Cleanup(func() {
		srv.Close()
		for _, e := range es {
			e.Destruct()
		}
		tr.CloseIdleConnections()
	})
	return srv
}

func benchRequests(b *testing.B, body string) { benchRequestsTo(b, benchGateway(b), body) }

func benchRequestsTo(b *testing.B, srv *httptest.Server, body string) {
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := client.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(body))
			if err != nil {
				b.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 {
				b.Fatal(resp.Status)
			}
		}
	})
}

// BenchmarkGatewayStream is one 50-chunk streamed completion through the
// gateway, client and upstream included.
func BenchmarkGatewayStream(b *testing.B) {
	benchRequests(b, `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkGatewayJSON is one non-streaming completion through the gateway.
func BenchmarkGatewayJSON(b *testing.B) {
	benchRequests(b, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkGatewayStreamHedgeOn is BenchmarkGatewayStream with hedging on
// (hedge_after 1s to a fallback): the race's cost on a healthy engine.
func BenchmarkGatewayStreamHedgeOn(b *testing.B) {
	benchRequestsTo(b, benchGatewayHedged(b, true), `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkGatewayJSONHedgeOn is BenchmarkGatewayJSON with hedging on.
func BenchmarkGatewayJSONHedgeOn(b *testing.B) {
	benchRequestsTo(b, benchGatewayHedged(b, true), `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkGatewayStreamHedged is one streamed completion that is hedged:
// its engine says nothing, the fallback starts beside it after 1ms and
// answers, the engine's attempt is cancelled.
func BenchmarkGatewayStreamHedged(b *testing.B) {
	benchRequestsTo(b, benchGatewayHedging(b), `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
}

// BenchmarkGatewayJSONHedged is BenchmarkGatewayStreamHedged without a
// stream.
func BenchmarkGatewayJSONHedged(b *testing.B) {
	benchRequestsTo(b, benchGatewayHedging(b), `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
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

func TestFilterPathsTheGatewayReadsAreRefused(t *testing.T) {
	for _, p := range []string{"model", "Stream", "fallbacks", "a..b", ""} {
		c := engines.Config{Name: "e", Strip: []string{p}}
		if c.ValidateFilters() == nil {
			t.Errorf("strip %q accepted", p)
		}
	}
	c := engines.Config{Name: "e", Set: []engines.BodySetting{{Path: "reasoning_effort", Value: json.RawMessage(`low`)}}}
	if err := c.ValidateFilters(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("%v", err)
	}
}
