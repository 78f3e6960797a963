package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// Active health checks of remote engines: a node that dies is
// found by a cheap GET, not by a client's request.

// node is a remote engine that can be killed (its port refuses connections)
// and brought back on the same address.
type node struct {
	t    *testing.T
	addr string
	mu   sync.Mutex
	srv  *http.Server
}

func newNode(t *testing.T, name string) *node {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n := &node{t: t, addr: ln.Addr().String()}
	n.serve(ln, name)
	t.Cleanup(n.kill)
	return n
}

func (n *node) url() string { return "http://" + n.addr }

func (n *node) serve(ln net.Listener, name string) {
	srv := &http.Server{Handler: answerAs(name)}
	n.mu.Lock()
	n.srv = srv
	n.mu.Unlock()
	go srv.Serve(ln)
}

// kill closes the node's listener and connections: a dead host.
func (n *node) kill() {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv != nil {
		n.srv.Close()
		n.srv = nil
	}
}

// revive listens on the node's address again.
func (n *node) revive(name string) {
	n.t.Helper()
	ln, err := net.Listen("tcp", n.addr)
	if err != nil {
		n.t.Fatalf("listening on %s again: %v", n.addr, err)
	}
	n.serve(ln, name)
}

// eventually polls cond until it holds, failing after a generous bound: the
// checks run on real time, and the bound only catches a check that never
// comes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("never: %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// adminEngine is one engine as the admin API reports it.
func engineOnAdmin(t *testing.T, name string) map[string]any {
	t.Helper()
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/engines/"+name))
	var s map[string]any
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	return s
}

// modelStatus is a model's status.value in /v1/models.
func modelStatus(t *testing.T, model string) string {
	t.Helper()
	return modelStatuses(t)[model]
}

