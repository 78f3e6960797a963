package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The story whole, through Caddy: a hedged request and a stream cut after
// content are told as they happened in the history (the hedge, the loser
// and how long it ran after the win; the cut, why, and what the client had
// been sent), and what the key's budget was charged for them, the answers'
// usage, the hedge's loser and the cut stream's reservation, is what
// llm_gateway_key_tokens_total counts for the key, kind by kind.
func TestTheHistoryAndTheMetricsTellWhatTheKeyWasCharged(t *testing.T) {
	const key = "story-key-0123456789"
	since := fmt.Sprint("&since=", time.Now().UnixMilli())
	silent := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fast := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { okChatUsage(w) })
	cutter := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		// content, then the body ends without a finish or [DONE]: a cut
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"half an ans"},"finish_reason":null}]}`+"\n\n")
	})
	startGateway(t, `
		key story `+key+` {
			tokens 100k/d
		}
		engine story-slow {
			to `+silent.URL+`
			models story-hedged
			fallback story-fast
			hedge_after 200ms
		}
		engine story-fast {
			to `+fast.URL+`
			models story-fast
		}
		engine story-cutter {
			to `+cutter.URL+`
			models story-cut
		}`)
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/story/reset")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	before := scrape(t)
	auth := []string{"Authorization", "Bearer " + key}
	if resp, body := post(t, "/v1/chat/completions", `{"model":"story-fast","max_tokens":20,"messages":[{"role":"user","content":"hi"}]}`, auth...); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, "/v1/chat/completions", `{"model":"story-hedged","max_tokens":20,"messages":[{"role":"user","content":"`+strings.Repeat("word ", 100)+`"}]}`, auth...); resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "story-fast" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	req := mustReq(http.MethodPost, gwURL+"/v1/chat/completions")
	req.Body = io.NopCloser(strings.NewReader(`{"model":"story-cut","stream":true,"max_tokens":30,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+key)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err == nil || !strings.Contains(string(body), "upstream_stream_cut") {
		t.Fatalf("the cut stream ended whole (%v): %s", err, body)
	}

	// the history
	syncHistory(t)
	hedged := historyPage(t, "?model=story-hedged"+since).Requests
	if len(hedged) != 1 {
		t.Fatalf("hedged requests: %+v", hedged)
	}
	tries := hedged[0].Tries
	if len(tries) != 2 || tries[0].Engine != "story-fast" || !tries[0].Hedge || tries[0].Reason != "ok" ||
		tries[1].Engine != "story-slow" || tries[1].Reason != "lost" || tries[1].Hedge || tries[1].LostForMs <= 0 {
		t.Fatalf("the hedged request's tries: %+v", tries)
	}
	cut := historyPage(t, "?model=story-cut"+since).Requests
	if len(cut) != 1 || cut[0].Status != 200 || cut[0].Cut != "closed" || cut[0].Reason != "cut closed" || cut[0].RelayedBytes <= 0 || cut[0].TokensIn != -1 {
		t.Fatalf("the cut request: %+v", cut)
	}

	// the key's used, and what the metrics say it was charged
	_, listing := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys"))
	var keys []struct {
		Key    string `json:"key"`
		Limits []struct {
			Kind string `json:"kind"`
			Used int64  `json:"used"`
		} `json:"limits"`
	}
	if err := json.Unmarshal([]byte(listing), &keys); err != nil {
		t.Fatalf("%v: %s", err, listing)
	}
	used := int64(-1)
	for _, k := range keys {
		for _, l := range k.Limits {
			if k.Key == "story" && l.Kind == "tokens" {
				used = l.Used
			}
		}
	}
	after := scrape(t)
	charged := map[string]float64{}
	var sum float64
	for _, kind := range []string{"prompt", "completion", "hedge_prompt", "hedge_completion", "estimate"} {
		labels := `key="story",kind="` + kind + `"`
		charged[kind] = sample(t, after, "llm_gateway_key_tokens_total", labels) - sample(t, before, "llm_gateway_key_tokens_total", labels)
		sum += charged[kind]
	}
	if used <= 0 || sum != float64(used) || charged["hedge_prompt"] == 0 || charged["estimate"] == 0 {
		t.Fatalf("the key's used %d, the metrics %v (sum %v)\n%s", used, charged, sum, grepLines(after, "key_tokens"))
	}
}

// The status page's history shows a hedge (the hedge's attempt, the loser
// and how long it ran after the win) and a cut answer (why, and how much
// the client had of it).
func TestTheStatusPageShowsAHedgeAndACutInARealBrowser(t *testing.T) {
	ctx := browser(t)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36) // this run's: the history outlives a test
	hedged, cut := "sp-hedged-"+suffix, "sp-cut-"+suffix
	silent := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	fast := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { okChatUsage(w) })
	cutter := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"content":"half"},"finish_reason":null}]}`+"\n\n")
	})
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		ui /llm
		engine sp-slow {
			to %s
			models %s
			fallback sp-fast
			hedge_after 100ms
		}
		engine sp-fast {
			to %s
			models sp-fast
		}
		engine sp-cutter {
			to %s
			models %s
		}`, silent.URL, hedged, fast.URL, cutter.URL, cut))
	if resp, body := post(t, "/v1/chat/completions", `{"model":"`+hedged+`"}`, "Authorization", "Bearer "+uiKey); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if _, err := readStream(sdk(uiKey).Chat.Completions.NewStreaming(t.Context(), chatParams(cut, "hi"))); err == nil {
		t.Fatal("the cut stream ended whole")
	}
	syncHistory(t)

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	row := func(model string) string {
		return `[...document.querySelectorAll('#history tbody tr')].find((r) => r.querySelector('.model').textContent === '` + model + `')`
	}
	untilTrue(t, ctx, "the history rows", row(hedged)+` !== undefined && `+row(cut)+` !== undefined`)
	if got := eval[string](t, ctx, row(hedged)+`.querySelector('.tries').textContent`); !strings.HasPrefix(got, "sp-fast ok (hedge) → sp-slow lost (ran ") ||
		!strings.HasSuffix(got, " after the win)") {
		t.Fatalf("the hedged request's attempts: %q", got)
	}
	if got := eval[string](t, ctx, row(cut)+`.querySelector('.status').textContent`); !strings.HasPrefix(got, "200 cut closed after ") || !strings.HasSuffix(got, " B") {
		t.Fatalf("the cut request's status: %q", got)
	}
}
