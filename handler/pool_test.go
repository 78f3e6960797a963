package handler

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// twoInstances builds two gateways from one config, as two Caddy instances
// behind a balancer would be: nothing is shared between them.
func twoInstances(t *testing.T) (*Gateway, *Gateway) {
	cfg := config.Config{
		Engines: []engines.Config{
			{Name: "a", To: "http://127.0.0.1:1", Models: []string{"ma"}},
			{Name: "b", To: "http://127.0.0.1:2", Models: []string{"mb"}},
			{Name: "c", To: "http://127.0.0.1:3", Models: []string{"mc"}},
			{Name: "d", To: "http://127.0.0.1:4", Models: []string{"md"}},
		},
		Pools: []config.PoolConfig{{Name: "auto", Members: []string{"a", "b/mb-2", "c", "d"}, StickyHeader: "X-Session-Id", BreakerFailures: 1}},
	}
	build := func() *Gateway {
		var es []*engines.Engine
		for _, ec := range cfg.Engines {
			e, err := engines.New(ec, http.DefaultTransport, zap.NewNop())
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { e.Destruct() })
			es = append(es, e)
		}
		g, err := New(cfg, es, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	return build(), build()
}

func pinned(g *Gateway, key string) string {
	return g.pools["auto"].order(key, nil)[0].id
}

func TestStickinessNeedsNoSharedState(t *testing.T) {
	g1, g2 := twoInstances(t)
	counts := map[string]int{}
	for i := range 1000 {
		key := fmt.Sprint("session-", i)
		m1, m2 := pinned(g1, key), pinned(g2, key)
		if m1 != m2 {
			t.Fatalf("session %s: instance 1 picks %s, instance 2 picks %s", key, m1, m2)
		}
		counts[m1]++
	}
	for id, n := range counts {
		if n < 150 || n > 350 {
			t.Fatalf("member %s holds %d of 1000 sessions: %v", id, n, counts)
		}
	}
}

func TestRecoveryMovesBackOnlyTheMembersOwnSessions(t *testing.T) {
	g, _ := twoInstances(t)
	p := g.pools["auto"]
	before := map[string]string{}
	for i := range 1000 {
		key := fmt.Sprint("s", i)
		before[key] = pinned(g, key)
	}
	var c *poolMember
	for _, m := range p.members {
		if m.id == "c" {
			c = m
		}
	}
	c.brk.Allow()
	c.brk.Failure() // c is down: its sessions go elsewhere, the others stay
	during := map[string]string{}
	for key, was := range before {
		during[key] = pinned(g, key)
		if was != "c" && during[key] != was {
			t.Fatalf("session %s moved from healthy %s to %s when c failed", key, was, during[key])
		}
		if during[key] == "c" {
			t.Fatalf("session %s still on the failed member", key)
		}
	}
	c.brk.Success() // c recovered
	for key, was := range before {
		if now := pinned(g, key); now != was {
			t.Fatalf("session %s: %s before the outage, %s after recovery", key, was, now)
		}
	}
}

func TestAPoolPrefersAnIdleMemberToABusyOnesQueue(t *testing.T) {
	held := newHeldEngine(t)
	idle := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { answerOK(w, "idle") }))
	defer idle.Close()
	_, url := testGateway(t, config.Config{
		Engines: []engines.Config{
			{Name: "a", To: held.URL, Models: []string{"m-a"}, ModelName: "m", MaxConcurrent: 1, Queue: 4},
			{Name: "b", To: idle.URL, Models: []string{"m-b"}, ModelName: "m", MaxConcurrent: 1, Queue: 4},
		},
		Pools: []config.PoolConfig{{Name: "m", Members: []string{"a", "b"}}},
	}, nil)
	// a holds one request; every next request goes to b, whatever the
	// rotation says, instead of waiting in a's queue
	var first <-chan answer
	for first == nil {
		done := postLater(t, url, `{"model":"m"}`)
		select {
		case <-held.arrived:
			first = done
		case a := <-done: // the rotation gave it to b
			if a.resp.StatusCode != 200 {
				t.Fatalf("%d", a.resp.StatusCode)
			}
		}
	}
	for range 4 {
		resp, body := postJSON(t, url, `{"model":"m"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "b" {
			t.Fatalf("%d %s %s", resp.StatusCode, resp.Header.Get("X-LLM-Engine"), body)
		}
	}
	held.free()
	if a := <-first; a.resp.StatusCode != 200 {
		t.Fatalf("the held request: %d", a.resp.StatusCode)
	}
}
