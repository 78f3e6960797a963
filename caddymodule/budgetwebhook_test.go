package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// budget_webhook through Caddy: a key's token budget passing 50, 80 and
// 100 % is POSTed to a receiver on 127.0.0.1 once each, by the key's name,
// never its token, each with what was used of what.
func TestABudgetsThresholdsArePostedToTheWebhook(t *testing.T) {
	posted := make(chan string, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		posted <- string(b)
	}))
	defer recv.Close()
	// 40 tokens an answer, more than a request reserves: the fifth answer
	// takes the budget to 100 % (120 50 %, 160 80 %, 200 100 %)
	up := newRecorder(t, func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":7,"completion_tokens":33,"total_tokens":40}}`)
	})
	name := fmt.Sprintf("hook-%d", time.Now().UnixNano()) // the counters outlive a test
	token := "sk-" + name
	startGateway(t, fmt.Sprintf(`
		budget_webhook %s/hook {
			timeout 5s
			queue 16
		}
		key %s %s {
			tokens 200/d
		}
		engine e {
			to %s
			models m
		}`, recv.URL, name, token, up.URL))
	for i := range 5 {
		if resp, body := post(t, "/v1/chat/completions", `{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+token); resp.StatusCode != 200 {
			t.Fatalf("request %d: %d %s", i, resp.StatusCode, body)
		}
	}
	var got []string
	for len(got) < 3 {
		select {
		case b := <-posted:
			if strings.Contains(b, token) {
				t.Fatalf("the webhook was sent the key's token: %s", b)
			}
			var ev struct {
				Event, Key, Kind, Window string
				Used, Limit              int64
				Percent                  int
			}
			if err := json.Unmarshal([]byte(b), &ev); err != nil {
				t.Fatalf("%v: %s", err, b)
			}
			got = append(got, fmt.Sprintf("%s %s %s %s %d/%d %d%%", ev.Event, ev.Key, ev.Kind, ev.Window, ev.Used, ev.Limit, ev.Percent))
		case <-time.After(30 * time.Second):
			t.Fatalf("the webhook received %d crossings: %q", len(got), got)
		}
	}
	want := []string{
		"budget_threshold " + name + " tokens d 120/200 50%",
		"budget_threshold " + name + " tokens d 160/200 80%",
		"budget_threshold " + name + " tokens d 200/200 100%",
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("posted %q\nwant   %q", got, want)
	}
}
