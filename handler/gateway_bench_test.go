package handler

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// benchGateway serves a gateway over httptest in front of an upstream that
// answers a 50-chunk stream (the number in X-Bench-Chunks, when given) or a
// small JSON completion.
func benchGateway(b *testing.B) *httptest.Server {
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
	tr := &http.Transport{MaxIdleConnsPerHost: 64}
	e, err := engines.New(engines.Config{Name: "up", To: up.URL, Models: []string{"m"}}, tr, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	g, err := New(config.Config{Engines: []engines.Config{e.Config()}}, []*engines.Engine{e}, zap.NewNop())
	if err != nil {
		b.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { g.ServeHTTP(w, r, &Result{}) }))
	b.Cleanup(func() { srv.Close(); e.Destruct(); tr.CloseIdleConnections() })
	return srv
}

func benchRequests(b *testing.B, body string) {
	srv := benchGateway(b)
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

// BenchmarkRelayPerEvent is what one more event of a committed stream
// costs the gateway: streams of 1,050 chunks against streams of 50 (the
// upstream, the client and the request's own cost cancel out), in
// allocations and bytes per event. Issue 30: none.
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
