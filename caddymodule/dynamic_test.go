package caddymodule

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"
)

// A pool whose members come from DNS: a tiny DNS server in the test
// answers SRV for the nodes' service (and A for each node's name), as a
// Kubernetes headless service or Consul does; the front door's pool takes
// its members from it through Caddy's own `dynamic srv`, each member made
// from the template engine. Each node is a gateway with a demo engine,
// reached through a wire that counts what the front door sends it.

// testDNS answers SRV for _llm._tcp.nodes.test. with the nodes it holds now
// (target nN.nodes.test.), and A for each nN.nodes.test. with 127.0.0.1.
type testDNS struct {
	addr string
	mu   sync.Mutex
	srv  map[string]int // target name → port
}

func newTestDNS(t *testing.T) *testDNS {
	t.Helper()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	d := &testDNS{addr: pc.LocalAddr().String(), srv: map[string]int{}}
	server := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	started := make(chan struct{})
	server.NotifyStartedFunc = func() { close(started) }
	go func() { _ = server.ActivateAndServe() }()
	<-started
	t.Cleanup(func() { _ = server.Shutdown() })
	return d
}

func (d *testDNS) set(nodes map[string]int) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.srv = nodes
}

func (d *testDNS) serve(w dns.ResponseWriter, q *dns.Msg) {
	m := new(dns.Msg)
	m.SetReply(q)
	m.Authoritative = true
	d.mu.Lock()
	for _, question := range q.Question {
		name := strings.ToLower(question.Name)
		switch {
		case question.Qtype == dns.TypeSRV && name == "_llm._tcp.nodes.test.":
			for target, port := range d.srv {
				m.Answer = append(m.Answer, &dns.SRV{
					Hdr:      dns.RR_Header{Name: question.Name, Rrtype: dns.TypeSRV, Class: dns.ClassINET, Ttl: 0},
					Priority: 10, Weight: 10, Port: uint16(port), Target: target,
				})
			}
		case question.Qtype == dns.TypeA && strings.HasSuffix(name, ".nodes.test."):
			m.Answer = append(m.Answer, &dns.A{
				Hdr: dns.RR_Header{Name: question.Name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: 0},
				A:   net.IPv4(127, 0, 0, 1),
			})
		}
	}
	d.mu.Unlock()
	_ = w.WriteMsg(m)
}

// countingWire forwards to a node with the node's own Host, and counts the
// completions it was sent.
type countingWire struct {
	port  int
	mu    sync.Mutex
	posts int
}

func newCountingWire(t *testing.T, to string) *countingWire {
	t.Helper()
	u, _ := url.Parse(to)
	w := &countingWire{}
	proxy := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) { r.SetURL(u) }, FlushInterval: -1}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.port = ln.Addr().(*net.TCPAddr).Port
	srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		if r.Method == http.MethodPost {
			w.mu.Lock()
			w.posts++
			w.mu.Unlock()
		}
		proxy.ServeHTTP(rw, r)
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return w
}

func (w *countingWire) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.posts
}

// poolMembers is the pool's members on the admin API: name → state
// ("" when it serves, checking, draining).
func poolMembers(t *testing.T, pool string) map[string]string {
	t.Helper()
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools"))
	var pools []struct {
		Name    string `json:"name"`
		Members []struct {
			Member string `json:"member"`
			State  string `json:"state"`
		} `json:"members"`
	}
	if err := json.Unmarshal([]byte(body), &pools); err != nil {
		t.Fatalf("%v: %s", err, body)
	}
	out := map[string]string{}
	for _, p := range pools {
		if p.Name == pool {
			for _, m := range p.Members {
				out[m.Member] = m.State
			}
		}
	}
	return out
}

func serving(members map[string]string) []string {
	var out []string
	for m, state := range members {
		if state == "" {
			out = append(out, m)
		}
	}
	return out
}

