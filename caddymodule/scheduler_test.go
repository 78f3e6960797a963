package caddymodule

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Priority protects warm engines, through Caddy: a priority-0
// key's request for another model on a box of one place does not stop the
// priority-10 key's engine while its last use is within priority_grace; the
// high key is served warm meanwhile, the swap comes once the engine has
// been idle for the grace, and the metrics name the key that caused it.
func TestAHighPriorityKeysEngineOutlivesALowPriorityRequestWithinTheGrace(t *testing.T) {
	const grace = 4 * time.Second
	startGateway(t, `
		memory_budget 10GiB
		max_wait 10m
		priority_grace 4s
		key high high-key-0123456789abcdef {
			priority 10
		}
		key low low-key-0123456789abcdefg
		engine chat {
			`+engineCmd("--model chat")+`
			models chat
			memory 10GiB
		}
		engine batch {
			`+engineCmd("--model batch")+`
			models batch
			memory 10GiB
		}`)
	before := scrape(t)
	ask := func(key, model string) {
		t.Helper()
		resp, body := post(t, "/v1/chat/completions", `{"model":"`+model+`"}`, "Authorization", "Bearer "+key)
		if resp.StatusCode != 200 {
			t.Errorf("%s for %s: %d %s", model, key, resp.StatusCode, body)
		}
	}
	ask("high-key-0123456789abcdef", "chat")
	warm := status(t, "chat")

	low := make(chan struct{})
	go func() {
		defer close(low)
		ask("low-key-0123456789abcdefg", "batch")
	}()
	waitQueued(t, "batch", low)
	lastHigh := time.Now()
	ask("high-key-0123456789abcdef", "chat") // served warm, and its grace begins again
	if s := status(t, "chat"); s.State != "ready" || s.PID != warm.PID {
		t.Fatalf("within the grace chat is %s (pid %d, was %d): the low key's start stopped it", s.State, s.PID, warm.PID)
	}
	<-low

	chat := status(t, "chat")
	if chat.State != "stopped" || chat.Why.Stopped != "room for batch (needs 10 GiB of the memory_budget)" {
		t.Fatalf("chat is %s, stopped for %q", chat.State, chat.Why.Stopped)
	}
	if idle := chat.Why.StoppedAt.Sub(lastHigh); idle < grace {
		t.Fatalf("chat was stopped %v after the high key's last request, within the grace of %v", idle, grace)
	}
	if batch := status(t, "batch"); !strings.Contains(batch.Why.Started, "key low") || !strings.Contains(batch.Why.Started, "stopped chat for it") {
		t.Fatalf("batch started: %q", batch.Why.Started)
	}
	after := scrape(t)
	swaps := func(key string) float64 {
		labels := `devices="",group="",key="` + key + `"`
		return sample(t, after, "llm_gateway_swaps_by_key_total", labels) - sample(t, before, "llm_gateway_swaps_by_key_total", labels)
	}
	if swaps("low") != 1 || swaps("high") != 0 {
		t.Fatalf("swaps by key: low %v, high %v, want 1 and 0:\n%s", swaps("low"), swaps("high"), grepLines(after, "swaps_by_key"))
	}
	if strings.Contains(after, "low-key-0123456789abcdefg") || strings.Contains(after, "high-key-0123456789abcdef") {
		t.Fatal("a key's token is in the metrics")
	}
}

// waitQueued polls the admin API until a start of engine waits in the
// memory_budget's queue, and fails t if the request for it ends first.
func waitQueued(t *testing.T, engine string, done <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
		var use engines.MemoryUse
		if err := json.Unmarshal([]byte(body), &use); err != nil {
			t.Fatal(err)
		}
		for _, q := range use.Queue {
			if q.Engine == engine && strings.Contains(q.Why, "priority_grace") {
				return
			}
		}
		select {
		case <-done:
			t.Fatalf("the request for %s ended without waiting: %s", engine, body)
		case <-time.After(20 * time.Millisecond):
		}
	}
	t.Fatalf("no start of %s waits in the queue", engine)
}
