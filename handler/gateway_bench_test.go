package handler

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// benchGateway serves a gateway over httptest in front of an upstream that
// answers a 50-chunk stream or a small JSON completion.
func benchGateway(b *testing.B) *httptest.Server {
	stream := bytes.Repeat(benchChunk, 50)
	stream = append(stream, "data: [DONE]\n\n"...)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if bytes.Contains(body, []byte(`"stream":true`)) {
			w.Header().Set("Content-Type", "text/event-stream")
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
