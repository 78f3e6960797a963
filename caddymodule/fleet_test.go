package caddymodule

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/openai/openai-go/v3/option"
)

// A fleet in one Caddy: two node gateways, each an llm_gateway with a demo
// engine started on demand, behind a front gateway whose pool spans both
// nodes and routes by what each node reports of the model (models_from).
// Between the front door and each node runs a wire that records what the
// front door sends, and that the test can cut.

type wire struct {
	*httptest.Server
	mu    sync.Mutex
	auths []string // Authorization and X-Api-Key of each request
	chats int
}

func newWire(t *testing.T, to string) *wire {
	t.Helper()
	u, _ := url.Parse(to)
	w := &wire{}
	proxy := httputil.NewSingleHostReverseProxy(u)
	w.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		w.mu.Lock()
		w.auths = append(w.auths, r.Header.Get("Authorization")+"|"+r.Header.Get("X-Api-Key"))
		if r.Method == http.MethodPost {
			w.chats++
		}
		w.mu.Unlock()
		proxy.ServeHTTP(rw, r)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.Listener = ln
	w.Start()
	t.Cleanup(w.Close)
	return w
}

func (w *wire) posts() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.chats
}

const (
	frontKey = "front-door-key-0123456789"
	nodeAKey = "node-a-key-0123456789abc"
	nodeBKey = "node-b-key-0123456789abc"
)

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// frontModels is the front door's /v1/models as id → status.
func frontModels(t *testing.T) map[string]string {
	t.Helper()
	return modelStatuses(t, "Authorization", "Bearer "+frontKey)
}

