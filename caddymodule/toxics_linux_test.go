//go:build linux

package caddymodule

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"
)

// Latency and a throttled link between the front door and its nodes:
// Toxiproxy, run in the test, stands between the front door and each node
// (each in a network namespace of its own, as in netns_linux_test.go).

// timedStream is one stream as its client saw it, timed.
type timedStream struct {
	engine       string
	ttft         time.Duration // to the first content event
	whole, errEv bool
}

func timeStream(t *testing.T) (timedStream, error) {
	start := time.Now()
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		return timedStream{}, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return timedStream{}, fmt.Errorf("status %d", resp.StatusCode)
	}
	o := timedStream{engine: resp.Header.Get("X-LLM-Engine")}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, `data: {"error"`):
			o.errEv = true
		case line == "data: [DONE]":
			o.whole = true
		case o.ttft == 0 && strings.Contains(line, `"content":"w`):
			o.ttft = time.Since(start)
		}
	}
	return o, nil
}

// runStreams sends n streams, workers at a time, and fails the test on any
// stream that is not whole.
func runStreams(t *testing.T, n, workers int) []timedStream {
	t.Helper()
	var mu sync.Mutex
	var out []timedStream
	var wg sync.WaitGroup
	jobs := make(chan int)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range jobs {
				o, err := timeStream(t)
				mu.Lock()
				if err != nil || !o.whole || o.errEv {
					t.Errorf("a stream through the toxic link: %+v %v", o, err)
				}
				out = append(out, o)
				mu.Unlock()
			}
		}()
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	return out
}

// p99 is the 99th percentile of the streams' times to first token on
// engine ("" for all).
func p99(streams []timedStream, engine string) time.Duration {
	var d []time.Duration
	for _, s := range streams {
		if engine == "" || s.engine == engine {
			d = append(d, s.ttft)
		}
	}
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	return d[min(len(d)-1, len(d)*99/100)]
}

func TestLatencyAndAThrottledLinkAcrossNetworkNamespaces(t *testing.T) {
	tn := newTestNet(t)
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(prometheus.NewRegistry()), zerolog.Nop())
	var proxies []*toxiproxy.Proxy
	for i := range 2 {
		addr := tn.node(i)
		streamingNodeOf(t, listenIn(t, "lg46-"+strconv.Itoa(i), net.JoinHostPort(addr, "8080")), 8, 20*time.Millisecond)
		p := toxiproxy.NewProxy(api, "node"+strconv.Itoa(i), "127.0.0.1:0", net.JoinHostPort(addr, "8080"))
		if err := p.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(p.Stop)
		proxies = append(proxies, p)
	}
	engine := func(name string, p *toxiproxy.Proxy) string {
		return fmt.Sprintf(`
		engine %s {
			to http://%s
			models %s
			model_name demo
		}`, name, p.Listen, name)
	}
	startGateway(t, engine("a", proxies[0])+engine("b", proxies[1])+`
		pool demo {
			member a
			member b
			balance least_loaded
		}`)

	// 300 ms more on every packet from node a: it holds its requests
	// longer, so new requests go by load to node b; nothing fails
	if _, err := proxies[0].Toxics.AddToxicJson(strings.NewReader(
		`{"name":"slow","type":"latency","stream":"downstream","attributes":{"latency":300}}`)); err != nil {
		t.Fatal(err)
	}
	streams := runStreams(t, 40, 4)
	onA, onB := 0, 0
	for _, s := range streams {
		switch s.engine {
		case "a":
			onA++
		case "b":
			onB++
		}
	}
	t.Logf("300 ms added to node a: %d streams on a, %d on b, none failed; p99 time to first token a %v, b %v",
		onA, onB, p99(streams, "a").Round(time.Millisecond), p99(streams, "b").Round(time.Millisecond))
	if onB <= onA {
		t.Fatalf("the slow node got %d streams and the other %d: load should move them away", onA, onB)
	}
	if err := proxies[0].Toxics.RemoveToxic(context.Background(), "slow"); err != nil {
		t.Fatal(err)
	}

	// a throttled, sliced link to both: slow, never broken
	for _, p := range proxies {
		for _, toxic := range []string{
			`{"name":"narrow","type":"bandwidth","stream":"downstream","attributes":{"rate":4}}`,
			`{"name":"sliced","type":"slicer","stream":"downstream","attributes":{"average_size":64,"size_variation":32,"delay":2000}}`,
		} {
			if _, err := p.Toxics.AddToxicJson(strings.NewReader(toxic)); err != nil {
				t.Fatal(err)
			}
		}
	}
	streams = runStreams(t, 20, 4)
	t.Logf("a 4 KB/s link cut in ~64-byte slices: %d streams whole; p99 time to first token %v",
		len(streams), p99(streams, "").Round(time.Millisecond))
}
