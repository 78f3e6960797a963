package handler

import (
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

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
