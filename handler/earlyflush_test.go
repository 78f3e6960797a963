package handler

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// wrapped hides what the writer can do but write and unwrap, as Caddy's
// response writer wrappers do.
type wrapped struct{ http.ResponseWriter }

func (w wrapped) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// A JSON answer of a known length reaches the client whole before the
// handler returns, once the attempt is closed and the key charged: what
// the caddy module does then (the history, the metrics, the trace) is not
// on the request's latency. Here the handler does not return until the client has read the
// answer; without the flush, net/http would hold the answer's bytes until
// it did, and the handler would wait in vain.
func TestAJSONAnswerIsSentBeforeTheBookkeeping(t *testing.T) {
	const answer = `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, answer) // small and whole: net/http sets Content-Length
	}))
	t.Cleanup(up.Close)
	tr := &http.Transport{}
	t.Cleanup(tr.CloseIdleConnections)
	e, err := engines.New(engines.Config{Name: "up", To: up.URL, Models: []string{"m"}}, tr, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Destruct() })
	g, err := New(config.Config{Engines: []engines.Config{e.Config()}}, []*engines.Engine{e}, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	clientHasIt := make(chan struct{})
	handlerWaited := make(chan bool, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		g.ServeHTTP(wrapped{w}, r, &Result{})
		select { // the request's bookkeeping, standing still until the client has the answer
		case <-clientHasIt:
			handlerWaited <- false
		case <-time.After(30 * time.Second):
			handlerWaited <- true
		}
	}))
	t.Cleanup(srv.Close)

	resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"hi"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	close(clientHasIt)
	if err != nil || string(body) != answer || resp.ContentLength != int64(len(answer)) {
		t.Fatalf("answer %d bytes (Content-Length %d), %v: %s", len(body), resp.ContentLength, err, body)
	}
	if <-handlerWaited {
		t.Fatal("the client got the answer only when the handler returned")
	}
}
