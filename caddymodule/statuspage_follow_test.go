package caddymodule

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// The page's engine cards and its output pane, as a llama-swap user meets
// them: an engine the gateway starts shows no "remote" line (it is not
// probed, it is run), a remote one does; and the output pane, opened on a
// stopped engine, follows the engine that a request starts.
func TestStatusPageFollowsTheEngineThatStartsAndProbesOnlyRemotes(t *testing.T) {
	ctx := browser(t)
	startGateway(t, `
		key ops `+uiKey+`
		ui /llm
		engine alpha {
			`+engineCmd("--model alpha --load-time 500ms")+`
			models alpha
			display_name "Alpha 8B"
			description "The first of two"
			metadata context 32768
			metadata vendor Acme
		}
		engine beta {
			`+engineCmd("--model beta --load-time 500ms")+`
			models beta
		}
		engine cloud {
			to http://127.0.0.1:9
			models cloud-model
		}`)
	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")))
	run(t, ctx, "the key", chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	run(t, ctx, "the engines", chromedp.WaitVisible(chromedp.CSS(`article[data-engine="cloud"]`)))
	until(t, ctx, "alpha stopped", engineState("alpha")+` === 'stopped'`)
	card := func(name string) string {
		return fmt.Sprintf(`document.querySelector('article[data-engine=%q]').textContent`, name)
	}
	until(t, ctx, "cloud's remote line", card("cloud")+`.includes('remote')`)
	for _, name := range []string{"alpha", "beta"} {
		if got := eval[string](t, ctx, card(name)); strings.Contains(got, "remote") || strings.Contains(got, "not probed") {
			t.Fatalf("engine %s, which the gateway starts, shows a remote line: %s", name, got)
		}
	}
	// llama-swap's name, description and metadata, as /v1/models has them
	until(t, ctx, "alpha's words for people", card("alpha")+`.includes('nameAlpha 8B') && `+card("alpha")+`.includes('descriptionThe first of two') && `+
		card("alpha")+`.includes('metadatacontext: 32768 · vendor: Acme')`)
	until(t, ctx, "the output pane on the first engine", `document.querySelector('#log-engine').value === 'alpha'`)

	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"beta","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+uiKey)
	if resp, body := do(t, req); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	until(t, ctx, "the output pane following beta", `document.querySelector('#log-engine').value === 'beta'`)
	until(t, ctx, "beta's output", `document.querySelector('#log').textContent.includes('model beta listening')`)
	if got := eval[string](t, ctx, card("beta")); strings.Contains(got, "not probed") {
		t.Fatalf("beta, started, shows a remote line: %s", got)
	}

	// an engine that starts beside the one shown is followed too
	req, _ = http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"alpha","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer "+uiKey)
	if resp, body := do(t, req); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	until(t, ctx, "the output pane following alpha", `document.querySelector('#log-engine').value === 'alpha'`)
	until(t, ctx, "alpha's output", `document.querySelector('#log').textContent.includes('model alpha listening')`)
}
