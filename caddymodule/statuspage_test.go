package caddymodule

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// The status page is tested in a real browser: Debian's chromium-headless-shell
// (or chromium) driven by chromedp. .ci/run installs it and sets LLMGW_BROWSER;
// without it the test looks for one on PATH and skips if there is none.
// LLMGW_SCREENSHOT=<file> writes the README's screenshot of the page.

const uiKey = "ui-test-key-7f3a9c21"

// browserPath finds the browser the tests drive.
func browserPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("LLMGW_BROWSER"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			t.Fatalf("LLMGW_BROWSER=%s: %v", p, err)
		}
		return p
	}
	for _, name := range []string{"chromium-headless-shell", "chromium", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no browser: apt-get install chromium-headless-shell, or set LLMGW_BROWSER (CI does)")
	return ""
}

// browser opens a headless browser tab for the test.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(browserPath(t)),
		chromedp.NoSandbox, // CI runs as root
		chromedp.WindowSize(1280, 1000),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(func() {
		cancelTime()
		cancelTab()
		cancelAlloc()
	})
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("starting the browser: %v", err)
	}
	return ctx
}

// run runs browser actions and fails the test on error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// eval returns a JavaScript expression's value on the page.
func eval[T any](t *testing.T, ctx context.Context, js string) T {
	t.Helper()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js))
	if err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// until polls a JavaScript condition on the page until it holds.
