package caddymodule

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/option"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// A pool of two engines the gateway starts serves with the one that runs
// until it is busy: a stopped member was never started while another was
// ready, even with the ready one's place taken and requests queued behind
// it. With warm_spare, the request that finds every ready member's places
// taken starts the stopped one in the background (it queues on the busy
// one meanwhile), the spare says why it started, and the next request goes
// to it.
func TestAPoolStartsAWarmSpareWhenItsReadyMemberIsBusy(t *testing.T) {
	startGateway(t, `
		engine a {
			`+engineCmd("--model a --chunk-delay 500ms --words-per-chunk 1")+`
			models qwen-a
			max_concurrent 1
			queue 4
		}
		engine b {
			`+engineCmd("--model b --reply ok --chunk-delay 1ms")+`
			models qwen-b
			max_concurrent 1
			queue 4
		}
		pool qwen {
			member a
			member b
			warm_spare
		}`)
	client := sdk("")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	// a long answer holds a's one place: the pool started a, not b
	long := client.Chat.Completions.NewStreaming(ctx, chatParams("qwen", "tell me a long story"))
	if !long.Next() {
		t.Fatalf("the long answer: %v", long.Err())
	}
	defer long.Close()
	if s := status(t, "b"); s.State != "stopped" {
		t.Fatalf("b %s while a had room", s.State)
	}

	// the next request finds a's place taken: it queues on a, and b starts
	queued := make(chan struct{})
	go func() {
		defer close(queued)
		s := client.Chat.Completions.NewStreaming(ctx, chatParams("qwen", "and another"))
		for s.Next() {
		}
		s.Close()
	}()
	b := awaitState(t, "b", "ready")
	if !strings.HasPrefix(b.Why.Started, "warm spare for pool qwen: every ready member busy (a 1 of 1 places taken)") {
		t.Fatalf("b started for %q", b.Why.Started)
	}
	if s := status(t, "a"); s.State != "ready" {
		t.Fatalf("a %s", s.State)
	}
	_, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools"))
	var pools []handler.PoolStatus
	if err := json.Unmarshal([]byte(body), &pools); err != nil || len(pools) != 1 || pools[0].WarmSpare != b.Why.Started {
		t.Fatalf("the pool does not say why it started a spare: %v %s", err, body)
	}

	// and takes the next request, while a is busy
	var resp *http.Response
	if _, err := client.Chat.Completions.New(context.Background(), chatParams("qwen", "hi"), option.WithResponseInto(&resp)); err != nil {
		t.Fatal(err)
	}
	if by := resp.Header.Get("X-LLM-Engine"); by != "b" {
		t.Fatalf("served by %q while a is busy and b ready", by)
	}
	cancel()
	<-queued
}
