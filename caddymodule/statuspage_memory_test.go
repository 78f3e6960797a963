package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The scheduler on the status page, in a real browser: the
// memory used of the budget, the start waiting for room with why, the
// engine that keeps it out with why it is kept and why it started.
func TestStatusPageShowsTheMemoryAndTheWaitingStartsInABrowser(t *testing.T) {
	ctx := browser(t)
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		ui /llm
		memory_budget 10GiB
		max_wait 10m
		engine warm {
			%s
			models warm
			memory 10GiB
			min_loaded 10m
		}
		engine cold {
			%s
			models cold
			memory 10GiB
		}`, engineCmd("--model warm"), engineCmd("--model cold")))
	resp, body := post(t, "/v1/chat/completions", `{"model":"warm"}`, "Authorization", "Bearer "+uiKey)
	if resp.StatusCode != 200 {
		t.Fatalf("warm: %d %s", resp.StatusCode, body)
	}
	// cold waits for room that warm's min_loaded keeps
	rctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() {
		req, _ := http.NewRequestWithContext(rctx, http.MethodPost, gwURL+"/v1/chat/completions", strings.NewReader(`{"model":"cold"}`))
		req.Header.Set("Authorization", "Bearer "+uiKey)
		if resp, err := testClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")))
	run(t, ctx, "the key", chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	box := `document.querySelector('#memory [data-box="memory_budget"]')`
	until(t, ctx, "the memory budget", `!!`+box+` && `+box+`.querySelector('[data-field="used"]').textContent === '10 GiB of 10 GiB used'`)
	if v := eval[float64](t, ctx, box+`.querySelector('meter').value`); v != 10<<30 {
		t.Fatalf("the meter says %v", v)
	}
	queued := box + `.querySelector('[data-queued="cold"]')`
	until(t, ctx, "cold waiting for room", `!!`+queued+` && `+queued+`.querySelector('.why').textContent.startsWith('waiting for room: warm (min_loaded for ')`)
	until(t, ctx, "how long it waits", queued+`.querySelector('.since').textContent.endsWith(' s')`)
	// its card says it waits, not that it starts: no process runs yet
	until(t, ctx, "cold's card waiting", engineState("cold")+` === 'waiting'`)
	warm := box + `.querySelector('[data-holder="warm"]')`
	until(t, ctx, "warm kept", warm+`.textContent.includes('kept: min_loaded in ')`)
	// with its time: when it started is what an operator asks next
	if got := eval[string](t, ctx, warm+`.querySelector('[data-field="started"]').textContent`); !regexp.MustCompile(`^started at \d\d:\d\d:\d\d: request \(key ops, priority 0\)$`).MatchString(got) {
		t.Fatalf("warm's start: %q", got)
	}
	if got := eval[string](t, ctx, box+`.querySelector('.swaps').textContent`); !strings.Contains(got, " in the last hour") {
		t.Fatalf("swaps: %q", got)
	}
	screenshot(t, ctx, "LLMGW_SCREENSHOT_MEMORY", "")
}
