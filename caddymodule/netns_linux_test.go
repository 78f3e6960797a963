//go:build linux

package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// A fleet across real network namespaces: each node serves from a network
// namespace of its own, joined to the test's (where the front door runs)
// by a veth pair, so that taking a link down is a real partition: no FIN,
// no reset, the packets go nowhere. Linux and root only.
//
// Before anything else, the whole test prefix (10.246.0.0/16) gets a
// blackhole route in the outer namespace: with a link down, its connected
// route is gone, and a packet to the node must be dropped here, never sent
// to the default gateway (off the machine).

const netnsPrefix = "10.246.0.0/16"

// testNet is the test's namespaces and links; Cleanup removes them all.
type testNet struct {
	t     *testing.T
	nodes []string // namespaces made
}

func ipCmd(t *testing.T, args ...string) error {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return nil
}

func newTestNet(t *testing.T) *testNet {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: it makes network namespaces and veth pairs")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	n := &testNet{t: t}
	// leftovers of a run that was killed
	for i := range 2 {
		_ = exec.Command("ip", "netns", "del", "lg46-"+strconv.Itoa(i)).Run()
		_ = exec.Command("ip", "link", "del", "lg46o"+strconv.Itoa(i)).Run()
	}
	_ = exec.Command("ip", "route", "del", "blackhole", netnsPrefix).Run()
	if err := ipCmd(t, "route", "add", "blackhole", netnsPrefix); err != nil {
		t.Skipf("cannot add the blackhole route that must come first: %v", err)
	}
	t.Cleanup(func() {
		for _, ns := range n.nodes {
			_ = exec.Command("ip", "netns", "del", ns).Run() // its veth end goes, and with it the pair
		}
		_ = exec.Command("ip", "route", "del", "blackhole", netnsPrefix).Run()
	})
	return n
}

// node makes namespace lg46-i, linked to the outer one by lg46o<i> (outer,
// 10.246.i.1) and lg46n<i> (inside, 10.246.i.2), and returns the node's
// address.
func (n *testNet) node(i int) string {
	t := n.t
	t.Helper()
	ns, outer, inner := "lg46-"+strconv.Itoa(i), "lg46o"+strconv.Itoa(i), "lg46n"+strconv.Itoa(i)
	sub := "10.246." + strconv.Itoa(i)
	steps := [][]string{
		{"netns", "add", ns},
		{"link", "add", outer, "type", "veth", "peer", "name", inner},
		{"link", "set", inner, "netns", ns},
		{"addr", "add", sub + ".1/24", "dev", outer},
		{"link", "set", outer, "up"},
		{"-n", ns, "addr", "add", sub + ".2/24", "dev", inner},
		{"-n", ns, "link", "set", inner, "up"},
		{"-n", ns, "link", "set", "lo", "up"},
	}
	for k, s := range steps {
		if err := ipCmd(t, s...); err != nil {
			if k == 0 {
				t.Skipf("no network namespaces here: %v", err)
			}
			t.Fatal(err)
		}
		if k == 0 {
			n.nodes = append(n.nodes, ns)
		}
	}
	return sub + ".2"
}

// link takes node i's link down (a partition) or up (healed).
func (n *testNet) link(i int, up bool) {
	state := "down"
	if up {
		state = "up"
	}
	if err := ipCmd(n.t, "link", "set", "lg46o"+strconv.Itoa(i), state); err != nil {
		n.t.Fatal(err)
	}
}

// listenIn listens on addr inside namespace ns: the socket is made on an OS
// thread moved into the namespace, and stays there whichever thread serves
// it. The thread is never unlocked, so it ends with its goroutine instead
// of serving other goroutines from the wrong namespace.
func listenIn(t *testing.T, ns, addr string) net.Listener {
	t.Helper()
	type result struct {
		ln  net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		runtime.LockOSThread()
		f, err := os.Open("/var/run/netns/" + ns)
		if err != nil {
			ch <- result{err: err}
			return
		}
		defer f.Close()
		if err := unix.Setns(int(f.Fd()), unix.CLONE_NEWNET); err != nil {
			ch <- result{err: fmt.Errorf("setns %s: %v", ns, err)}
			return
		}
		ln, err := net.Listen("tcp", addr)
		ch <- result{ln, err}
	}()
	r := <-ch
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.ln
}

// streamingNode is a model server that streams 40 chunks, 100ms apart, and
// a whole end.
func streamingNode(t *testing.T, ln net.Listener) *atomic.Int64 {
	return streamingNodeOf(t, ln, 40, 100*time.Millisecond)
}