func TestFleetRoutesByWhatEachNodeReports(t *testing.T) {
	nodeA, nodeB := freeAddr(t), freeAddr(t)
	wireA, wireB := newWire(t, "http://"+nodeA), newWire(t, "http://"+nodeB)
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	llm_gateway {
		keys %s
		engine qa {
			%s
			models qwen
		}
	}
}
http://%s {
	llm_gateway {
		keys %s
		engine qb {
			%s
			models qwen
		}
	}
}
http://%s {
	llm_gateway {
		keys %s
		engine a {
			to %s
			models qwen-on-a
			model_name qwen
			api_key %s
			models_from
		}
		engine b {
			to %s
			models qwen-on-b
			model_name qwen
			api_key %s
			models_from /v1/models
		}
		pool qwen {
			member a
			member b
		}
	}
}
`, nodeA, nodeAKey, engineCmd("--model qwen --load-time 5s --chunk-delay 1ms"),
		nodeB, nodeBKey, engineCmd("--model qwen --chunk-delay 1ms"),
		gwAddr, frontKey, wireA.URL, nodeAKey, wireB.URL, nodeBKey))

	ask := func() *http.Response {
		t.Helper()
		resp, body := post(t, "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`,
			"Authorization", "Bearer "+frontKey)
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		return resp
	}
	// node b has the model loaded: the front door serves it there and
	// never wakes node a
	loadOnB := func() {
		t.Helper()
		r, _ := http.NewRequest(http.MethodPost, "http://"+nodeB+"/v1/chat/completions",
			strings.NewReader(`{"model":"qwen","messages":[{"role":"user","content":"load"}]}`))
		r.Header.Set("Authorization", "Bearer "+nodeBKey)
		if resp, body := do(t, r); resp.StatusCode != 200 {
			t.Fatalf("loading on node b: %d %s", resp.StatusCode, body)
		}
	}
	loadOnB()
	eventually(t, "the front door sees qwen loaded on b", func() bool {
		m := frontModels(t)
		return m["qwen-on-b"] == "loaded" && m["qwen-on-a"] == "unloaded"
	})
	for range 3 {
		if resp := ask(); resp.Header.Get("X-LLM-Engine") != "b" {
			t.Fatalf("served by %q", resp.Header.Get("X-LLM-Engine"))
		}
	}
	if s := status(t, "qa"); s.State != "stopped" || wireA.posts() != 0 {
		t.Fatalf("node a was woken: %s, %d requests", s.State, wireA.posts())
	}

	// node a is loading it and node b has it unloaded: requests wait for
	// node a rather than wake node b again
	do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/qb/stop"))
	awaitState(t, "qb", "stopped")
	loading := make(chan struct{})
	go func() {
		defer close(loading)
		r, _ := http.NewRequest(http.MethodPost, "http://"+nodeA+"/v1/chat/completions",
			strings.NewReader(`{"model":"qwen","messages":[{"role":"user","content":"load"}]}`))
		r.Header.Set("Authorization", "Bearer "+nodeAKey)
		if resp, err := testClient.Do(r); err == nil {
			resp.Body.Close()
		}
	}()
	eventually(t, "the front door sees qwen loading on a", func() bool {
		m := frontModels(t)
		return m["qwen-on-a"] == "loading" && m["qwen-on-b"] == "unloaded"
	})
	if resp := ask(); resp.Header.Get("X-LLM-Engine") != "a" {
		t.Fatalf("served by %q while a was loading", resp.Header.Get("X-LLM-Engine"))
	}
	<-loading
	if s := status(t, "qb"); s.State != "stopped" {
		t.Fatalf("node b was woken while node a was loading: %s", s.State)
	}

	// node b taken down: skipped, even with the model loaded on it again
	loadOnB()
	wireB.Close()
	eventually(t, "the front door sees node b gone", func() bool { return frontModels(t)["qwen-on-b"] == "unloaded" })
	before := wireB.posts()
	for range 3 {
		if resp := ask(); resp.Header.Get("X-LLM-Engine") != "a" {
			t.Fatalf("served by %q", resp.Header.Get("X-LLM-Engine"))
		}
	}
	if wireB.posts() != before {
		t.Fatal("a request went to the node that was taken down")
	}

	// each node got the key configured for it, never the caller's
	for _, w := range []struct {
		wire *wire
		key  string
	}{{wireA, nodeAKey}, {wireB, nodeBKey}} {
		w.wire.mu.Lock()
		for _, a := range w.wire.auths {
			if a != "Bearer "+w.key+"|" {
				t.Fatalf("a node got %q", a)
			}
		}
		w.wire.mu.Unlock()
	}
}

// The fleet example's front door, as printed (on this
// run's addresses): every name its /v1/models lists is servable, with the
// state the nodes report. It listed node-a and node-b, which the nodes
// answered 404 (they serve demo), and the nodes' demo was the front door's
// 404; only auto worked.
func TestFleetExampleServesEveryNameItLists(t *testing.T) {
	startFleetExample(t, "demo-a", "demo-b")

	want := map[string]string{"node-a": "unloaded", "node-b": "unloaded", "demo": "unloaded", "auto": "unloaded"}
	eventually(t, "the front door lists the nodes' model by every name it serves", func() bool {
		return fmt.Sprint(frontModels(t)) == fmt.Sprint(want)
	})
	client := sdk(frontKey)
	ask := func(model string) string {
		t.Helper()
		var resp *http.Response
		if _, err := client.Chat.Completions.New(context.Background(), chatParams(model, "hi"), option.WithResponseInto(&resp)); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
		return resp.Header.Get("X-LLM-Engine")
	}
	if by := ask("node-a"); by != "node-a" {
		t.Fatalf("node-a served by %q", by)
	}
	want = map[string]string{"node-a": "loaded", "node-b": "unloaded", "demo": "loaded", "auto": "loaded"}
	eventually(t, "the front door lists what node a reports", func() bool {
		return fmt.Sprint(frontModels(t)) == fmt.Sprint(want)
	})
	for _, model := range []string{"demo", "auto"} {
		if by := ask(model); by != "node-a" {
			t.Fatalf("%s served by %q, not where it is loaded", model, by)
		}
	}
	if by := ask("node-b"); by != "node-b" {
		t.Fatalf("node-b served by %q", by)
	}
}

