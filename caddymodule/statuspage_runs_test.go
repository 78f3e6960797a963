package caddymodule

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/chromedp/chromedp"
)

// The page's fixes of A starting engine shows its pid and for how
// long it has been starting; the output opens on a running engine, each
// line stamped, with a line between two runs.
func TestStatusPageShowsAStartingEngineAndItsRunsInARealBrowser(t *testing.T) {
	ctx := browser(t)
	startGateway(t, fmt.Sprintf(`
		key ops `+uiKey+`
		ui /llm
		engine a-idle {
			%s
			models a-idle
		}
		engine b-run {
			%s
			models b-run
		}`, engineCmd(""), engineCmd("--load-time 2s")))
	start := func() {
		t.Helper()
		if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/b-run/start")); resp.StatusCode != 200 {
			t.Fatalf("start: %d %s", resp.StatusCode, body)
		}
	}
	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	until(t, ctx, "b-run stopped", engineState("b-run")+` === 'stopped'`)

	started := make(chan struct{})
	go func() { defer close(started); start() }()
	card := `document.querySelector('article[data-engine="b-run"] [data-field="%s"]')`
	untilTrue(t, ctx, "the starting engine's pid", fmt.Sprintf(card, "pid / port")+`.textContent.match(/^\d+ \/ /)`)
	untilTrue(t, ctx, "for how long it is starting", fmt.Sprintf(card, "starting")+`.textContent.match(/^for \d+ s$/)`)
	<-started
	until(t, ctx, "b-run ready", engineState("b-run")+` === 'ready'`)
	// the output opened on the running engine, not the first by name
	until(t, ctx, "b-run's output", `document.querySelector('#log-engine').value === 'b-run'`)
	untilTrue(t, ctx, "stamped lines", `/^\d\d:\d\d:\d\d  .*listening on/m.test(document.querySelector('#log').textContent)`)

	// a second run: a line between the two
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/b-run/stop")); resp.StatusCode != 200 {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	start()
	untilTrue(t, ctx, "the line between runs", `/──── start \d+ at .* ────\n.*listening on/.test(document.querySelector('#log').textContent)`)
}