func until(t *testing.T, ctx context.Context, what, js string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !eval[bool](t, ctx, js) {
		if time.Now().After(deadline) {
			t.Fatalf("the page never showed %s (%s); it shows:\n%s", what, js, eval[string](t, ctx, "document.body.innerText"))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// screenshot writes the page (sel "") or the element sel shows as a PNG to
// the file the environment variable env names, when it names one: the
// docs' pictures, taken by the tests that make the page show what they show.
func screenshot(t *testing.T, ctx context.Context, env, sel string) {
	t.Helper()
	out := os.Getenv(env)
	if out == "" {
		return
	}
	// at the top, so that the sticky header is where a reader sees it, and
	// without the flash of rows just arrived
	eval[bool](t, ctx, `window.scrollTo(0, 0); document.querySelectorAll('.fresh').forEach((r) => r.classList.remove('fresh')); true`)
	shot := chromedp.FullScreenshot(100)
	if sel != "" {
		shot = chromedp.Screenshot(chromedp.CSS(sel))
	}
	png, err := chromedp.Run(ctx, shot)
	if err != nil {
		t.Fatalf("the screenshot for %s: %v", env, err)
	}
	if err := os.WriteFile(out, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", out)
}

// engineState is the JavaScript for the state an engine's card shows.
func engineState(name string) string {
	return fmt.Sprintf(`(document.querySelector('article[data-engine=%q] .state') || {}).textContent`, name)
}

const uiSite = `
		key ops ` + uiKey + `
		ui /llm
		engine demo {
			%s
			models demo
			idle_timeout 10m
		}
		engine cloud {
			to http://127.0.0.1:9
			models cloud-model
		}
		pool auto {
			member demo
			member cloud
		}`

func TestStatusPageInARealBrowser(t *testing.T) {
	ctx := browser(t)
	startGateway(t, fmt.Sprintf(uiSite, engineCmd("--load-time 1500ms")))

	// without a key: nothing but the key prompt
	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")))
	if eval[bool](t, ctx, `!document.querySelector('#main').hidden || document.body.innerText.includes('demo')`) {
		t.Fatalf("without a key the page shows more than the prompt:\n%s", eval[string](t, ctx, "document.body.innerText"))
	}
	run(t, ctx, "a wrong key", chromedp.SendKeys(chromedp.CSS("#key"), "not-the-key"), chromedp.Click(chromedp.CSS("#key-form button")))
	until(t, ctx, "the wrong key refused", `document.querySelector('#key-error').textContent.includes('not accepted')`)
	if eval[bool](t, ctx, `!document.querySelector('#main').hidden`) {
		t.Fatal("a wrong key opened the page")
	}

	// with the key: the engine, stopped
	run(t, ctx, "the key", chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	run(t, ctx, "the engines", chromedp.WaitVisible(chromedp.CSS(`article[data-engine="demo"]`)))
	until(t, ctx, "demo stopped", engineState("demo")+` === 'stopped'`)
	until(t, ctx, "the live stream", `document.querySelector('#conn').textContent.startsWith('live')`)
	until(t, ctx, "the pool", `document.querySelector('[data-pool="auto"]').textContent.includes('demo')`)
	logsBefore := eval[string](t, ctx, `document.querySelector('#log').textContent`)

	// a request starts it: starting, then ready, then the request in the list
	answered := make(chan error, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hello from the browser test"}]}`))
		req.Header.Set("Authorization", "Bearer "+uiKey)
		resp, err := testClient.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != 200 {
				err = fmt.Errorf("status %d", resp.StatusCode)
			}
		}
		answered <- err
	}()
	until(t, ctx, "demo starting", engineState("demo")+` === 'starting'`)
	until(t, ctx, "demo ready", engineState("demo")+` === 'ready'`)
	if err := <-answered; err != nil {
		t.Fatalf("the chat request: %v", err)
	}
	row := `document.querySelector('#requests tbody tr')`
	until(t, ctx, "the request in the recent list", row+` && `+row+`.querySelector('.engine').textContent === 'demo'`)
	if got := eval[string](t, ctx, row+`.querySelector('.tokens').textContent`); !tokensShown(got) {
		t.Fatalf("tokens in/out of the request: %q", got)
	}
	if got := eval[string](t, ctx, row+`.querySelector('.key').textContent + ' ' + `+row+`.querySelector('.model').textContent + ' ' + `+row+`.querySelector('.status').textContent`); got != "ops demo 200" {
		t.Fatalf("key name, model and status of the request: %q", got)
	}
	// the engine's output arrived while the page was open
	until(t, ctx, "the engine's output, live", `document.querySelector('#log').textContent.split('listening on').length > `+
		fmt.Sprint(strings.Count(logsBefore, "listening on")+1))
	until(t, ctx, "the start duration", `document.querySelector('article[data-engine="demo"] [data-field="start took"]') !== null`)

	if os.Getenv("LLMGW_SCREENSHOT") != "" {
		screenshotTraffic(t, ctx)
		screenshot(t, ctx, "LLMGW_SCREENSHOT", "")
	}

	// the key is in no data the page was sent
	page := eval[string](t, ctx, `document.documentElement.outerHTML`)
	for _, url := range []string{gwURL + "/llm/api/state", adminURL + "/llm_gateway/engines", adminURL + "/llm_gateway/pools"} {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.Header.Set("Authorization", "Bearer "+uiKey)
		_, body := do(t, req)
		page += body
	}
	if strings.Contains(page, uiKey) {
		t.Fatal("the key appears in the page or in what it was sent")
	}

	// on a phone's screen nothing is wider than the screen (the requests
	// table scrolls inside its own box)
	run(t, ctx, "a phone's screen", chromedp.EmulateViewport(390, 844))
	until(t, ctx, "the page fitting a phone", `document.documentElement.scrollWidth <= window.innerWidth`)
	run(t, ctx, "back to a wide screen", chromedp.EmulateViewport(1280, 1000))

	// stop, from the keyboard: Enter on the button, Tab from Cancel (the
	// dialog's default) to OK, Enter
	eval[bool](t, ctx, `document.querySelector('article[data-engine="demo"] button[data-act="stop"]').focus() || true`)
	run(t, ctx, "pressing stop", chromedp.KeyEvent("\r"), chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	until(t, ctx, "Cancel focused in the dialog", `document.activeElement.id === 'confirm-cancel'`)
	run(t, ctx, "confirming", chromedp.KeyEvent("\t"))
	until(t, ctx, "OK focused", `document.activeElement.id === 'confirm-ok'`)
	run(t, ctx, "confirming", chromedp.KeyEvent("\r"))
	until(t, ctx, "demo stopped again", engineState("demo")+` === 'stopped'`)
	if s := status(t, "demo"); s.State != "stopped" {
		t.Fatalf("the admin API says demo is %s", s.State)
	}

	// a reload ends the page's streams (the old server goes): the page says
	// so, reconnects on its own, and shows the new config
	startGateway(t, fmt.Sprintf(strings.Replace(uiSite, "idle_timeout 10m", "idle_timeout 11m", 1), engineCmd("--load-time 1500ms")))
	until(t, ctx, "the reconnect", `document.querySelector('#conn').textContent === 'live (reconnected)'`)
	until(t, ctx, "the new config", `document.querySelector('article[data-engine="demo"]').textContent.includes('after 660 s idle')`)
}

// pageKey is a key with limits whose usage the page shows. Its name is its
// own: the counters of the test binary's run outlive a test.
const pageKey = "page-team-gateway-key-0456"

// The page's keys section and an engine's queue line (issues 14 and 15): a
// request of a key with limits shows on its bars, the Reset button clears
// them as the admin API's reset does, and an engine with max_concurrent
// shows its places and queue while a request holds it.
func TestStatusPageShowsKeyUsageAndEngineQueueInARealBrowser(t *testing.T) {
	ctx := browser(t)
	held := newHeldUpstream(t)
	counted := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`)
	})
	// windows are days, so that the test never straddles one
	startGateway(t, fmt.Sprintf(`
		key ops %s
		key page-team %s {
			rate 100/d
			tokens 200k/d
		}
		ui /llm
		engine counted {
			to %s
			models counted
		}
		engine gpu {
			to %s
			models gpu
			max_concurrent 1
			queue 2
		}`, uiKey, pageKey, counted.URL, held.URL))
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/keys/page-team/reset")); resp.StatusCode != 200 {
		t.Fatalf("a fresh start for page-team: %d %s", resp.StatusCode, body)
	}

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	card := `document.querySelector('article[data-key="page-team"]')`
	limit := func(which, field string) string {
		return fmt.Sprintf(`(%s.querySelector('[data-limit=%q] .%s') || {}).textContent`, card, which, field)
	}
	run(t, ctx, "the keys", chromedp.WaitVisible(chromedp.CSS(`article[data-key="page-team"]`)))
	until(t, ctx, "page-team unused", limit("requests 100/d", "used")+` === '0 of 100' && `+limit("tokens 200k/d", "used")+` === '0 of 200k'`)
	if eval[bool](t, ctx, `document.querySelector('article[data-key="ops"]') !== null`) {
		t.Fatal("a key without limits has a card")
	}

	// a request of the key: one request and its 12 tokens on the bars
	if resp, body := post(t, "/v1/chat/completions", `{"model":"counted","messages":[{"role":"user","content":"hi"}]}`, "Authorization", "Bearer "+pageKey); resp.StatusCode != 200 {
		t.Fatalf("the key's request: %d %s", resp.StatusCode, body)
	}
	until(t, ctx, "the request on the bars", limit("requests 100/d", "used")+` === '1 of 100' && `+limit("tokens 200k/d", "used")+` === '12 of 200k'`)
	if got := eval[string](t, ctx, limit("requests 100/d", "remaining")+` + ' ' + `+limit("tokens 200k/d", "remaining")); got != "99 left 199988 left" {
		t.Fatalf("remaining: %q", got)
	}
	if got := eval[string](t, ctx, limit("tokens 200k/d", "countdown")); !strings.HasPrefix(got, "in ") {
		t.Fatalf("the reset countdown: %q", got)
	}
	if got := eval[string](t, ctx, fmt.Sprintf(`%s.querySelector('[data-limit="tokens 200k/d"] meter').value + '/' + %s.querySelector('[data-limit="tokens 200k/d"] meter').max`, card, card)); got != "12/200000" {
		t.Fatalf("the tokens bar: %q", got)
	}

	// Reset, confirmed: the page and the admin API show the counters at zero
	run(t, ctx, "pressing Reset", chromedp.Click(chromedp.CSS(`article[data-key="page-team"] button[data-act="reset"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm-ok")))
	if got := eval[string](t, ctx, `document.querySelector('#confirm-text').textContent`); !strings.Contains(got, "page-team") {
		t.Fatalf("the confirmation: %q", got)
	}
	run(t, ctx, "confirming", chromedp.Click(chromedp.CSS("#confirm-ok")))
	until(t, ctx, "the reset on the bars", limit("requests 100/d", "used")+` === '0 of 100' && `+limit("tokens 200k/d", "used")+` === '0 of 200k'`)
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/keys"))
	var usage []quota.KeyUsage
	if err := json.Unmarshal([]byte(body), &usage); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	if len(usage) != 1 || usage[0].Key != "page-team" || len(usage[0].Limits) != 2 || usage[0].Limits[0].Used != 0 || usage[0].Limits[1].Used != 0 {
		t.Fatalf("the admin API after the page's reset: %s", body)
	}

	// an engine with max_concurrent: one request holds its place, one waits
	line := `(document.querySelector('article[data-engine="gpu"] [data-field="concurrency"]') || {}).textContent`
	until(t, ctx, "gpu's free places", line+` === 'in flight 0/1 · queued 0/2'`)
	answered := make(chan error, 2)
	ask := func() {
		_, err := sdk(uiKey).Chat.Completions.New(context.Background(), chatParams("gpu", "hi"))
		answered <- err
	}
	go ask()
	held.awaitArrivals(t, 1)
	go ask()
	awaitQueued(t, "gpu", 1)
	until(t, ctx, "gpu busy with one waiting", line+` === 'in flight 1/1 · queued 1/2'`)
	held.free()
	for range 2 {
		if err := <-answered; err != nil {
			t.Fatalf("a request to gpu: %v", err)
		}
	}
	until(t, ctx, "gpu free again", line+` === 'in flight 0/1 · queued 0/2'`)
	if eval[bool](t, ctx, `document.querySelector('article[data-engine="counted"] [data-field="concurrency"]') !== null`) {
		t.Fatal("an engine without max_concurrent shows a concurrency line")
	}

	// no key is in the page, its API or the admin API's keys
	seen := eval[string](t, ctx, `document.documentElement.outerHTML`) + body
	req := mustReq(http.MethodGet, gwURL+"/llm/api/state")
	req.Header.Set("Authorization", "Bearer "+uiKey)
	_, state := do(t, req)
	seen += state + streamUntil(t, "/llm/api/events", "state")
	if !strings.Contains(seen, `"name":"page-team"`) {
		t.Fatalf("the test saw too little to prove anything: %s", state)
	}
	for _, secret := range []string{pageKey, uiKey} {
		if strings.Contains(seen, secret) {
			t.Errorf("a key appears in the page or what it was sent")
		}
	}
}

// streamUntil reads one of the page's event streams, with the key, up to
// and including the first event of that name, and returns what it read.
func streamUntil(t *testing.T, path, event string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, gwURL+path, nil)
	req.Header.Set("Authorization", "Bearer "+uiKey)
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var read strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 4<<20)
	inEvent := false
	for sc.Scan() {
		read.WriteString(sc.Text() + "\n")
		if sc.Text() == "event: "+event {
			inEvent = true
		} else if inEvent && strings.HasPrefix(sc.Text(), "data: ") {
			return read.String()
		}
	}
	t.Fatalf("%s ended without a %q event (%v):\n%s", path, event, sc.Err(), read.String())
	return ""
}

func tokensShown(s string) bool {
	var in, out int
	n, _ := fmt.Sscanf(s, "%d / %d", &in, &out)
	return n == 2 && in > 0 && out > 0
}

// The admin endpoint's page needs no key. Caddy refuses a browser's top-level
// navigation to its admin endpoint (no Origin or Referer: its cross-site
// guard), so this test calls it as a script or SSH tunnel would, and as the
// page's own calls arrive (same origin, with a Referer).
func TestStatusPageOnTheAdminEndpointNeedsNoKey(t *testing.T) {
	startGateway(t, fmt.Sprintf(uiSite, engineCmd("")))
	resp, page := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/ui/"))
	if resp.StatusCode != 200 || !strings.Contains(page, "app.js") {
		t.Fatalf("the page on the admin endpoint: %d %s", resp.StatusCode, page)
	}
	browserLike := func(method, path string) (*http.Response, string) {
		req := mustReq(method, adminURL+path)
		req.Header.Set("Sec-Fetch-Mode", "cors")
		req.Header.Set("Referer", adminURL+"/llm_gateway/ui/")
		return do(t, req)
	}
	resp, state := browserLike(http.MethodGet, "/llm_gateway/ui/api/state")
	if resp.StatusCode != 200 || !strings.Contains(state, `"name":"demo"`) || !strings.Contains(state, `"state":"stopped"`) {
		t.Fatalf("state without a key: %d %s", resp.StatusCode, state)
	}
	if resp, body := browserLike(http.MethodPost, "/llm_gateway/ui/api/engines/demo/start"); resp.StatusCode != 200 {
		t.Fatalf("start: %d %s", resp.StatusCode, body)
	}
	if s := status(t, "demo"); s.State != "ready" {
		t.Fatalf("demo is %s after the page's start", s.State)
	}
	if resp, body := browserLike(http.MethodPost, "/llm_gateway/ui/api/stop-all"); resp.StatusCode != 200 || !strings.Contains(body, `"stopped":["demo"]`) {
		t.Fatalf("stop all: %d %s", resp.StatusCode, body)
	}
	if s := status(t, "demo"); s.State != "stopped" {
		t.Fatalf("demo is %s after stop all", s.State)
	}
}

func TestStatusPageOnTheSiteRefusesAnyCallWithoutAKey(t *testing.T) {
	startGateway(t, fmt.Sprintf(uiSite, engineCmd("")))
	for _, path := range []string{"/llm/api/state", "/llm/api/events", "/llm/api/logs/demo"} {
		resp, body := do(t, mustReq(http.MethodGet, gwURL+path))
		if resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "demo") {
			t.Errorf("GET %s without a key: %d %s", path, resp.StatusCode, body)
		}
	}
	resp, _ := post(t, "/llm/api/engines/demo/start", "")
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("POST start without a key: %d", resp.StatusCode)
	}
	if s := status(t, "demo"); s.State != "stopped" {
		t.Fatalf("demo is %s after a refused start", s.State)
	}
	// the API of the gateway itself is unchanged beside the page
	resp, _ = post(t, "/v1/chat/completions", `{"model":"demo"}`, "Authorization", "Bearer "+uiKey)
	if resp.StatusCode != 200 {
		t.Fatalf("chat beside the page: %d", resp.StatusCode)
	}
}

func TestKeysNeverReachThePageTheAdminAPIOrAStartError(t *testing.T) {
	const engineKey = "engine-secret-4242"
	// passwords in URLs, and the gateway's own keys printed bare, where no
	// key-like pattern finds them
	const redisPassword, dbPassword = "redis-pw-5150", "pg-pw-6160"
	startGateway(t, `
		key ops `+uiKey+`
		key team `+pageKey+` {
			models leaky
		}
		ui /llm
		engine leaky {
			cmd sh -c "echo starting with --api-key `+engineKey+`; echo 'Authorization: Bearer `+engineKey+`'; echo token=`+uiKey+`; echo caller `+uiKey+` and `+pageKey+`; echo cache redis://:`+redisPassword+`@127.0.0.1:6379/0 db postgres://llm:`+dbPassword+`@db:5432/llm; exit 3"
			to http://127.0.0.1:{engine.port}
			api_key `+engineKey+`
			models leaky
		}`)
	resp, answer := post(t, "/v1/chat/completions", `{"model":"leaky"}`, "Authorization", "Bearer "+uiKey)
	// the caller hears the reason, never the engine's output
	if resp.StatusCode != http.StatusServiceUnavailable || !strings.Contains(answer, "engine leaky failed to start") || strings.Contains(answer, "starting with") {
		t.Fatalf("a failed start: %d %s", resp.StatusCode, answer)
	}
	seen := answer
	for _, url := range []string{adminURL + "/llm_gateway/engines", adminURL + "/llm_gateway/ui/api/state", gwURL + "/llm/api/state"} {
		req := mustReq(http.MethodGet, url)
		req.Header.Set("Authorization", "Bearer "+uiKey)
		_, body := do(t, req)
		seen += body
	}
	// the page's streams: the engine's output and the recent requests
	seen += streamUntil(t, "/llm/api/logs/leaky", "lines")
	seen += streamUntil(t, "/llm/api/events", "requests")
	for _, shown := range []string{"exited", `"key":"ops"`, "starting with --api-key ****", "caller **** and ****", "redis://:****@127.0.0.1:6379/0", "postgres://llm:****@db:5432/llm"} {
		if !strings.Contains(seen, shown) {
			t.Fatalf("the test saw too little to prove anything (no %q):\n%s", shown, seen)
		}
	}
	for _, secret := range []string{engineKey, uiKey, pageKey, redisPassword, dbPassword} {
		if strings.Contains(seen, secret) {
			t.Errorf("%s appears in what callers, the admin API or the page see:\n%s", secret, seen)
		}
	}
}

func TestAKeyWithRulesIsNeverAnOperatorOfThePage(t *testing.T) {
	startGateway(t, fmt.Sprintf(`
		key ops %s
		key page-team %s {
			models demo
			tokens 200k/d
		}
		ui /llm
		engine demo {
			%s
			models demo
		}`, uiKey, pageKey, engineCmd("")))
	if _, err := sdk(pageKey).Chat.Completions.New(context.Background(), chatParams("demo", "hi")); err != nil {
		t.Fatalf("the team's own API: %v", err)
	}
	for _, c := range []struct{ method, path string }{
		{http.MethodPost, "/llm/api/keys/page-team/reset"},
		{http.MethodPost, "/llm/api/stop-all"},
		{http.MethodPost, "/llm/api/engines/demo/stop"},
		{http.MethodGet, "/llm/api/state"},
		{http.MethodGet, "/llm/api/events"},
		{http.MethodGet, "/llm/api/logs/demo"},
	} {
		req := mustReq(c.method, gwURL+c.path)
		req.Header.Set("Authorization", "Bearer "+pageKey)
		if resp, body := do(t, req); resp.StatusCode != http.StatusUnauthorized || strings.Contains(body, "demo") {
			t.Errorf("%s %s as a key with rules: %d %s", c.method, c.path, resp.StatusCode, body)
		}
	}
	if s := status(t, "demo"); s.State != "ready" {
		t.Fatalf("demo is %s after refused operator actions", s.State)
	}
	req := mustReq(http.MethodGet, gwURL+"/llm/api/state")
	req.Header.Set("Authorization", "Bearer "+uiKey)
	if resp, body := do(t, req); resp.StatusCode != 200 || !strings.Contains(body, "page-team") {
		t.Fatalf("the operator: %d %s", resp.StatusCode, body)
	}
}
