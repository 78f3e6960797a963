package handler

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

func TestAStreamWaitingForItsFirstTokenGetsThePreambleAndKeepAlives(t *testing.T) {
	clock := clock.NewFake()
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.ReadAll(r.Body)
		close(arrived)
		<-release // minutes of prompt processing
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("c1", "hello")+`data: {"id":"c1","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}))
	t.Cleanup(up.Close)
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}, clock)
	// registered last, so run first: a failed assertion before free below
	// releases the upstream before either server's Close waits for it
	t.Cleanup(free)

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
	free()
	rest, err := io.ReadAll(r)
	if err != nil || !strings.Contains(string(rest), "hello") || !strings.HasSuffix(string(rest), "data: [DONE]\n\n") {
		t.Fatalf("%v %q", err, rest)
	}
}
