package handler

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// Fleet routing below Caddy: nodes that report each model's state
// (models_from), and pools that route by it.

// node is a fake node gateway: it reports its models' states as told and
// answers chat completions with its name.
type node struct {
	*httptest.Server
	name   string
	mu     sync.Mutex
	states map[string]string
	chats  []string      // the Authorization of each chat request
	hold   chan struct{} // while set, its model list waits for it to close
}

func newNode(t *testing.T, name string, states map[string]string) *node {
	n := &node{name: name, states: states}
	n.Server = httptest.NewServer(http.HandlerFunc(n.serve))
	t.Cleanup(n.Close)
	return n
}

func (n *node) serve(w http.ResponseWriter, r *http.Request) {
	n.mu.Lock()
	hold := n.hold
	n.mu.Unlock()
	if hold != nil && r.URL.Path == "/v1/models" {
		<-hold
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if r.URL.Path == "/v1/models" {
		var items []string
		for id, s := range n.states {
			items = append(items, fmt.Sprintf(`{"id":%q,"object":"model","status":{"value":%q}}`, id, s))
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[`+strings.Join(items, ",")+`]}`)
		return
	}
	n.chats = append(n.chats, r.Header.Get("Authorization"))
	answerOK(w, n.name)
}

func (n *node) set(model, state string) {
	n.mu.Lock()
	n.states[model] = state
	n.mu.Unlock()
}

func (n *node) served() int {
	n.mu.Lock()
	defer n.mu.Unlock()
	return len(n.chats)
}

// fleetConfig is a front door over nodes a and b, a pool "qwen" over both.
func fleetConfig(a, b *node, wake bool) config.Config {
	return config.Config{
		Wake: &wake,
		Engines: []engines.Config{
			{Name: "a", To: a.URL, Models: []string{"qwen-on-a"}, ModelName: "qwen", ModelsFrom: "/v1/models", APIKey: "node-a-key-0123456789"},
			{Name: "b", To: b.URL, Models: []string{"qwen-on-b"}, ModelName: "qwen", ModelsFrom: "/v1/models", APIKey: "node-b-key-0123456789"},
		},
		Pools: []config.PoolConfig{{Name: "qwen", Members: []string{"a", "b"}}},
	}
}

// answeredBy asks the front door for the pool and returns the engine that
// answered.
func answeredBy(t *testing.T, url string, header ...string) string {
	t.Helper()
	resp, body := postJSON(t, url, `{"model":"qwen","messages":[]}`, header...)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	return resp.Header.Get("X-LLM-Engine")
}

func TestPoolPrefersTheNodeWhereTheModelIsLoaded(t *testing.T) {
	a := newNode(t, "a", map[string]string{"qwen": "unloaded"})
	b := newNode(t, "b", map[string]string{"qwen": "loaded"})
	clock := clock.NewFake()
	_, url := testGateway(t, fleetConfig(a, b, true), clock)

	// loaded on b: served there, a is never woken
	for range 3 {
		if got := answeredBy(t, url); got != "b" {
			t.Fatalf("served by %s", got)
		}
	}
	if a.served() != 0 {
		t.Fatal("node a was woken")
	}

	// a is loading it, b has it unloaded: wait for a, do not wake b
	a.set("qwen", "loading")
	b.set("qwen", "unloaded")
	clock.Advance(listingMaxAge)
	if got := answeredBy(t, url); got != "a" || b.served() != 3 {
		t.Fatalf("served by %s; b served %d", got, b.served())
	}

	// nowhere loaded: the first request wakes the first node, and the next
	// ones wait for it, even before the node's own list says it is loading
	a.set("qwen", "unloaded")
	clock.Advance(listingMaxAge)
	for range 3 {
		if got := answeredBy(t, url); got != "a" {
			t.Fatalf("served by %s: a second node was woken", got)
		}
	}

	// a node that does not answer is skipped while another can serve
	a.Close()
	clock.Advance(listingMaxAge)
	if got := answeredBy(t, url); got != "b" {
		t.Fatalf("served by %s", got)
	}

	// each node got its own key, never the caller's
	for _, n := range []*node{a, b} {
		for _, auth := range n.chats {
			if auth != "Bearer node-"+n.name+"-key-0123456789" {
				t.Fatalf("node %s got %q", n.name, auth)
			}
		}
	}
}

func TestWakeOffNeverMakesANodeLoadAModel(t *testing.T) {
	a := newNode(t, "a", map[string]string{"qwen": "unloaded"})
	b := newNode(t, "b", map[string]string{"qwen": "unloaded"})
	clock := clock.NewFake()
	_, url := testGateway(t, fleetConfig(a, b, false), clock)
	resp, body := postJSON(t, url, `{"model":"qwen"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "pool_unavailable") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	resp, body = postJSON(t, url, `{"model":"qwen-on-a"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "not loaded on engine a and wake is off") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if a.served()+b.served() != 0 {
		t.Fatal("a node was sent a request")
	}
	// /v1/models says what the nodes say
	b.set("qwen", "loaded")
	clock.Advance(listingMaxAge)
	resp, _ = http.Get(url + "/v1/models")
	list, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.Contains(string(list), `{"id":"qwen-on-b","object":"model","created":0,"owned_by":"b","status":{"value":"loaded"}}`) ||
		strings.Contains(string(list), `"qwen-on-a"`) {
		t.Fatalf("%s", list)
	}
	if got := answeredBy(t, url); got != "b" {
		t.Fatalf("served by %s", got)
	}
}

func TestTwoFrontDoorsSendASessionToTheSameNode(t *testing.T) {
	a := newNode(t, "a", map[string]string{"qwen": "loaded"})
	b := newNode(t, "b", map[string]string{"qwen": "loaded"})
	cfg := fleetConfig(a, b, true)
	cfg.Pools[0].StickyHeader = "X-Session"
	clock1 := clock.NewFake()
	clock2 := clock.NewFake()
	_, front1 := testGateway(t, cfg, clock1)
	_, front2 := testGateway(t, cfg, clock2)
	placement := func() map[string]string {
		m := map[string]string{}
		for i := range 24 {
			s := fmt.Sprintf("session-%d", i)
			n1, n2 := answeredBy(t, front1, "X-Session", s), answeredBy(t, front2, "X-Session", s)
			if n1 != n2 {
				t.Fatalf("%s: front doors disagree: %s and %s", s, n1, n2)
			}
			m[s] = n1
		}
		return m
	}
	before := placement()
	onA := 0
	for _, n := range before {
		if n == "a" {
			onA++
		}
	}
	if onA == 0 || onA == len(before) {
		t.Fatalf("sessions not spread: %v", before)
	}

	// node a leaves: every session moves to b, on both front doors
	addr := a.Listener.Addr().String()
	a.Close()
	clock1.Advance(listingMaxAge)
	clock2.Advance(listingMaxAge)
	for s, n := range placement() {
		if n != "b" {
			t.Fatalf("%s on %s after a left", s, n)
		}
	}

	// it returns: its sessions come back to it, and only they do
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Skipf("node a's port was taken meanwhile: %v", err)
	}
	a.Server = httptest.NewUnstartedServer(http.HandlerFunc(a.serve))
	a.Listener.Close()
	a.Listener = ln
	a.Start()
	clock1.Advance(listingMaxAge)
	clock2.Advance(listingMaxAge)
	after := placement()
	for s := range before {
		if before[s] != after[s] {
			t.Fatalf("%s was on %s, now on %s", s, before[s], after[s])
		}
	}
}

// TestASlowNodeDelaysNoRequest: answers older than listingTTL serve while
// the nodes are asked again in the background, so a node whose model list
// hangs holds up no request; the next request after the fan-out sees it.
func TestASlowNodeDelaysNoRequest(t *testing.T) {
	a := newNode(t, "a", map[string]string{"qwen": "loaded"})
	b := newNode(t, "b", map[string]string{"qwen": "unloaded"})
	clock := clock.NewFake()
	g, url := testGateway(t, fleetConfig(a, b, true), clock)
	if got := answeredBy(t, url); got != "a" {
		t.Fatalf("served by %s", got)
	}

	hold := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(hold) }) }
	// registered after the nodes' Close, so run before it: a failed
	// assertion before free below releases a's model list
	t.Cleanup(free)
	a.mu.Lock()
	a.hold = hold
	a.mu.Unlock()
	a.set("qwen", "unloaded")
	b.set("qwen", "loaded")
	clock.Advance(listingTTL)
	// answered from the answers in hand while a's model list hangs
	if got := answeredBy(t, url); got != "a" {
		t.Fatalf("served by %s", got)
	}
	g.listing.mu.Lock()
	running := g.listing.running
	g.listing.mu.Unlock()
	if running == nil {
		t.Fatal("no fan-out in the background")
	}
	free()
	<-running
	if got := answeredBy(t, url); got != "b" {
		t.Fatalf("served by %s after the fan-out", got)
	}
}
