package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgateway/caddy-llm-gateway/internal/redistest"
)

// Keys issued at run time, through the real binary: an operator gives,
// rotates and revokes a developer's key on the admin API, without editing
// the Caddyfile or reloading, and no file of the data folder holds a token.

// adminCall sends a JSON body (or none) to a gateway process's admin API
// and decodes the answer into out (when not nil).
func (p *gatewayProcess) adminCall(method, path, body string, out any) (int, string) {
	p.t.Helper()
	req, err := http.NewRequest(method, "http://"+p.admin+path, strings.NewReader(body))
	if err != nil {
		p.t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, text := do(p.t, req)
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal([]byte(text), out); err != nil {
			p.t.Fatalf("%s %s: %v: %s", method, path, err, text)
		}
	}
	return resp.StatusCode, text
}

// chatModel asks a gateway process for a completion of model with key, and
// answers the status.
func (p *gatewayProcess) chatModel(key, model string) int {
	p.t.Helper()
	_, err := sdk(key, option.WithBaseURL("http://"+p.addr+"/v1/")).Chat.Completions.New(context.Background(), chatParams(model, "hi"))
	var e *openai.Error
	switch {
	case err == nil:
		return 200
	case errors.As(err, &e):
		return e.StatusCode
	}
	p.t.Fatalf("%s with %s: %v", model, key[:9], err)
	return 0
}

type issuedAnswer struct {
	Name     string   `json:"name"`
	Token    string   `json:"token"`
	Models   []string `json:"models"`
	Note     string   `json:"note"`
	OldUntil string   `json:"old_token_until"`
}

const issuedSite = `
		issued_keys
		key ops ` + opsKey + `
		engine demo {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model demo --chunk-delay 1ms
			to http://127.0.0.1:{engine.port}
			models demo
		}
		engine other {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model other --chunk-delay 1ms
			to http://127.0.0.1:{engine.port}
			models other
		}`

