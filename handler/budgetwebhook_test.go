package handler

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// Each crossing is POSTed once as JSON: names, the budget's kind and
// window, used and limit (dollars for a money budget), the percent.
func TestTheBudgetWebhookPostsEachCrossingAsJSON(t *testing.T) {
	got := make(chan map[string]any, 4)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var ev map[string]any
		if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" || json.NewDecoder(r.Body).Decode(&ev) != nil {
			t.Errorf("%s %s", r.Method, r.Header.Get("Content-Type"))
		}
		got <- ev
	}))
	defer recv.Close()
	w := newBudgetWebhook(&config.BudgetWebhook{URL: recv.URL}, zap.NewNop())
	defer w.close()
	reset := time.Date(2026, 12, 8, 0, 0, 0, 0, time.UTC)
	w.send("key", "alice", quota.Crossing{Kind: quota.Spend, Limit: quota.Limit{N: 1_000_000_000, Window: quota.Day}, Percent: 80, Used: 805_000_000, Reset: reset}, reset.Add(-time.Hour))
	w.send("team", "eng", quota.Crossing{Kind: quota.Tokens, Limit: quota.Limit{N: 200_000, Window: quota.Month}, Percent: 100, Used: 200_010, Reset: reset}, reset.Add(-time.Hour))
	for _, want := range []string{
		`{"event":"budget_threshold","key":"alice","kind":"spend","window":"d","used":0.805,"limit":1,"percent":80,"resets":"2026-12-08T00:00:00Z","time":"2026-12-07T23:00:00Z"}`,
		`{"event":"budget_threshold","team":"eng","kind":"tokens","window":"mo","used":200010,"limit":200000,"percent":100,"resets":"2026-12-08T00:00:00Z","time":"2026-12-07T23:00:00Z"}`,
	} {
		ev := <-got
		b, _ := json.Marshal(ev)
		var w map[string]any
		_ = json.Unmarshal([]byte(want), &w)
		wb, _ := json.Marshal(w)
		if string(b) != string(wb) {
			t.Errorf("posted %s\nwant    %s", b, wb)
		}
	}
}

// A receiver that hangs: each POST ends at the timeout and is not tried
// again; past the queue's room a crossing is dropped and logged; the
// config let go of does not wait for the receiver.
func TestTheBudgetWebhookIsBoundedAndNeverRetries(t *testing.T) {
	var posts atomic.Int32
	arrived := make(chan struct{}, 8)
	release := make(chan struct{})
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		posts.Add(1)
		_, _ = io.ReadAll(r.Body)
		arrived <- struct{}{}
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer recv.Close()
	defer close(release)
	core, logs := observer.New(zap.WarnLevel)
	w := newBudgetWebhook(&config.BudgetWebhook{URL: recv.URL, Queue: 1, Timeout: caddy.Duration(time.Hour)}, zap.New(core))
	c := quota.Crossing{Kind: quota.Tokens, Limit: quota.Limit{N: 100, Window: quota.Day}, Percent: 50, Used: 50}
	w.send("key", "alice", c, time.Now())
	<-arrived                             // the first is being posted, and hangs
	w.send("key", "alice", c, time.Now()) // waits in the queue
	w.send("key", "alice", c, time.Now()) // no room: dropped
	if n := logs.FilterMessageSnippet("queue is full").Len(); n != 1 {
		t.Fatalf("%d drops logged, want 1", n)
	}
	w.close() // does not wait out the hanging POST
	if n := posts.Load(); n != 1 {
		t.Fatalf("%d posts, want 1 (the queued one is dropped with the config)", n)
	}

	// the timeout: a POST that outlasts it fails, is logged, and is not retried
	core, logs = observer.New(zap.WarnLevel)
	w = newBudgetWebhook(&config.BudgetWebhook{URL: recv.URL, Timeout: caddy.Duration(50 * time.Millisecond)}, zap.New(core))
	defer w.close()
	w.send("key", "bob", c, time.Now())
	<-arrived
	for logs.FilterMessageSnippet("the budget webhook failed").Len() == 0 {
		time.Sleep(5 * time.Millisecond) // awaiting the log line; the timeout is the sender's
	}
	w.send("key", "bob", c, time.Now()) // the sender goes on with the next crossing
	<-arrived
	if n := posts.Load(); n != 3 {
		t.Fatalf("%d posts, want 3: the failed one was tried again", n)
	}
}
