package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"testing"
)

// The swap: false group of docs/llama-swap.md, as examples/llama-swap
// writes it: a coder and its autocomplete model fit the budget together,
// a chat model fits beside neither, so they run together and a chat
// request stops both (and the persistent reranker, outside the budget,
// stays). /v1/models carries each model's name, description and metadata.
func TestAGroupThatDoesNotSwapRunsTogetherAndGivesWayToAnother(t *testing.T) {
	startGateway(t, `
		memory_budget 24GiB
		engine qwen {
			`+engineCmd("--model qwen")+`
			models qwen
			memory 16GiB
			display_name "Qwen3 8B"
			description "General chat"
			metadata context 32768
			metadata vendor Qwen
		}
		engine coder {
			`+engineCmd("--model coder")+`
			models coder
			memory 14GiB
		}
		engine coder-fim {
			`+engineCmd("--model coder-fim")+`
			models coder-fim
			memory 10GB
		}
		engine reranker {
			`+engineCmd("--model bge")+`
			models bge
		}`)
	client := sdk("")
	ctx := context.Background()
	ask := func(model string) {
		t.Helper()
		if _, err := client.Chat.Completions.New(ctx, chatParams(model, "hi")); err != nil {
			t.Fatalf("%s: %v", model, err)
		}
	}
	type model struct {
		ID          string          `json:"id"`
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Metadata    json.RawMessage `json:"metadata"`
		Status      struct{ Value string }
	}
	listed := func() map[string]model {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, gwURL+"/v1/models", nil)
		resp, body := do(t, req)
		var list struct{ Data []model }
		if err := json.Unmarshal([]byte(body), &list); err != nil || resp.StatusCode != 200 {
			t.Fatalf("%d %v: %s", resp.StatusCode, err, body)
		}
		byID := map[string]model{}
		for _, m := range list.Data {
			byID[m.ID] = m
		}
		return byID
	}
	states := func() string {
		t.Helper()
		m := listed()
		return m["qwen"].Status.Value + " " + m["coder"].Status.Value + " " + m["coder-fim"].Status.Value + " " + m["bge"].Status.Value
	}

	ask("bge")
	ask("coder")
	ask("coder-fim")
	if got := states(); got != "unloaded loaded loaded loaded" {
		t.Fatalf("after coder and coder-fim: qwen coder coder-fim bge = %s", got)
	}
	ask("qwen")
	if got := states(); got != "loaded unloaded unloaded loaded" {
		t.Fatalf("after qwen: qwen coder coder-fim bge = %s", got)
	}
	ask("coder-fim")
	if got := states(); got != "unloaded unloaded loaded loaded" {
		t.Fatalf("after coder-fim again: qwen coder coder-fim bge = %s", got)
	}

	m := listed()
	q := m["qwen"]
	if q.Name != "Qwen3 8B" || q.Description != "General chat" || string(q.Metadata) != `{"context":32768,"vendor":"Qwen"}` {
		t.Fatalf("qwen is listed as %+v (metadata %s)", q, q.Metadata)
	}
	if c := m["coder"]; c.Name != "" || c.Description != "" || c.Metadata != nil {
		t.Fatalf("coder is listed with words it was not given: %+v", c)
	}
}