func TestPoolFollowsItsMembersInDNS(t *testing.T) {
	const refresh = 300 * time.Millisecond
	resolver := newTestDNS(t)
	nodes := []string{freeAddr(t), freeAddr(t), freeAddr(t)}
	wires := make([]*countingWire, len(nodes))
	for i, n := range nodes {
		wires[i] = newCountingWire(t, "http://"+n)
	}
	target := func(i int) string { return fmt.Sprintf("n%d.nodes.test.", i) }
	member := func(i int) string { return fmt.Sprintf("node@%s:%d", target(i), wires[i].port) }
	resolver.set(map[string]int{target(0): wires[0].port, target(1): wires[1].port})

	// node 0 streams slowly: a stream on it is still open when its
	// address leaves the answer
	slow := `--reply "one two three four five six seven eight nine ten eleven twelve" --words-per-chunk 1 --chunk-delay 100ms`
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	llm_gateway {
		engine demo {
			%s
			models demo
		}
	}
}
http://%s {
	llm_gateway {
		engine demo {
			%s
			models demo
		}
	}
}
http://%s {
	llm_gateway {
		engine demo {
			%s
			models demo
		}
	}
}
http://%s {
	llm_gateway {
		engine node {
			to http://nodes.test
			models node
			model_name demo
			health_interval 200ms
			health_path /v1/models
			health_fails 1
			transport http {
				resolvers %s
			}
		}
		pool demo {
			template node
			sticky header X-Session
			dynamic srv _llm._tcp.nodes.test {
				refresh %s
				resolvers %s
			}
		}
	}
}
`, nodes[0], engineCmd(slow), nodes[1], engineCmd("--chunk-delay 1ms"), nodes[2], engineCmd("--chunk-delay 1ms"),
		gwAddr, resolver.addr, refresh, resolver.addr))

	ask := func(session string) string {
		t.Helper()
		resp, body := post(t, "/v1/chat/completions", `{"model":"demo","messages":[{"role":"user","content":"hi"}]}`,
			"X-Session", session)
		if resp.StatusCode != 200 {
			t.Fatalf("session %s: %d %s", session, resp.StatusCode, body)
		}
		return resp.Header.Get("X-LLM-Engine")
	}
	// the first answer's two nodes join once they pass their first check
	eventually(t, "two members from the first answer", func() bool { return len(serving(poolMembers(t, "demo"))) == 2 })
	byMember := map[string]string{} // a session key each member serves
	for i := 0; len(byMember) < 2 && i < 64; i++ {
		s := "s" + strconv.Itoa(i)
		byMember[ask(s)] = s
	}
	if byMember[member(0)] == "" || byMember[member(1)] == "" {
		t.Fatalf("sessions did not spread over both members: %v", byMember)
	}
	// a session keeps its member while it exists
	for range 3 {
		if got := ask(byMember[member(1)]); got != member(1) {
			t.Fatalf("a session of %s moved to %s", member(1), got)
		}
	}

	// a node that appears joins within the refresh interval (and its check)
	resolver.set(map[string]int{target(0): wires[0].port, target(1): wires[1].port, target(2): wires[2].port})
	gained := time.Now()
	eventually(t, "the third node joins", func() bool { return poolMembers(t, "demo")[member(2)] == "" && len(poolMembers(t, "demo")) == 3 })
	t.Logf("a node added to the SRV answer served after %v (refresh %v)", time.Since(gained).Round(time.Millisecond), refresh)
	for i := 0; wires[2].count() == 0; i++ {
		if i == 64 {
			t.Fatal("no session went to the node that joined")
		}
		ask("t" + strconv.Itoa(i))
	}

	// a node that leaves while it streams: the stream finishes, the
	// member drains, its sessions move, and once it is let go no request
	// reaches it. The node that joined took some sessions: a session of
	// node 0 is looked for again over the three.
	byMember = map[string]string{}
	for i := 0; byMember[member(0)] == ""; i++ {
		if i == 64 {
			t.Fatal("no session went to node 0 of three")
		}
		s := "v" + strconv.Itoa(i)
		byMember[ask(s)] = s
	}
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("X-Session", byMember[member(0)])
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if got := resp.Header.Get("X-LLM-Engine"); got != member(0) {
		t.Fatalf("the stream went to %s, not %s", got, member(0))
	}
	stream := bufio.NewReader(resp.Body)
	if _, err := stream.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	resolver.set(map[string]int{target(1): wires[1].port, target(2): wires[2].port})
	lost := time.Now()
	eventually(t, "the node that left drains", func() bool { return poolMembers(t, "demo")[member(0)] == "draining" })
	t.Logf("a node removed from the SRV answer stopped taking requests after %v", time.Since(lost).Round(time.Millisecond))
	if got := ask(byMember[member(0)]); got == member(0) {
		t.Fatalf("a session went to %s after its address left", got)
	}
	rest, err := readAll(stream)
	if err != nil || !strings.Contains(rest, "twelve") || !strings.Contains(rest, "[DONE]") {
		t.Fatalf("the draining member's stream did not finish: %v\n%s", err, rest)
	}
	eventually(t, "the drained member is let go", func() bool {
		_, ok := poolMembers(t, "demo")[member(0)]
		return !ok
	})
	after := wires[0].count()
	for i := range 20 {
		if got := ask("u" + strconv.Itoa(i)); got == member(0) {
			t.Fatalf("request %d went to a member let go", i)
		}
	}
	if wires[0].count() != after {
		t.Fatalf("the node whose address left was sent %d requests after its drain", wires[0].count()-after)
	}
	// the admin API lists the members that serve as engines, and not the
	// one let go
	if s := status(t, member(1)); s.Name != member(1) {
		t.Fatalf("member %s is not on the admin API: %+v", member(1), s)
	}
	if r, _ := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/engines/"+member(0))); r.StatusCode != http.StatusNotFound {
		t.Fatalf("the member let go is still on the admin API: %d", r.StatusCode)
	}
}

func readAll(r *bufio.Reader) (string, error) {
	b, err := io.ReadAll(r)
	return string(b), err
}
