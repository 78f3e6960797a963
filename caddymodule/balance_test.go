package caddymodule

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// signalEngine is a fake llama-server with --metrics: it answers chats as
// name and publishes its deferred requests on /metrics.
func signalEngine(t *testing.T, name string, deferred *atomic.Int32) *recorder {
	chat := answerAs(name)
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/metrics" {
			fmt.Fprintf(w, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 1\n"+
				"# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred %d\n", deferred.Load())
			return
		}
		chat(w, r)
	})
}

// turn is the body of turn n of a conversation without a session key.
func turn(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"auto","messages":[{"role":"system","content":"You answer in one line."}`)
	for i := range n {
		fmt.Fprintf(&b, `,{"role":"user","content":"question %d %s"},{"role":"assistant","content":"answer %d %s"}`,
			i, strings.Repeat("and why ", 20), i, strings.Repeat("because ", 20))
	}
	return b.String() + `]}`
}

// signalledMembers starts three fake engines s0…s2 (start(i)) with
// signals read every 50 ms, and returns their engine blocks and a pool's
// member lines.
func signalledMembers(t *testing.T, start func(i int) *recorder) (engines, members string) {
	t.Helper()
	var e, m strings.Builder
	for i := range 3 {
		fmt.Fprintf(&e, "\t\tengine s%d {\n\t\t\tto %s\n\t\t\tmodels sig-%d\n\t\t\tready none\n\t\t\tsignals metrics\n\t\t\tsignals_interval 50ms\n\t\t}\n", i, start(i).URL, i)
		fmt.Fprintf(&m, "\t\t\tmember s%d\n", i)
	}
	return e.String(), m.String()
}

// servedTurn sends turn n and returns the engine that answered it.
func servedTurn(t *testing.T, n int) string {
	t.Helper()
	resp, body := post(t, "/v1/chat/completions", turn(n))
	if resp.StatusCode != 200 {
		t.Fatalf("turn %d: %d %s", n, resp.StatusCode, body)
	}
	return resp.Header.Get("X-LLM-Engine")
}

// The whole path through Caddy: a conversation stays on the engine that
// holds its prefix, leaves it once the engine's own /metrics says it
// queues, each choice is in the access log and counted, and the engines'
// metrics are under the gateway's own.
func TestAPoolFollowsTheConversationAndLeavesAnEngineThatQueues(t *testing.T) {
	var deferred [3]atomic.Int32
	engines, members := signalledMembers(t, func(i int) *recorder { return signalEngine(t, fmt.Sprint("s", i), &deferred[i]) })
	logFile := filepath.Join(t.TempDir(), "access.log")
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	log {
		output file %s
	}
	log_append llm_pool_choice {http.llm_gateway.pool_choice}
	llm_gateway {
%s		pool auto {
%s			balance affinity
		}
	}
}`, gwAddr, logFile, engines, members))
	before := scrape(t)
	home := servedTurn(t, 1)
	for n := 2; n <= 4; n++ {
		if got := servedTurn(t, n); got != home {
			t.Fatalf("turn %d went to %s, the conversation is on %s; %s", n, got, home, grepLines(scrape(t), "pool_choices"))
		}
	}
	// home's engine starts deferring requests: once the gateway has read
	// it, the next turn goes elsewhere
	deferred[home[1]-'0'].Store(6)
	deadline := time.Now().Add(10 * time.Second)
	for sample(t, scrape(t), "llm_gateway_engine_llamacpp_requests_deferred", `engine="`+home+`"`) != 6 {
		if time.Now().After(deadline) {
			t.Fatal("the engine's deferred requests never reached the gateway's /metrics")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := servedTurn(t, 5); got == home {
		t.Fatalf("turn 5 went to %s, whose engine queues", got)
	}
	after := scrape(t)
	delta := func(reason string) float64 {
		labels := `pool="auto",reason="` + reason + `"`
		return sample(t, after, "llm_gateway_pool_choices_total", labels) - sample(t, before, "llm_gateway_pool_choices_total", labels)
	}
	if delta("load") != 2 || delta("affinity") != 3 {
		t.Fatalf("choices: load %v affinity %v, want 2 and 3", delta("load"), delta("affinity"))
	}
	if v := sample(t, after, "llm_gateway_engine_load", `engine="`+home+`"`); v != 7 {
		t.Fatalf("engine load %v, want 1 processing + 6 deferred", v)
	}
	for {
		logs := readFile(t, logFile)
		if strings.Count(logs, `"llm_pool_choice":"affinity"`) == 3 && strings.Count(logs, `"llm_pool_choice":"load"`) == 2 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("access log: %s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// slotEngine is a fake llama-server with --metrics and --slots: 2 slots,
// busy of them processing requests the gateway did not send (another
// front door's).
func slotEngine(t *testing.T, name string, busy *atomic.Int32) *recorder {
	chat := answerAs(name)
	return newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/metrics":
			fmt.Fprintf(w, "llamacpp:requests_processing %d\nllamacpp:requests_deferred 0\n", busy.Load())
		case "/slots":
			fmt.Fprintf(w, `[{"id":0,"is_processing":%v},{"id":1,"is_processing":%v}]`, busy.Load() > 0, busy.Load() > 1)
		default:
			chat(w, r)
		}
	})
}

// Through Caddy: the gateway learns each llama-server's slots from /slots;
// a conversation leaves its engine once every slot there is taken by
// another front door's requests, though the engine defers nothing yet.
func TestAPoolLeavesAnEngineWhoseSlotsAreAllBusy(t *testing.T) {
	var busy [3]atomic.Int32
	engines, members := signalledMembers(t, func(i int) *recorder { return slotEngine(t, fmt.Sprint("s", i), &busy[i]) })
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	llm_gateway {
%s		pool auto {
%s		}
	}
}`, gwAddr, engines, members))
	home := servedTurn(t, 1)
	if got := servedTurn(t, 2); got != home {
		t.Fatalf("turn 2 went to %s, the conversation is on %s", got, home)
	}
	deadline := time.Now().Add(10 * time.Second)
	for sample(t, scrape(t), "llm_gateway_engine_capacity", `engine="`+home+`"`) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("the engine's 2 slots never reached the gateway: %s", grepLines(scrape(t), "engine_capacity"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	busy[home[1]-'0'].Store(2)
	for sample(t, scrape(t), "llm_gateway_engine_saturated", `engine="`+home+`"`) != 1 {
		if time.Now().After(deadline) {
			t.Fatalf("the engine's busy slots never reached the gateway: %s", grepLines(scrape(t), "engine_saturated"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if got := servedTurn(t, 3); got == home {
		t.Fatalf("turn 3 went to %s, whose every slot is busy", got)
	}
}
