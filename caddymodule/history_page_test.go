package caddymodule

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// streamWithUsage streams a short answer at an engine's pace and reports
// its usage in the last chunk, as llama-server does with include_usage.
func streamWithUsage(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	if !strings.Contains(string(body), `"stream":true`) {
		usageChat(w, r)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	for i := range 4 {
		io.WriteString(w, chunk(fmt.Sprint("w", i)))
		w.(http.Flusher).Flush()
		time.Sleep(25 * time.Millisecond) // the engine's pace, not a synchronisation
	}
	io.WriteString(w, `data: {"id":"s1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":20,"total_tokens":25}}`+"\n\ndata: [DONE]\n\n")
}

// The history section: its charts drawn from the history, its
// table filtered by model and status, a failed request with its reason.
func TestStatusPageChartsAndFiltersTheHistoryInARealBrowser(t *testing.T) {
	ctx := browser(t)
	// names of this run's own: the history outlives a test (-count=2)
	suffix := strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	gpu, flaky, down := "hp-gpu-"+suffix, "hp-flaky-"+suffix, "hp-down-"+suffix
	var cnt counter
	failing := scripted(t, &cnt, func(_ int, w http.ResponseWriter, _ *http.Request) {
		http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
	})
	ok := newRecorder(t, streamWithUsage)
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		ui /llm
		engine %[1]s {
			to %[4]s
			models %[1]s
		}
		engine %[2]s {
			to %[5]s
			models %[2]s
			retries 0
		}
		engine %[3]s {
			to http://%[6]s
			models %[3]s
			retries 0
		}`, gpu, flaky, down, ok.URL, failing, freeAddr(t)))
	for range 3 {
		if text, err := readStream(sdk(uiKey).Chat.Completions.NewStreaming(t.Context(), chatParams(gpu, "hi"))); err != nil || text != "w0w1w2w3" {
			t.Fatalf("%v %q", err, text)
		}
	}
	for range 2 {
		if resp, _ := post(t, "/v1/chat/completions", `{"model":"`+flaky+`"}`, "Authorization", "Bearer "+uiKey, "X-Session-Id", "page-session"); resp.StatusCode != 503 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	if resp, body := post(t, "/v1/chat/completions", `{"model":"`+down+`"}`, "Authorization", "Bearer "+uiKey); resp.StatusCode < 500 {
		t.Fatalf("status %d %s", resp.StatusCode, body)
	}
	syncHistory(t)

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	untilTrue(t, ctx, "the history section", `!document.querySelector('#history-section').hidden`)

	// the charts: bars by status, both time-to-first-byte lines, the speed,
	// and each engine
	chart := func(name string) string { return `document.querySelector('#charts [data-chart="` + name + `"]')` }
	untilTrue(t, ctx, "the status bars", chart("requests")+` && `+chart("requests")+`.querySelectorAll('rect.c-ok').length > 0 && `+
		chart("requests")+`.querySelectorAll('rect.c-server').length > 0`)
	untilTrue(t, ctx, "the TTFB lines", chart("ttfb")+`.querySelectorAll('circle.c-p50').length > 0 && `+chart("ttfb")+`.querySelectorAll('circle.c-p95').length > 0`)
	untilTrue(t, ctx, "the speed", chart("speed")+`.querySelectorAll('circle.c-speed').length > 0`)
	untilTrue(t, ctx, "the engines", chart("engines")+`.querySelector('tr[data-engine="`+gpu+`"]') !== null && `+
		chart("engines")+`.querySelector('tr[data-engine="`+flaky+`"]').innerText.split('\t').slice(1, 3).join(' ') === '2 2'`)
	if label := eval[string](t, ctx, chart("requests")+`.querySelector('svg').getAttribute('aria-label')`); !strings.Contains(label, "requests in the last hour") {
		t.Fatalf("the chart's label: %q", label)
	}
	// on a phone's screen the charts and the table fit (the table scrolls in its box)
	run(t, ctx, "a phone's screen", chromedp.EmulateViewport(390, 844))
	until(t, ctx, "the page fitting a phone", `document.documentElement.scrollWidth <= window.innerWidth`)
	run(t, ctx, "back to a wide screen", chromedp.EmulateViewport(1280, 1000))
	run(t, ctx, "the last day", chromedp.Click(chromedp.CSS(`button[data-range="1d"]`)))
	untilTrue(t, ctx, "the day's charts", `document.querySelector('#charts').dataset.range === '1d' && `+chart("requests")+`.querySelectorAll('rect.c-server').length > 0`)

	// the table, filtered: one model, then the failed requests with their reason
	rows := `[...document.querySelectorAll('#history tbody tr')]`
	untilTrue(t, ctx, "the history rows", rows+`.filter((r) => r.querySelector('.model').textContent.endsWith('-`+suffix+`')).length >= 6`)
	run(t, ctx, "filtering by model", chromedp.SendKeys(chromedp.CSS("#hist-model"), flaky), chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
	untilTrue(t, ctx, "only hp-flaky", rows+`.length === 2 && `+rows+`.every((r) => r.querySelector('.model').textContent === '`+flaky+`')`)
	if got := eval[string](t, ctx, rows+`[0].querySelector('.status').textContent + ' | ' + `+rows+`[0].querySelector('.tries').textContent + ' | ' + `+rows+`[0].querySelector('.session').textContent`); got != "503 | "+flaky+" 503 | page-session" {
		t.Fatalf("a failed request's row: %q", got)
	}
	eval[bool](t, ctx, `document.querySelector('#hist-model').value = ''; document.querySelector('#hist-status').value = 'error'; true`)
	run(t, ctx, "only failures", chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
	untilTrue(t, ctx, "only failures", rows+`.length >= 3 && `+rows+`.every((r) => r.classList.contains('bad'))`)
	// this config only: the history keeps what every config that ran served
	// (earlier tests' engines); checked, only this config's engines are tried
	eval[bool](t, ctx, `document.querySelector('#hist-status').value = ''; document.querySelector('#hist-current').checked = true; true`)
	run(t, ctx, "this config only", chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
	ours := `['` + gpu + `', '` + flaky + `', '` + down + `']`
	untilTrue(t, ctx, "only this config's engines", rows+`.length >= 6 && `+rows+`.every((r) => r.querySelector('.tries').textContent === '–' || `+ours+`.some((e) => r.querySelector('.tries').textContent.startsWith(e + ' ')))`)
	eval[bool](t, ctx, `document.querySelector('#hist-current').checked = false; document.querySelector('#hist-status').value = 'error'; true`)
	run(t, ctx, "only failures again", chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
	untilTrue(t, ctx, "only failures again", rows+`.length >= 3 && `+rows+`.every((r) => r.classList.contains('bad'))`)
	// a failure whose status does not say it all shows its reason, here
	// and in the recent list
	reason := `.some((r) => r.querySelector('.model').textContent === '` + down + `' && r.querySelector('.status .reason') && r.querySelector('.status .reason').textContent === 'connect')`
	untilTrue(t, ctx, "the reason in the history", rows+reason)
	untilTrue(t, ctx, "the reason in the recent list", `[...document.querySelectorAll('#requests tbody tr')]`+reason)
}

// untilTrue is until for a condition that may meet a null on its way.
func untilTrue(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	until(t, ctx, what, "!!("+js+")")
}

// screenshotTraffic sends the README's screenshot some real requests (demo's
// answers, streamed and not, and the unreachable cloud engine's failures),
// so that its history and charts show something, and waits for the page to
// show them.
func screenshotTraffic(t *testing.T, ctx context.Context) {
	t.Helper()
	for i := range 12 {
		if i%2 == 0 {
			readStream(sdk(uiKey).Chat.Completions.NewStreaming(t.Context(), chatParams("demo", "tell me a story")))
		} else {
			post(t, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+uiKey, "X-Session-Id", "readme")
		}
	}
	for range 3 {
		post(t, "/v1/chat/completions", `{"model":"cloud-model"}`, "Authorization", "Bearer "+uiKey)
	}
	syncHistory(t)
	run(t, ctx, "the history's newest page", chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
	untilTrue(t, ctx, "the requests in the history", `document.querySelectorAll('#history tbody tr').length >= 15`)
	until(t, ctx, "the charts", `document.querySelectorAll('#charts rect.bar').length > 0`)
}
