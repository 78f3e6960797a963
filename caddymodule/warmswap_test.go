package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

// Warm swaps through Caddy with the OpenAI SDK and the demo
// engine, which sleeps and wakes as vLLM does and saves slots as
// llama-server does.

// sleepAndStop are two engines that do not fit together: a sleeps when b
// needs the room, b stops when a does.
var sleepAndStop = `
		memory_budget 10GiB
		engine a {
			` + engineCmd("--model a") + `
			models a
			memory 10GiB
			swap sleep
		}
		engine b {
			` + engineCmd("--model b") + `
			models b
			memory 10GiB
		}`

func TestASleepingEngineIsWokenByARequestThroughCaddy(t *testing.T) {
	startGateway(t, sleepAndStop)
	client := sdk("")
	ctx := context.Background()
	if _, err := client.Chat.Completions.New(ctx, chatParams("a", "hi")); err != nil {
		t.Fatal(err)
	}
	pid := status(t, "a").PID
	if _, err := client.Chat.Completions.New(ctx, chatParams("b", "hi")); err != nil {
		t.Fatal(err)
	}
	// no room for both: a sleeps, its process and pid kept
	if s := status(t, "a"); s.State != "sleeping" || s.PID != pid {
		t.Fatalf("a after b: %s pid %d (was %d)", s.State, s.PID, pid)
	}
	resp, body := do(t, mustReq(http.MethodGet, gwURL+"/v1/models/a"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"status":{"value":"sleeping"}`) {
		t.Fatalf("/v1/models/a: %d %s", resp.StatusCode, body)
	}
	_, body = do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/memory"))
	var use engines.MemoryUse
	if json.Unmarshal([]byte(body), &use) != nil || use.Used != 10<<30 || len(use.Asleep) != 1 || use.Asleep[0] != "a" || use.AsleepMemory != 10<<30 {
		t.Fatalf("memory: %s", body)
	}
	metrics := scrape(t)
	if sample(t, metrics, "llm_gateway_engine_state", `engine="a",state="sleeping"`) != 1 ||
		sample(t, metrics, "llm_gateway_engine_sleeps_total", `engine="a",outcome="ok"`) != 1 {
		t.Fatalf("metrics:\n%s", grepLines(metrics, `engine="a"`))
	}
	// a request wakes it and is answered by the same process
	got, err := client.Chat.Completions.New(ctx, chatParams("a", "hi"))
	if err != nil || len(got.Choices) == 0 || got.Choices[0].Message.Content == "" {
		t.Fatalf("%v %+v", err, got)
	}
	if s := status(t, "a"); s.State != "ready" || s.PID != pid {
		t.Fatalf("a after its wake: %s pid %d (was %d)", s.State, s.PID, pid)
	}
	if s := status(t, "b"); s.State != "stopped" {
		t.Fatalf("b is %s: it should have made room for a's wake", s.State)
	}
	if v := sample(t, scrape(t), "llm_gateway_engine_wakes_total", `engine="a",outcome="ok"`); v != 1 {
		t.Fatalf("wakes %v", v)
	}
}

// engineCounters asks a demo engine what it processed.
func engineCounters(t *testing.T, name string) demoengine.Counters {
	t.Helper()
	port := status(t, name).Port
	resp, body := do(t, mustReq(http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/counters"))
	var c demoengine.Counters
	if resp.StatusCode != 200 || json.Unmarshal([]byte(body), &c) != nil {
		t.Fatalf("counters: %d %s", resp.StatusCode, body)
	}
	return c
}

// A conversation resumed after its engine was stopped has its slot
// restored before its next turn: the engine processes the new message, not
// the conversation again. With X-Session-Id, and without (its prompt's
// blocks name it).
func TestAResumedConversationsSlotIsRestoredAndItsPromptNotProcessedAgain(t *testing.T) {
	dir := t.TempDir()
	startGateway(t, `
		engine l {
			`+engineCmd("--model l --slots 2 --slot-save-path "+dir)+`
			models l
			slots save `+dir+` {
				parallel 2
			}
		}`)
	client := sdk("")
	ctx := context.Background()
	long := strings.Repeat("the quick brown fox jumps over the lazy dog ", 60)
	conversation := func(who string, turns int) openai.ChatCompletionNewParams {
		p := chatParams("l", who+" "+long)
		for i := 1; i < turns; i++ {
			p.Messages = append(p.Messages, openai.AssistantMessage("sure"), openai.UserMessage("and then?"))
		}
		return p
	}
	for _, tc := range []struct {
		who  string
		opts []option.RequestOption
	}{
		{"alice", []option.RequestOption{option.WithHeader("X-Session-Id", "alice")}},
		{"bob", nil}, // no session key: the prefix of his prompt
	} {
		if _, err := client.Chat.Completions.New(ctx, conversation(tc.who, 2), tc.opts...); err != nil {
			t.Fatal(err)
		}
		whole := engineCounters(t, "l").Processed
		if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/l/stop")); resp.StatusCode != 200 {
			t.Fatalf("stop: %d %s", resp.StatusCode, body)
		}
		if _, err := client.Chat.Completions.New(ctx, conversation(tc.who, 3), tc.opts...); err != nil {
			t.Fatal(err)
		}
		c := engineCounters(t, "l") // a fresh process: its counts are the resumed turn's
		if c.Restored == 0 || c.Processed*10 > whole+c.Processed {
			t.Fatalf("%s's resumed turn: processed %d tokens, restored %d, of a conversation of %d", tc.who, c.Processed, c.Restored, whole+c.Processed)
		}
		t.Logf("%s: the resumed turn processed %d tokens of %d (%d restored)", tc.who, c.Processed, whole+c.Processed, c.Restored)
		if s := status(t, "l").Slots; s == nil || s.Restores == 0 {
			t.Fatalf("slots status %+v", s)
		}
	}
}

// A sleeping engine on the status page, in a real browser: its state, the
// budget's card listing it asleep with the host memory it holds, and its
// stop button (its process runs).
func TestStatusPageShowsASleepingEngineInABrowser(t *testing.T) {
	ctx := browser(t)
	startGateway(t, `
		key ops `+uiKey+`
		ui /llm`+sleepAndStop)
	for _, m := range []string{"a", "b"} {
		if resp, body := post(t, "/v1/chat/completions", `{"model":"`+m+`"}`, "Authorization", "Bearer "+uiKey); resp.StatusCode != 200 {
			t.Fatalf("%s: %d %s", m, resp.StatusCode, body)
		}
	}
	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")))
	run(t, ctx, "the key", chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	until(t, ctx, "a asleep", engineState("a")+` === 'sleeping'`)
	box := `document.querySelector('#memory [data-box="memory_budget"]')`
	until(t, ctx, "the budget lists it", `!!`+box+` && (`+box+`.querySelector('[data-field="asleep"]') || {}).textContent === 'asleep: a (10 GiB in host memory)'`)
	if disabled := eval[bool](t, ctx, `document.querySelector('article[data-engine="a"] [data-act="stop"]').disabled`); disabled {
		t.Fatal("a sleeping engine's stop button is disabled: its process runs")
	}
}