func TestAnIssuedKeysLifeThroughCaddy(t *testing.T) {
	data := t.TempDir()
	addr, admin := freeAddr(t), freeAddr(t)
	p := runGateway(t, data, addr, admin, issuedSite)
	var outputs []string

	// create: the token is in this answer only
	var alice issuedAnswer
	st, body := p.adminCall("POST", "/llm_gateway/keys", `{"name":"alice","models":["demo"],"rate":["1000/d"],"note":"Alice's laptop","expires_in":"30d"}`, &alice)
	if st != 201 || alice.Name != "alice" || !strings.HasPrefix(alice.Token, "sk-llmgw-") {
		t.Fatalf("issue: %d %s", st, body)
	}
	tokens := []string{alice.Token}

	// use: the key's rules hold
	if st := p.chatModel(alice.Token, "demo"); st != 200 {
		t.Fatalf("the issued key: %d", st)
	}
	if st := p.chatModel(alice.Token, "other"); st != 403 {
		t.Fatalf("a model the issued key may not use: %d", st)
	}

	// list: by name, with its rules and use, never a token
	_, list := p.adminCall("GET", "/llm_gateway/keys", "", nil)
	var listed []map[string]any
	if err := json.Unmarshal([]byte(list), &listed); err != nil {
		t.Fatalf("%v: %s", err, list)
	}
	if len(listed) != 1 || listed[0]["key"] != "alice" || listed[0]["source"] != "issued" || listed[0]["note"] != "Alice's laptop" ||
		listed[0]["requests"] != float64(2) || listed[0]["last_used"] == nil || listed[0]["expires"] == nil || strings.Contains(list, "sk-llmgw-") {
		t.Fatalf("list: %s", list)
	}

	// names are unique across the config and the issued keys; rules are
	// checked against what the gateway serves
	for _, tc := range []struct {
		body   string
		status int
		says   string
	}{
		{`{"name":"ops"}`, 409, "a key of the config"},
		{`{"name":"alice"}`, 409, "issued already"},
		{`{"name":"bob","models":["nope"]}`, 400, `"nope" is no model or pool`},
		{`{"name":"bob","model":"demo"}`, 400, `unknown field "model"`},
		{`{"name":"bob","value":"a-token-of-my-choice-123"}`, 400, "made by the gateway"},
	} {
		if st, body := p.adminCall("POST", "/llm_gateway/keys", tc.body, nil); st != tc.status || !strings.Contains(adminErr(body), tc.says) {
			t.Errorf("%s: %d %s", tc.body, st, body)
		}
	}
	if st, body := p.adminCall("DELETE", "/llm_gateway/keys/ops", "", nil); st != 409 || !strings.Contains(adminErr(body), "change it in the Caddyfile") {
		t.Errorf("revoking a key of the config: %d %s", st, body)
	}

	// update: its rules change at once, its token stays
	if st, body := p.adminCall("PATCH", "/llm_gateway/keys/alice", `{"models":["demo","other"]}`, nil); st != 200 || !strings.Contains(body, `"other"`) {
		t.Fatalf("update: %d %s", st, body)
	}
	if st := p.chatModel(alice.Token, "other"); st != 200 {
		t.Fatalf("after the update: %d", st)
	}

	// restart: still valid
	outputs = append(outputs, p.out)
	p.stop()
	p = runGateway(t, data, addr, admin, issuedSite)
	if st := p.chatModel(alice.Token, "demo"); st != 200 {
		t.Fatalf("after a restart: %d", st)
	}

	// rotate: the old token is accepted within the overlap, then refused
	var rotated issuedAnswer
	st, body = p.adminCall("POST", "/llm_gateway/keys/alice/rotate", `{"overlap":"3s"}`, &rotated)
	if st != 200 || rotated.Token == "" || rotated.Token == alice.Token || rotated.OldUntil == "" {
		t.Fatalf("rotate: %d %s", st, body)
	}
	tokens = append(tokens, rotated.Token)
	if st := p.chatModel(rotated.Token, "demo"); st != 200 {
		t.Fatalf("the new token: %d", st)
	}
	until, err := time.Parse(time.RFC3339Nano, rotated.OldUntil)
	if err != nil {
		t.Fatal(err)
	}
	if st := p.chatModel(alice.Token, "demo"); st != 200 && time.Now().Before(until) {
		t.Fatalf("the old token within the overlap: %d", st)
	}
	eventually(t, "the old token refused past its overlap", func() bool { return p.chatModel(alice.Token, "demo") == 401 })
	if time.Now().Before(until) {
		t.Fatal("the old token was refused before its overlap ended")
	}

	// revoke: refused at once
	if st, body := p.adminCall("DELETE", "/llm_gateway/keys/alice", "", nil); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	if st := p.chatModel(rotated.Token, "demo"); st != 401 {
		t.Fatalf("a revoked key: %d", st)
	}
	if st, _ := p.adminCall("GET", "/llm_gateway/keys/alice", "", nil); st != 404 {
		t.Fatalf("a revoked key is listed: %d", st)
	}
	// the refusals of a revoked and of a replaced token say nothing of it
	var refusals strings.Builder
	for _, token := range tokens {
		req, _ := http.NewRequest(http.MethodPost, "http://"+p.addr+"/v1/chat/completions", strings.NewReader(`{"model":"demo","messages":[]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		resp, body := do(t, req)
		if resp.StatusCode != 401 {
			t.Fatalf("a token of a revoked key: %d %s", resp.StatusCode, body)
		}
		refusals.WriteString(body)
	}

	// every surface: history, metrics, the page's state, the log
	_, history := p.adminCall("GET", "/llm_gateway/requests?key=alice", "", nil)
	if !strings.Contains(history, `"key":"alice"`) && !strings.Contains(history, `"key": "alice"`) {
		t.Fatalf("the history does not name the key: %s", history)
	}
	_, metrics := p.adminCall("GET", "/metrics", "", nil)
	_, state := p.adminCall("GET", "/llm_gateway/ui/api/state", "", nil)
	_, listNow := p.adminCall("GET", "/llm_gateway/keys", "", nil)
	outputs = append(outputs, p.out)
	p.stop()
	var log strings.Builder
	for _, o := range outputs {
		log.WriteString(readFile(t, o))
	}
	for _, want := range []string{`"msg":"key created"`, `"msg":"key updated"`, `"msg":"key rotated"`, `"msg":"key revoked"`} {
		if !strings.Contains(log.String(), want) {
			t.Errorf("the log has no %s", want)
		}
	}
	surfaces := map[string]string{"history": history, "metrics": metrics, "page state": state, "list": listNow, "log": log.String(), "refusals": refusals.String()}
	for path, b := range dataFolder(t, data) {
		surfaces[path] = string(b)
	}
	for what, text := range surfaces {
		for _, token := range tokens {
			if strings.Contains(text, token) || strings.Contains(text, strings.TrimPrefix(token, "sk-llmgw-")) {
				t.Errorf("%s holds a token", what)
			}
		}
	}
}

// adminErr is the text of an admin API error, {"error": "…"}.
func adminErr(body string) string {
	var e struct{ Error string }
	_ = json.Unmarshal([]byte(body), &e)
	return e.Error
}

// dataFolder is every file under a gateway's data directory, by path.
func dataFolder(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		out[path] = b
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(out[filepath.Join(dir, "caddy", "llm_gateway", "quota.db")], []byte("alice")) {
		t.Fatalf("the store is not where the test looks: %v", keysOf(out))
	}
	return out
}

func keysOf(m map[string][]byte) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Two front doors on one Redis: a key issued at one is served at the
// other, and a revoke at one is refused by the other within the stated
// bound (keystore.DefaultInterval and a round trip; a publication usually
// makes it milliseconds).
func TestTwoFrontDoorsOnRedisSeeARevoke(t *testing.T) {
	redis := redistest.Start(t)
	site := `
		store redis ` + redis.Addr() + `
		issued_keys {
			secret 0123456789abcdef0123456789abcdef-front-doors
		}` + issuedSite[len("\n\t\tissued_keys"):]
	g1 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	g2 := runGateway(t, t.TempDir(), freeAddr(t), freeAddr(t), site)
	var bob issuedAnswer
	if st, body := g1.adminCall("POST", "/llm_gateway/keys", `{"name":"bob","models":["demo"]}`, &bob); st != 201 {
		t.Fatalf("issue: %d %s", st, body)
	}
	eventually(t, "the other front door serves the key", func() bool { return g2.chatModel(bob.Token, "demo") == 200 })
	if st, _ := g2.adminCall("GET", "/llm_gateway/keys/bob", "", nil); st != 200 {
		t.Fatalf("the other front door does not list the key: %d", st)
	}
	if st, body := g1.adminCall("DELETE", "/llm_gateway/keys/bob", "", nil); st != 200 {
		t.Fatalf("revoke: %d %s", st, body)
	}
	revoked := time.Now()
	if st := g1.chatModel(bob.Token, "demo"); st != 401 {
		t.Fatalf("the front door that revoked: %d", st)
	}
	eventually(t, "the other front door refuses the key", func() bool { return g2.chatModel(bob.Token, "demo") == 401 })
	took := time.Since(revoked)
	t.Logf("the other front door refused the revoked key after %s", took)
	// the stated bound is 1s and a round trip; a loaded machine gets a margin
	if took > 5*time.Second {
		t.Fatalf("the revoke took %s to reach the other front door (bound: 1s and a round trip)", took)
	}
}

// An operator issues, changes, rotates and revokes a key on the status
// page; the token is shown once and is nowhere in what the page holds or
// was sent after that.
func TestAnOperatorIssuesAKeyOnTheStatusPage(t *testing.T) {
	ctx := browser(t)
	up := newRecorder(t, usageChat)
	startGateway(t, fmt.Sprintf(`
		key ops %s
		issued_keys
		ui /llm
		engine one {
			to %s
			models page-one
		}
		engine two {
			to %s
			models page-two
		}`, uiKey, up.URL, up.URL))
	// the store outlives a test in this binary (as it outlives a config)
	do(t, mustReq(http.MethodDelete, adminURL+"/llm_gateway/keys/page-dev"))

	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")),
		chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	run(t, ctx, "issuing a key", chromedp.WaitVisible(chromedp.CSS("#issue-form")),
		chromedp.SendKeys(chromedp.CSS("#issue-name"), "page-dev"),
		chromedp.SendKeys(chromedp.CSS("#issue-models"), "page-one"),
		chromedp.SendKeys(chromedp.CSS("#issue-rate"), "100/d"),
		chromedp.SendKeys(chromedp.CSS("#issue-note"), "from the page"),
		chromedp.Click(chromedp.CSS(`#issue-form button[type="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS("#token-dialog")))
	token := eval[string](t, ctx, `document.querySelector('#token').value`)
	if !strings.HasPrefix(token, "sk-llmgw-") {
		t.Fatalf("the token shown: %q", token)
	}
	run(t, ctx, "closing the token", chromedp.Click(chromedp.CSS("#token-done")), chromedp.WaitNotVisible(chromedp.CSS("#token-dialog")))
	until(t, ctx, "the token cleared once its dialog closed", `document.querySelector('#token').value === ''`)

	// its rules hold; its life is on its card
	ask := func(key, model string) int {
		_, err := sdk(key).Chat.Completions.New(context.Background(), chatParams(model, "hi"))
		var e *openai.Error
		if errors.As(err, &e) {
			return e.StatusCode
		}
		if err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return 200
	}
	if st := ask(token, "page-one"); st != 200 {
		t.Fatalf("the page's key: %d", st)
	}
	if st := ask(token, "page-two"); st != 403 {
		t.Fatalf("another model: %d", st)
	}
	card := `document.querySelector('article[data-key="page-dev"]')`
	field := func(name string) string {
		return fmt.Sprintf(`(document.querySelector('article[data-key="page-dev"] [data-field=%q]') || {}).textContent`, name)
	}
	until(t, ctx, "its use", field("requests")+` === '2' && `+field("tokens used")+` === '10' && `+field("last used")+` !== 'never' && `+field("note")+` === 'from the page'`)

	// Edit: another model
	run(t, ctx, "editing", chromedp.Click(chromedp.CSS(`article[data-key="page-dev"] button[data-act="edit"]`)), chromedp.WaitVisible(chromedp.CSS("#edit-dialog")))
	run(t, ctx, "saving", chromedp.SetValue(chromedp.CSS("#edit-models"), "page-one page-two"), chromedp.Click(chromedp.CSS("#edit-ok")))
	until(t, ctx, "the new models", field("models")+` === 'page-one, page-two'`)
	if st := ask(token, "page-two"); st != 200 {
		t.Fatalf("after the edit: %d", st)
	}

	// Rotate, the old token refused at once
	run(t, ctx, "rotating", chromedp.Click(chromedp.CSS(`article[data-key="page-dev"] button[data-act="rotate"]`)), chromedp.WaitVisible(chromedp.CSS("#rotate-dialog")),
		chromedp.Click(chromedp.CSS("#rotate-ok")), chromedp.WaitVisible(chromedp.CSS("#token-dialog")))
	fresh := eval[string](t, ctx, `document.querySelector('#token').value`)
	run(t, ctx, "closing the new token", chromedp.Click(chromedp.CSS("#token-done")), chromedp.WaitNotVisible(chromedp.CSS("#token-dialog")))
	if fresh == token || ask(token, "page-one") != 401 || ask(fresh, "page-one") != 200 {
		t.Fatal("the rotation: the old token must be refused, the new one accepted")
	}

	// Revoke, confirmed: refused at once, its card gone
	run(t, ctx, "revoking", chromedp.Click(chromedp.CSS(`article[data-key="page-dev"] button[data-act="revoke"]`)), chromedp.WaitVisible(chromedp.CSS("#confirm-ok")),
		chromedp.Click(chromedp.CSS("#confirm-ok")))
	until(t, ctx, "the card gone", card+` === null`)
	if st := ask(fresh, "page-one"); st != 401 {
		t.Fatalf("a revoked key: %d", st)
	}

	// no token in the page, its state or its stream
	seen := eval[string](t, ctx, `document.documentElement.outerHTML`)
	req := mustReq(http.MethodGet, gwURL+"/llm/api/state")
	req.Header.Set("Authorization", "Bearer "+uiKey)
	_, state := do(t, req)
	seen += state + streamUntil(t, "/llm/api/events", "state")
	for _, secret := range []string{token, fresh, strings.TrimPrefix(token, "sk-llmgw-"), strings.TrimPrefix(fresh, "sk-llmgw-")} {
		if strings.Contains(seen, secret) {
			t.Error("a token stays in the page or what it is sent")
		}
	}
}
