package caddymodule

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// What an engine speaks, learned (handler/spoken.go), through Caddy: an
// engine with no `api` line that is an older llama-server answers a
// Claude Code and a Codex request as if it spoke their APIs, each client
// in its own grammar, and its missing APIs cost one 404 each for the
// engine's process, none of which a client sees.
func TestAnOlderLlamaServerIsLearnedToSpeakOnlyChat(t *testing.T) {
	for _, plain := range []bool{false, true} {
		t.Run(fmt.Sprintf("plain text 404: %v", plain), func(t *testing.T) {
			llama := olderLlamaServer(t, plain)
			startGateway(t, fmt.Sprintf(`
		engine llama {
			to %s
			models qwen
			breaker 1 30s
			retries 0
		}`, llama.URL))
			ctx := context.Background()
			c := anthropicClient("")
			for i := range 2 {
				msg, err := c.Messages.New(ctx, anthropic.MessageNewParams{Model: "qwen", MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count"))}})
				if err != nil || msg.Content[0].Text != fakeSaid || msg.StopReason != anthropic.StopReasonEndTurn {
					t.Fatalf("Messages %d: %v %+v", i, err, msg)
				}
				s := c.Messages.NewStreaming(ctx, anthropic.MessageNewParams{Model: "qwen", MaxTokens: 64,
					Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count"))}})
				var acc anthropic.Message
				for s.Next() {
					if err := acc.Accumulate(s.Current()); err != nil {
						t.Fatal(err)
					}
				}
				if s.Err() != nil || acc.Content[0].Text != fakeSaid {
					t.Fatalf("Messages stream %d: %v %+v", i, s.Err(), acc)
				}
				r, err := sdk("").Responses.New(ctx, responses.ResponseNewParams{Model: "qwen",
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("count")}})
				if err != nil || r.OutputText() != fakeSaid {
					t.Fatalf("Responses %d: %v %+v", i, err, r)
				}
			}
			// one 404 per API for the engine's process; every answer came
			// from its Chat Completions
			var notFound []string
			for _, p := range paths(llama) {
				if p != "/v1/chat/completions" {
					notFound = append(notFound, p)
				}
			}
			if got := strings.Join(notFound, " "); got != "/v1/messages /v1/responses" {
				t.Fatalf("the engine was sent %v beside Chat Completions", notFound)
			}
			st := status(t, "llama")
			if strings.Join(st.Unspoken, " ") != "responses messages" || st.Breaker != "closed" || len(st.ModelBreakers) != 0 {
				t.Fatalf("admin API: unspoken %v, breaker %s %v", st.Unspoken, st.Breaker, st.ModelBreakers)
			}
		})
	}
}

// count_tokens on every engine (handler/counttokens.go), through Caddy,
// with Claude Code's SDK: an older llama-server and vLLM count with their
// tokenizers, ollama (whose Messages has no count_tokens) is estimated,
// and each costs its engine at most one 404 per process.
func TestCountTokensAnswersOnEveryEngine(t *testing.T) {
	llama, vllm, ollama := olderLlamaServer(t, false), olderVLLM(t), ollama014(t)
	startGateway(t, fmt.Sprintf(`
		engine llama {
			to %s
			models llama
		}
		engine vllm {
			to %s
			api chat
			models vllm
		}
		engine ollama {
			to %s
			ready /
			models ollama
		}`, llama.URL, vllm.URL, ollama.URL))
	c := anthropicClient("")
	params := func(model string) anthropic.MessageCountTokensParams {
		return anthropic.MessageCountTokensParams{Model: anthropic.Model(model),
			System:   anthropic.MessageCountTokensParamsSystemUnion{OfString: anthropic.String("You are Claude Code.")},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("list the files here"))},
			Tools: []anthropic.MessageCountTokensToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "Bash",
				InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"command": map[string]any{"type": "string"}}}}}},
		}
	}
	for _, e := range []struct {
		model, how string
		rec        *recorder
		tokens     func(int64) bool
		calls      string
	}{
		// its /tokenize counts the words of the translated prompt: the
		// system, the tool's definition, the message
		{"llama", "tokenizer", llama, func(n int64) bool { return n >= 8 }, "/v1/messages/count_tokens /tokenize /tokenize"},
		// vLLM renders the two Chat messages (system, user): ten tokens each
		{"vllm", "tokenizer", vllm, func(n int64) bool { return n == 20 }, "/tokenize /tokenize"},
		{"ollama", "estimate", ollama, func(n int64) bool { return n > 10 }, "/v1/messages/count_tokens /tokenize"},
	} {
		for i := range 2 {
			var resp *http.Response
			n, err := c.Messages.CountTokens(context.Background(), params(e.model), anthropicoption.WithResponseInto(&resp))
			if err != nil || !e.tokens(n.InputTokens) || resp.Header.Get("X-LLM-Token-Count") != e.how {
				t.Fatalf("%s count %d: %v, %d tokens, counted by %q", e.model, i, err, n.InputTokens, resp.Header.Get("X-LLM-Token-Count"))
			}
		}
		if got := strings.Join(paths(e.rec), " "); got != e.calls {
			t.Errorf("%s was sent %s, want %s", e.model, got, e.calls)
		}
	}
}

// A Messages client's stop_sequences reach a Chat engine as stop, and the
// string vLLM says it matched comes back as stop_sequence, in JSON and in
// the stream.
func TestAStopSequenceMatchedByVLLMReachesClaudeClients(t *testing.T) {
	vllm := olderVLLM(t)
	startGateway(t, fmt.Sprintf(`
		engine vllm {
			to %s
			api chat
			models vllm
		}`, vllm.URL))
	c := anthropicClient("")
	p := anthropic.MessageNewParams{Model: "vllm", MaxTokens: 64, StopSequences: []string{"four", "three"},
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count"))}}
	msg, err := c.Messages.New(context.Background(), p)
	if err != nil || msg.StopReason != anthropic.StopReasonStopSequence || msg.StopSequence != "three" || msg.Content[0].Text != "one, two, " {
		t.Fatalf("%v: %s", err, msg.RawJSON())
	}
	s := c.Messages.NewStreaming(context.Background(), p)
	var acc anthropic.Message
	for s.Next() {
		if err := acc.Accumulate(s.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if s.Err() != nil || acc.StopReason != anthropic.StopReasonStopSequence || acc.StopSequence != "three" {
		t.Fatalf("stream: %v, stop %q %q", s.Err(), acc.StopReason, acc.StopSequence)
	}
}