// modelStatuses is every model's status.value in /v1/models, asked with
// the header pairs given.
func modelStatuses(t *testing.T, header ...string) map[string]string {
	t.Helper()
	req := mustReq(http.MethodGet, gwURL+"/v1/models")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	_, body := do(t, req)
	var list struct {
		Data []struct {
			ID     string `json:"id"`
			Status struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	out := map[string]string{}
	for _, m := range list.Data {
		out[m.ID] = m.Status.Value
	}
	return out
}

func TestDeadMemberIsMarkedDownSkippedAndBackAfterItReturns(t *testing.T) {
	a, b := newNode(t, "a"), newNode(t, "b")
	// failover 1: a request sent to a dead member would fail, not replay
	startGateway(t, fmt.Sprintf(`
		engine a {
			to %s
			models model-a
			health_interval 100ms
		}
		engine b {
			to %s
			models model-b
			health_interval 100ms
			health_timeout 1s
		}
		pool auto {
			member a
			member b
			failover 1
		}`, a.url(), b.url()))

	served := func(n int) map[string]int {
		t.Helper()
		by := map[string]int{}
		for range n {
			resp, body := post(t, "/v1/chat/completions", `{"model":"auto"}`)
			if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Attempts") != "" {
				t.Fatalf("%d attempts %q: %s", resp.StatusCode, resp.Header.Get("X-LLM-Attempts"), body)
			}
			by[resp.Header.Get("X-LLM-Engine")]++
		}
		return by
	}
	if by := served(4); by["a"] != 2 || by["b"] != 2 {
		t.Fatalf("both up: served %v, want a rotation", by)
	}

	b.kill()
	eventually(t, "b is down in the admin API", func() bool { return engineOnAdmin(t, "b")["state"] == "down" })
	if s := engineOnAdmin(t, "b"); s["health"] != "down" || s["ready"] != false {
		t.Fatalf("admin API: %v", s)
	}
	if s := engineOnAdmin(t, "a"); s["state"] != "ready" || s["health"] != "up" {
		t.Fatalf("admin API, the live one: %v", s)
	}
	eventually(t, "/v1/models agrees", func() bool { return modelStatus(t, "model-b") == "unloaded" })
	if st := modelStatus(t, "model-a"); st != "loaded" {
		t.Fatalf("model-a is %q", st)
	}
	// no request pays for the dead member: every one is served by a at
	// the first attempt (failover 1 would make one sent to b fail)
	if by := served(6); by["a"] != 6 {
		t.Fatalf("b down: served %v, want all by a", by)
	}
	// a request for b's own model is refused at once, saying why
	resp, body := post(t, "/v1/chat/completions", `{"model":"model-b"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "engine b is down") || !strings.Contains(body, "health checks") {
		t.Fatalf("b's own model while it is down: %d %s", resp.StatusCode, body)
	}
	// the probe agrees
	resp, body = do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools/auto/probe"))
	if resp.StatusCode != 503 || !strings.Contains(body, "engine b is down") {
		t.Fatalf("probe: %d %s", resp.StatusCode, body)
	}

	b.revive("b")
	eventually(t, "b is back in the admin API", func() bool { return engineOnAdmin(t, "b")["state"] == "ready" })
	eventually(t, "/v1/models agrees", func() bool { return modelStatus(t, "model-b") == "loaded" })
	if by := served(4); by["a"] != 2 || by["b"] != 2 {
		t.Fatalf("b back: served %v, want a rotation", by)
	}
}

// A down engine goes straight to its fallback, as one whose breaker is
// open: no request waits for or fails on the dead host first.
func TestDownPrimaryGoesStraightToItsFallback(t *testing.T) {
	dead := newNode(t, "primary")
	dead.kill()
	backup := newNode(t, "backup")
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models big
			health_interval 100ms
			fallback backup
		}
		engine backup {
			to %s
			models small
		}`, dead.url(), backup.url()))
	eventually(t, "primary is down", func() bool { return engineOnAdmin(t, "primary")["state"] == "down" })
	for range 3 {
		resp, body := post(t, "/v1/chat/completions", `{"model":"big"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Fallback") != "backup" || resp.Header.Get("X-LLM-Attempts") != "" {
			t.Fatalf("%d fallback %q attempts %q: %s", resp.StatusCode, resp.Header.Get("X-LLM-Fallback"), resp.Header.Get("X-LLM-Attempts"), body)
		}
	}
	// the host's breaker heard nothing: no request was sent to it
	if s := engineOnAdmin(t, "primary"); s["engine_breaker"] != "closed" {
		t.Fatalf("primary: %v", s)
	}
}

// pageEngineStates is each engine's state on the status page (the one on
// the admin endpoint, asked as its script asks).
func pageEngineStates(t *testing.T) map[string]string {
	t.Helper()
	req := mustReq(http.MethodGet, adminURL+"/llm_gateway/ui/api/state")
	req.Header.Set("Sec-Fetch-Mode", "cors")
	req.Header.Set("Referer", adminURL+"/llm_gateway/ui/")
	_, body := do(t, req)
	var snap struct {
		Engines []struct{ Name, State string } `json:"engines"`
	}
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	out := map[string]string{}
	for _, e := range snap.Engines {
		out[e.Name] = e.State
	}
	return out
}

// A remote engine has one state, the engine's own, on
// every surface. The admin API said "ready" next to "breaker":"open" for a
// host nobody answered, while the status page and /v1/models said down and
// unloaded; and "ready" for an engine nobody had heard from yet. Then it
// said "unknown" for a host nobody answered while the status page, which
// looks, said "down": the gateway now looks at each remote engine at load,
// and every surface says what that look saw before anyone asks.
func TestARemoteEngineHasOneStateOnEverySurface(t *testing.T) {
	live := newNode(t, "live")
	dead := newNode(t, "dead")
	dead.kill()
	startGateway(t, fmt.Sprintf(`
		engine live {
			to %s
			models m-live
		}
		engine dead {
			to %s
			models m-dead
			retries 0
			breaker 1 1m
		}`, live.url(), dead.url()))
	// the first look at load: the admin API says down for the host
	// nobody answers before any page, listing or request has looked
	eventually(t, "the admin API says what the first look saw", func() bool {
		return engineOnAdmin(t, "live")["state"] == "ready" && engineOnAdmin(t, "dead")["state"] == "down"
	})
	if s := engineOnAdmin(t, "dead"); s["ready"] != false || s["breaker"] != "closed" {
		t.Fatalf("admin API, the dead host after the first look: %v", s)
	}
	m := scrape(t)
	for _, want := range []string{`engine="dead",state="down"`, `engine="live",state="ready"`} {
		if sample(t, m, "llm_gateway_engine_state", want) != 1 {
			t.Fatalf("metrics lack %s:\n%s", want, m)
		}
	}
	if st := pageEngineStates(t); st["dead"] != "down" || st["live"] != "ready" {
		t.Fatalf("status page: %v", st)
	}

	// a request finds nobody at dead's address: its breaker opens
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("m-dead", "hi"))
	if err == nil {
		t.Fatal("a dead host answered")
	}
	if s := engineOnAdmin(t, "dead"); s["state"] != "down" || s["ready"] != false || s["breaker"] != "open" {
		t.Fatalf("admin API, the dead host with its breaker open: %v", s)
	}
	if _, err := sdk("").Chat.Completions.New(context.Background(), chatParams("m-live", "hi")); err != nil {
		t.Fatal(err)
	}
	if s := engineOnAdmin(t, "live"); s["state"] != "ready" || s["ready"] != true {
		t.Fatalf("admin API, the live host after an answer: %v", s)
	}

	// every surface says the same
	if st := modelStatuses(t); st["m-dead"] != "unloaded" || st["m-live"] != "loaded" {
		t.Fatalf("/v1/models: %v", st)
	}
	if st := pageEngineStates(t); st["dead"] != "down" || st["live"] != "ready" {
		t.Fatalf("status page: %v", st)
	}
	for name, want := range map[string]string{"dead": "down", "live": "ready"} {
		if s := engineOnAdmin(t, name); s["state"] != want {
			t.Fatalf("admin API after the listing and the page, %s: %v", name, s)
		}
	}
}