// A user's first look at a fleet: the model loaded on node a directly (not
// through the front door), the front door's /v1/models asked once, a few
// seconds later, says loaded. It said unloaded everywhere: a listing served
// the answers the nodes gave at the last listing, up to 30 s old, and only a
// second look showed the state.
func TestFleetListsWhatANodeReportsNow(t *testing.T) {
	// the gateways' own clock, so that the front door's listings age
	// without a wait (the engines and their health checks keep the wall
	// clock's time; a request here sets no timer that must fire)
	fc := clock.NewFake()
	gatewayClock = fc
	t.Cleanup(func() { gatewayClock = nil })
	// engines of their own: the nodes' engines of another test, kept
	// across configs, would have the model loaded already
	nodeA, _ := startFleetExample(t, "fresh-a", "fresh-b")
	gatewayClock = nil
	want := map[string]string{"node-a": "unloaded", "node-b": "unloaded", "demo": "unloaded", "auto": "unloaded"}
	var got map[string]string
	defer func() {
		if t.Failed() {
			t.Logf("the front door listed %v", got)
		}
	}()
	eventually(t, "the front door lists the nodes' model", func() bool {
		got = frontModels(t)
		return fmt.Sprint(got) == fmt.Sprint(want)
	})
	r, _ := http.NewRequest(http.MethodPost, "http://"+nodeA+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"load"}]}`))
	r.Header.Set("Authorization", "Bearer "+nodeAKey)
	if resp, body := do(t, r); resp.StatusCode != 200 {
		t.Fatalf("loading on node a: %d %s", resp.StatusCode, body)
	}
	// the front door's last answers age past their 2 s life
	fc.Advance(2 * time.Second)
	want = map[string]string{"node-a": "loaded", "node-b": "unloaded", "demo": "loaded", "auto": "loaded"}
	if got = frontModels(t); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the front door's first listing after node a loaded demo: %v", got)
	}
	if s := pageEngineStates(t); s["node-a"] != "ready" || s["node-b"] != "ready" {
		t.Fatalf("status page: %v", s)
	}
}

// startFleetExample runs the fleet example's front door, as printed (on this
// run's addresses), over two node gateways with a demo engine each (of
// these names); it returns the nodes' addresses.
func startFleetExample(t *testing.T, engineA, engineB string) (nodeA, nodeB string) {
	t.Helper()
	nodeA, nodeB = freeAddr(t), freeAddr(t)
	t.Setenv("GATEWAY_KEYS", frontKey)
	t.Setenv("NODE_KEY", nodeAKey)
	example, err := os.ReadFile("../examples/fleet/Caddyfile")
	if err != nil {
		t.Fatal(err)
	}
	site := string(example)
	site = site[strings.Index(site, ":8080 {"):]
	for old, new := range map[string]string{
		":8080 {\n\tbind localhost": "http://" + gwAddr + " {",
		"http://localhost:8081":     "http://" + nodeA,
		"http://localhost:8082":     "http://" + nodeB,
	} {
		if !strings.Contains(site, old) {
			t.Fatalf("the example no longer has %q", old)
		}
		site = strings.ReplaceAll(site, old, new)
	}
	node := func(addr, engine string) string {
		return fmt.Sprintf("http://%s {\n\tllm_gateway {\n\t\tkeys {env.NODE_KEY}\n\t\tengine %s {\n\t\t\t%s\n\t\t\tmodels demo\n\t\t}\n\t}\n}\n",
			addr, engine, engineCmd("--model demo --chunk-delay 1ms"))
	}
	initRaw(t, `{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	https_port @HTTPS@
	grace_period 1ns
}
`+node(nodeA, engineA)+node(nodeB, engineB)+site)
	return nodeA, nodeB
}