// streamingNodeOf streams chunks chunks, gap apart.
func streamingNodeOf(t *testing.T, ln net.Listener, chunks int, gap time.Duration) *atomic.Int64 {
	var active atomic.Int64 // streams it is sending
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"demo","object":"model"}]}`)
	})
	mux.HandleFunc("POST /v1/chat/completions", func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		active.Add(1)
		defer active.Add(-1)
		w.Header().Set("Content-Type", "text/event-stream")
		f := w.(http.Flusher)
		for i := range chunks {
			fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"w%d \"}}]}\n\n", i)
			f.Flush()
			select {
			case <-r.Context().Done():
				return
			case <-time.After(gap):
			}
		}
		io.WriteString(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"model\":\"demo\",\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	})
	srv := &http.Server{Handler: mux}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return &active
}

// outcome of one stream as its client saw it.
type streamOutcome struct {
	engine string
	whole  bool // [DONE] after a finish
	errEv  bool // an in-band error event
	ended  time.Time
}

func streamOnce(t *testing.T, session string) (streamOutcome, error) {
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session", session)
	resp, err := testClient.Do(req)
	if err != nil {
		return streamOutcome{}, err
	}
	defer resp.Body.Close()
	o := streamOutcome{engine: resp.Header.Get("X-LLM-Engine")}
	if resp.StatusCode != 200 {
		return o, fmt.Errorf("status %d", resp.StatusCode)
	}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `data: {"error"`):
			o.errEv = true
		case line == "data: [DONE]":
			o.whole = true
		}
	}
	o.ended = time.Now()
	return o, nil
}

func TestAPartitionedNodeAcrossNetworkNamespaces(t *testing.T) {
	tn := newTestNet(t)
	addrs := []string{tn.node(0), tn.node(1)}
	active := make([]*atomic.Int64, len(addrs))
	for i, a := range addrs {
		active[i] = streamingNode(t, listenIn(t, "lg46-"+strconv.Itoa(i), net.JoinHostPort(a, "8080")))
	}
	const (
		interval = 500 * time.Millisecond
		fails    = 2
		idle     = time.Second
	)
	engine := func(name, addr string) string {
		return fmt.Sprintf(`
		engine %s {
			to http://%s:8080
			models %s
			model_name demo
			health_interval %s
			health_timeout 400ms
			health_fails %d
			health_path /v1/models
			stream_idle_timeout %s
			dial_timeout 500ms
		}`, name, addr, name, interval, fails, idle)
	}
	startGateway(t, engine("a", addrs[0])+engine("b", addrs[1])+`
		pool demo {
			member a
			member b
			sticky header X-Session
			breaker 5 2s
		}`)

	// sessions of each node, found by asking: the partitioned node
	// serves 50 streams, the other 10
	const streamsA, streamsB = 50, 10
	var onA, onB []string
	for i := 0; (len(onA) < streamsA || len(onB) < streamsB) && i < 600; i++ {
		s := "s" + strconv.Itoa(i)
		// a node's sessions are known from where the pool sends them:
		// rendezvous over the two, the same for every request
		if len(onA) < streamsA || len(onB) < streamsB {
			o, err := streamOnceShort(t, s)
			if err != nil {
				t.Fatal(err)
			}
			if o == "a" && len(onA) < streamsA {
				onA = append(onA, s)
			} else if o == "b" && len(onB) < streamsB {
				onB = append(onB, s)
			}
		}
	}
	if len(onA) < streamsA || len(onB) < streamsB {
		t.Fatalf("sessions did not spread: %d on a, %d on b", len(onA), len(onB))
	}

	// 60 streams, 50 on node a; once all run, a's link goes down
	var mu sync.Mutex
	var outs []streamOutcome
	var wg sync.WaitGroup
	for _, s := range append(append([]string{}, onA...), onB...) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			o, err := streamOnce(t, s)
			if err != nil {
				t.Errorf("session %s: %v", s, err)
				return
			}
			mu.Lock()
			outs = append(outs, o)
			mu.Unlock()
		}()
	}
	eventually(t, "every stream under way", func() bool { return active[0].Load() == streamsA && active[1].Load() == streamsB })
	partitioned := time.Now()
	tn.link(0, false)
	// the partitioned node's address now meets the blackhole, never the
	// default route
	if out, _ := exec.Command("ip", "route", "get", addrs[0]).CombinedOutput(); strings.Contains(string(out), " via ") {
		t.Fatalf("with its link down, node a is routed off the machine: %s", out)
	}
	var down time.Duration
	eventually(t, "node a is marked down", func() bool {
		if status(t, "a").State == "down" {
			down = time.Since(partitioned)
			return true
		}
		return false
	})
	wg.Wait()
	truncated, whole, errored := 0, 0, 0
	var lastEnd time.Duration
	for _, o := range outs {
		switch {
		case o.whole:
			whole++
		case o.errEv:
			errored++
			lastEnd = max(lastEnd, o.ended.Sub(partitioned))
		default:
			truncated++
		}
	}
	t.Logf("partition of node a: %d streams whole, %d ended with an in-band error (the last %v after the partition, idle budget %v), %d truncated; a marked down after %v (health_fails %d × health_interval %v)",
		whole, errored, lastEnd.Round(time.Millisecond), idle, truncated, down.Round(time.Millisecond), fails, interval)
	if truncated != 0 {
		t.Fatalf("%d streams ended without [DONE] or an error event", truncated)
	}
	if whole < len(onB) {
		t.Fatalf("only %d streams whole: node b's %d should all be", whole, len(onB))
	}
	if lastEnd > idle+5*time.Second {
		t.Fatalf("a stream of the partitioned node ended %v after the partition, its idle budget being %v", lastEnd, idle)
	}
	// a new session of a's goes to b meanwhile
	if got, err := streamOnceShort(t, onA[0]); err != nil || got != "b" {
		t.Fatalf("a session of the partitioned node went to %q: %v", got, err)
	}

	// healed: a comes back, and its sessions with it once the pool's
	// breaker for it (opened by its cut streams) lets a trial through
	tn.link(0, true)
	healed := time.Now()
	eventually(t, "node a is up again", func() bool { return status(t, "a").State != "down" })
	up := time.Since(healed)
	eventually(t, "a session of node a comes back to it", func() bool {
		got, err := streamOnceShort(t, onA[0])
		return err == nil && got == "a"
	})
	t.Logf("node a up %v after its link came back; its sessions back after %v (breaker cooldown 2s)",
		up.Round(time.Millisecond), time.Since(healed).Round(time.Millisecond))
}

// streamOnceShort starts a stream and reads only which engine serves it.
func streamOnceShort(t *testing.T, session string) (string, error) {
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Session", session)
	resp, err := testClient.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		return "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-LLM-Engine"), nil
}
