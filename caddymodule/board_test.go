package caddymodule

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The page says which API each request spoke (issue 53): a Messages
// client (Claude Code, by its user agent) answered by a Chat-only engine
// shows "messages → chat translated", its path and its user agent with
// the key it carried masked, in the recent list and the history; both
// filter by API, and the admin API's history takes the same filter.
func TestThePageShowsEachRequestsAPIsPathAndUserAgent(t *testing.T) {
	ctx := browser(t)
	// a model of this run's own: the history outlives a test (-count=2)
	model := "apis-" + strconv.FormatInt(time.Now().UnixNano()%1e9, 36)
	chat := scriptedChat(t)
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		ui /llm
		engine chat-only {
			to %s
			api chat
			models %s
		}`, chat.URL, model))

	const agent = "claude-cli/2.0.14 (external, cli) sk-ant-api03-pastedbymistake0123"
	if resp, body := post(t, "/v1/messages", `{"model":"`+model+`","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+uiKey, "Anthropic-Version", "2023-06-01", "User-Agent", agent); resp.StatusCode != 200 {
		t.Fatalf("the Messages request: %d %s", resp.StatusCode, body)
	}
	if resp, body := post(t, "/v1/chat/completions", `{"model":"`+model+`","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer "+uiKey, "User-Agent", "OpenAI/Python 1.99.0"); resp.StatusCode != 200 {
		t.Fatalf("the Chat request: %d %s", resp.StatusCode, body)
	}
	syncHistory(t)

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	const masked = "claude-cli/2.0.14 (external, cli) ****"
	for _, table := range []string{"#requests", "#history"} {
		rows := `[...document.querySelectorAll('` + table + ` tbody tr')].filter((r) => !r.hidden && r.querySelector('.model').textContent === '` + model + `')`
		cells := rows + `.map((r) => ['.api', '.path', '.agent'].map((c) => r.querySelector(c).textContent).join(' | '))`
		untilTrue(t, ctx, table+": both requests", rows+`.length === 2`)
		got := eval[[]string](t, ctx, cells)
		want := []string{ // newest first
			"chat | /v1/chat/completions | OpenAI/Python 1.99.0",
			"messages → chat translated | /v1/messages | " + masked,
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("%s shows:\n%s\nwant:\n%s", table, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		// filtered: only the translated one
		if table == "#requests" {
			eval[bool](t, ctx, `(() => { const s = document.querySelector('#req-api'); s.value = 'translated'; s.dispatchEvent(new Event('change')); return true })()`)
		} else {
			eval[bool](t, ctx, `document.querySelector('#hist-api').value = 'translated'; true`)
			run(t, ctx, "the history's API filter", chromedp.Click(chromedp.CSS(`#hist-filter button[type="submit"]`)))
		}
		untilTrue(t, ctx, table+": only the translated request", rows+`.length === 1 && `+rows+`[0].querySelector('.path').textContent === '/v1/messages'`)
		if table == "#requests" {
			// the count says what the filter left (other tests' translated
			// requests are in the recent list too when the suite runs whole)
			shown := eval[int](t, ctx, `[...document.querySelectorAll('#requests tbody tr')].filter((r) => !r.hidden).length`)
			if count := eval[string](t, ctx, `document.querySelector('#req-count').textContent`); !strings.HasPrefix(count, fmt.Sprintf("(%d shown, ", shown)) {
				t.Fatalf("the recent list's count, filtered: %q with %d rows shown", count, shown)
			}
		}
	}
	// docs/statuspage-apis.png: the recent list, unfiltered, wide enough
	// for every column
	if os.Getenv("LLMGW_SCREENSHOT_APIS") != "" {
		eval[bool](t, ctx, `(() => { const s = document.querySelector('#req-api'); s.value = ''; s.dispatchEvent(new Event('change')); return true })()`)
		run(t, ctx, "a wide screen", chromedp.EmulateViewport(1800, 1000))
		screenshot(t, ctx, "LLMGW_SCREENSHOT_APIS", `section[aria-labelledby="req-h"]`)
	}
	if strings.Contains(eval[string](t, ctx, "document.body.innerText"), "pastedbymistake") {
		t.Fatal("the page shows the key a user agent carried")
	}

	// the admin API: the client's API, or the engine's when translated
	for api, want := range map[string]int{"translated": 1, "messages": 1, "chat": 2, "responses": 0} {
		if got := len(historyPage(t, "?model="+model+"&api="+api).Requests); got != want {
			t.Errorf("api=%s: %d records, want %d", api, got, want)
		}
	}
}
