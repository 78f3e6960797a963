package caddymodule

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
)

func historyPage(t *testing.T, query string) history.Page {
	t.Helper()
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/requests"+query))
	if resp.StatusCode != 200 {
		t.Fatalf("requests%s: %d %s", query, resp.StatusCode, body)
	}
	var p history.Page
	if err := json.Unmarshal([]byte(body), &p); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return p
}

// syncHistory waits until the requests answered so far are written.
func syncHistory(t *testing.T) {
	t.Helper()
	st := newestHistory()
	if st == nil {
		t.Fatal("no live history")
	}
	st.Sync()
}

func TestHistoryKeepsEachRequestsStoryAcrossARestart(t *testing.T) {
	// this run's requests: the history outlives a test (-count=2)
	since := fmt.Sprint("&since=", time.Now().UnixMilli())
	up := newRecorder(t, okChat)
	gateway := fmt.Sprintf(`
		key team-history history-key-000001
		engine gpu {
			to %s
			models hist-qwen
		}`, up.URL)
	startGateway(t, gateway)
	resp, body := post(t, "/v1/chat/completions", `{"model":"hist-qwen","messages":[{"role":"user","content":"a secret prompt"}]}`,
		"Authorization", "Bearer history-key-000001", "User-Agent", "history-test/1.0", "X-Session-Id", "session-42")
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	post(t, "/v1/chat/completions", `{"model":"hist-unknown"}`, "Authorization", "Bearer history-key-000001")
	syncHistory(t)

	p := historyPage(t, "?model=hist-qwen"+since)
	if len(p.Requests) != 1 || p.Stored != "file" || p.Keep != history.DefaultKeep {
		t.Fatalf("page %+v", p)
	}
	r := p.Requests[0]
	if r.Key != "team-history" || r.Client != "127.0.0.1" || r.UserAgent != "history-test/1.0" || r.Session != "session-42" ||
		r.Engine != "gpu" || r.Status != 200 || r.Path != "/v1/chat/completions" || len(r.Tries) != 1 ||
		r.Tries[0].Reason != "ok" || r.Tries[0].Address != strings.TrimPrefix(up.URL, "http://") || r.Tries[0].Scope != "" {
		t.Fatalf("record %+v", r)
	}
	if p := historyPage(t, "?model=hist-unknown&status=4xx"+since); len(p.Requests) != 1 || p.Requests[0].Status != 404 || p.Requests[0].Reason != "model_not_found" {
		t.Fatalf("the refused request: %+v", p.Requests)
	}

	// a restart: the config goes (the file is closed), a new one comes
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")
	if st := newestHistory(); st != nil {
		t.Fatalf("a history is still live without a gateway")
	}
	startGateway(t, gateway)
	p = historyPage(t, "?model=hist-qwen&key=team-history"+since)
	if len(p.Requests) != 1 || p.Requests[0].Session != "session-42" {
		t.Fatalf("after a restart: %+v", p.Requests)
	}

	// the export: JSON lines, no key and no prompt anywhere
	for _, ask := range []func(*http.Request){
		func(r *http.Request) { r.URL.RawQuery = "format=jsonl&model=hist-qwen" + since },
		func(r *http.Request) {
			r.URL.RawQuery = "model=hist-qwen" + since
			r.Header.Set("Accept", "application/x-ndjson")
		},
	} {
		req := mustReq(http.MethodGet, adminURL+"/llm_gateway/requests")
		ask(req)
		resp, body := do(t, req)
		lines := strings.Split(strings.TrimSpace(body), "\n")
		if resp.Header.Get("Content-Type") != "application/x-ndjson" || len(lines) != 1 || !strings.Contains(lines[0], `"session":"session-42"`) {
			t.Fatalf("export: %v %q", resp.Header, body)
		}
		if strings.Contains(body, "history-key-000001") || strings.Contains(body, "secret prompt") {
			t.Fatalf("the export holds a key or a prompt: %s", body)
		}
	}
	resp, body = do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/requests?status=6xx"))
	if resp.StatusCode != 400 || !strings.Contains(body, "want a status") {
		t.Fatalf("a bad filter: %d %s", resp.StatusCode, body)
	}
}

func TestHistoryOffKeepsNothing(t *testing.T) {
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		history off
		engine gpu {
			to %s
			models hist-off
		}`, up.URL))
	post(t, "/v1/chat/completions", `{"model":"hist-off"}`)
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/requests"))
	if resp.StatusCode != 404 || !strings.Contains(body, "history off") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
}

func TestHistoryInMemoryHasTheSameLimits(t *testing.T) {
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		history {
			keep 2
			memory
		}
		engine gpu {
			to %s
			models hist-mem
		}`, up.URL))
	for range 3 {
		post(t, "/v1/chat/completions", `{"model":"hist-mem"}`)
	}
	syncHistory(t)
	p := historyPage(t, "")
	if p.Stored != "memory" || p.Keep != 2 || len(p.Requests) != 2 || p.Requests[0].Seq != 3 {
		t.Fatalf("%+v", p)
	}
}

// BenchmarkKeepStory is the history's cost on the request path: the record
// made from the result and handed to the writer. At most 2 µs.
func BenchmarkKeepStory(b *testing.B) {
	st, err := history.Open(history.Options{Path: b.TempDir() + "/quota.db"})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	w := httptest.NewRecorder()
	w.Header().Set("Content-Type", "text/event-stream")
	r.Header.Set("User-Agent", "OpenAI/Python 1.99.0")
	r.Header.Set("X-Session-Id", "s-1")
	now := time.Now()
	res := &handler.Result{Engine: "gpu", ModelAsked: "qwen", ModelSent: "qwen", Attempts: 2, KeyName: "team", Status: 200,
		TTFB: 120 * time.Millisecond, Duration: time.Second, HasUsage: true, Usage: api.Usage{Input: 30, Output: 200},
		Tries: []handler.Try{
			{Engine: "gpu", Model: "qwen", Start: now.Add(-time.Second), End: now.Add(-900 * time.Millisecond), Reason: "slow", Scope: "engine"},
			{Engine: "cpu", Model: "qwen", Address: "127.0.0.1:8081", Start: now.Add(-900 * time.Millisecond), End: now, Reason: "ok", Status: 200},
		}}
	b.ReportAllocs()
	for b.Loop() {
		keepStory(st, w, r, res, now)
	}
}
