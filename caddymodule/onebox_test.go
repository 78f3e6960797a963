package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// One box, many models (issue 29), through Caddy with the OpenAI SDK: a
// memory budget that holds two of three engines; the third's request stops
// the least recently used idle one, and the admin API says what is loaded.
func TestAMemoryBudgetSwapsTheLeastRecentlyUsedEngineThroughCaddy(t *testing.T) {
	startGateway(t, `
		memory_budget 20GiB
		engine a {
			`+engineCmd("--model a")+`
			models a
			memory 10GiB
		}
		engine b {
			`+engineCmd("--model b")+`
			models b
			memory 10GiB
		}
		engine c {
			`+engineCmd("--model c")+`
			models c
			memory 10GiB
		}`)
	client := sdk("")
	ctx := context.Background()
	for _, model := range []string{"a", "b", "a", "c"} {
		if _, err := client.Chat.Completions.New(ctx, chatParams(model, "hi")); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	// b was used before a's second request: it made room for c
	for name, want := range map[string]string{"a": "ready", "b": "stopped", "c": "ready"} {
		if s := status(t, name); s.State != want {
			t.Errorf("%s is %s, want %s", name, s.State, want)
		}
	}
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
	var use engines.MemoryUse
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &use) != nil ||
		use.Used != 20<<30 || use.Budget != 20<<30 || len(use.Loaded) != 2 || use.Loaded[0] != "a" || use.Loaded[1] != "c" {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	metrics := scrape(t)
	if sample(t, metrics, "llm_gateway_memory_bytes", `what="used"`) != 20<<30 || sample(t, metrics, "llm_gateway_memory_bytes", `what="budget"`) != 20<<30 {
		t.Fatalf("memory metrics:\n%s", grepLines(metrics, "memory"))
	}
}
