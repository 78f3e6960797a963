package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
)

// An older llama-server (Chat Completions only) answers a request with
// tools with a 500 "Unsupported param: tools". Through Caddy, Claude Code's
// SDK (Anthropic's, a streamed Messages request with tools), Codex's (a
// Responses request with tools) and a Chat client's hear it at once as a
// 400 in their own API's shape, with what the engine refused and how to
// make it accept it; thirty of them (the breaker opens at five failures)
// leave the model's breaker closed, so the other users of the model are
// served, in every API; the faults are counted by kind, and Caddy's log
// warns once of what the engine refused and how to make it accept it.
func TestAnEnginesRefusalOfToolsReachesClaudeCodeAndCodexAsA400(t *testing.T) {
	llama := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		var body map[string]json.RawMessage
		if json.NewDecoder(r.Body).Decode(&body) == nil && body["tools"] != nil {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			w.Write([]byte(`{"error":{"code":500,"message":"Unsupported param: tools","type":"server_error"}}`))
			return
		}
		okChat(w, r)
	})
	logFile := startGateway(t, `
		engine old-llama {
			to `+llama.URL+`
			models coder
			api chat
			breaker 5
		}`)
	before := scrape(t)
	ctx := context.Background()
	claude := anthropicSDK()
	codex := sdk("unused")
	for i := range 10 {
		start := time.Now()
		stream := claude.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "coder", MaxTokens: 100,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("read main.go"))},
			Tools:    []anthropic.ToolUnionParam{anthropic.ToolUnionParamOfTool(anthropic.ToolInputSchemaParam{Properties: map[string]any{"path": map[string]any{"type": "string"}}}, "read")},
		})
		for stream.Next() {
		}
		var ae *anthropic.Error
		if err := stream.Err(); !errors.As(err, &ae) || ae.StatusCode != 400 || !strings.Contains(ae.RawJSON(), `"type":"invalid_request_error"`) ||
			!strings.Contains(ae.RawJSON(), "Unsupported param: tools") || !strings.Contains(ae.RawJSON(), "--jinja") {
			t.Fatalf("Claude Code's request %d: %v", i, stream.Err())
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("Claude Code waited %s for the refusal", took)
		}
		_, err := codex.Responses.New(ctx, responses.ResponseNewParams{
			Model: "coder",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("read main.go")},
			Tools: []responses.ToolUnionParam{responses.ToolParamOfFunction("read", map[string]any{"type": "object"}, false)},
		})
		if e := apiError(t, err, 400); e.Code != "tools_not_supported" || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "Unsupported param: tools") {
			t.Fatalf("Codex's request %d: %+v", i, e)
		}
		chat := chatParams("coder", "read main.go")
		chat.Tools = weatherToolChat()
		_, err = codex.Chat.Completions.New(ctx, chat)
		if e := apiError(t, err, 400); e.Code != "tools_not_supported" || e.Type != "invalid_request_error" || !strings.Contains(e.Message, "strip tools tool_choice parallel_tool_calls") {
			t.Fatalf("a Chat client's request %d: %+v", i, e)
		}
	}
	if n := len(llama.all()); n != 30 {
		t.Fatalf("the engine was sent %d requests, want 20: a refusal is neither retried nor failed over", n)
	}
	// the other users of the model are served, in every API (no 529
	// overloaded_error): its breaker heard no failure
	if c, err := codex.Chat.Completions.New(ctx, chatParams("coder", "hi")); err != nil || c.Choices[0].Message.Content != "ok" {
		t.Fatalf("another user: %v", err)
	}
	m, err := claude.Messages.New(ctx, anthropic.MessageNewParams{Model: "coder", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
	if err != nil || len(m.Content) != 1 || m.Content[0].Text != "ok" {
		t.Fatalf("another Messages user: %v", err)
	}
	after := scrape(t)
	labels := `engine="old-llama",kind="tools"`
	if n := sample(t, after, "llm_gateway_request_faults_total", labels) - sample(t, before, "llm_gateway_request_faults_total", labels); n != 30 {
		t.Fatalf("faults counted %v, want 30\n%s", n, grepLines(after, "request_faults"))
	}
	// one warning of the minute says it (the other refusals are debug lines)
	var warned []map[string]any
	for _, line := range strings.Split(readFile(t, logFile), "\n") {
		var l map[string]any
		if json.Unmarshal([]byte(line), &l) == nil && l["level"] == "warn" && l["kind"] == "tools" {
			warned = append(warned, l)
		}
	}
	if len(warned) != 1 || warned[0]["engine"] != "old-llama" || warned[0]["refused"] != "Unsupported param: tools" ||
		!strings.Contains(warned[0]["fix"].(string), "--jinja") || !strings.Contains(warned[0]["fix"].(string), "strip tools tool_choice parallel_tool_calls") {
		t.Fatalf("the warnings %v", warned)
	}
}
