package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

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
	surfaces := map[string]string{"history": history, "metrics": metrics, "page state": state, "list": listNow, "log": log.String()}
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
