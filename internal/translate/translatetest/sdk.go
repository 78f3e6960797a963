package translatetest

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// ReadSDK reads a client of to's stream with its official Go SDK's own
// accumulator, as a user's program would: openai-go's
// ChatCompletionAccumulator, anthropic-sdk-go's Message.Accumulate, and for
// Responses the response its terminal event carries (openai-go has no
// Responses accumulator; its ResponseStream hands over that event's
// response). Where Reassemble checks the stream's shape event by event,
// ReadSDK says what the user's SDK makes of it: the text, the tool calls
// with their arguments, the stop and the usage (thinking, signature and
// errors are Reassemble's alone).
func ReadSDK(t *testing.T, to api.API, evs []Event) Answer {
	t.Helper()
	var data []string
	for _, e := range evs {
		if !e.Comment && e.Data != "[DONE]" {
			data = append(data, e.Data)
		}
	}
	switch to {
	case api.Chat:
		return readChatSDK(t, data)
	case api.Messages:
		return readMessagesSDK(t, data)
	}
	return readResponsesSDK(t, data)
}

func readChatSDK(t *testing.T, data []string) Answer {
	t.Helper()
	var acc openai.ChatCompletionAccumulator
	for _, d := range data {
		var chunk openai.ChatCompletionChunk
		if err := json.Unmarshal([]byte(d), &chunk); err != nil {
			t.Fatalf("openai.ChatCompletionChunk: %v: %s", err, d)
		}
		if !acc.AddChunk(chunk) {
			t.Fatalf("ChatCompletionAccumulator refused %s", d)
		}
	}
	if len(acc.Choices) != 1 {
		t.Fatalf("%d choices", len(acc.Choices))
	}
	c := acc.Choices[0]
	a := Answer{Text: c.Message.Content, Stop: translate.ChatStop(c.FinishReason),
		Usage: api.Usage{Input: int(acc.Usage.PromptTokens), Output: int(acc.Usage.CompletionTokens),
			CacheRead: int(acc.Usage.PromptTokensDetails.CachedTokens)}}
	for _, call := range c.Message.ToolCalls {
		a.Tools = append(a.Tools, Call{call.ID, call.Function.Name, call.Function.Arguments})
	}
	return a
}

func readMessagesSDK(t *testing.T, data []string) Answer {
	t.Helper()
	var m anthropic.Message
	for _, d := range data {
		var e anthropic.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("anthropic.MessageStreamEventUnion: %v: %s", err, d)
		}
		if err := m.Accumulate(e); err != nil {
			t.Fatalf("Message.Accumulate: %v: %s", err, d)
		}
	}
	u := m.Usage
	a := Answer{Stop: translate.MessagesStop(string(m.StopReason)),
		Usage: api.Usage{Input: int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
			CacheRead: int(u.CacheReadInputTokens), CacheWrite: int(u.CacheCreationInputTokens), Output: int(u.OutputTokens)}}
	for _, b := range m.Content {
		switch b.Type {
		case "text":
			a.Text += b.Text
		case "tool_use":
			a.Tools = append(a.Tools, Call{b.ID, b.Name, string(b.Input)})
		}
	}
	return a
}

func readResponsesSDK(t *testing.T, data []string) Answer {
	t.Helper()
	var final *responses.Response
	for _, d := range data {
		var e responses.ResponseStreamEventUnion
		if err := json.Unmarshal([]byte(d), &e); err != nil {
			t.Fatalf("responses.ResponseStreamEventUnion: %v: %s", err, d)
		}
		switch e.Type {
		case "response.completed", "response.incomplete", "response.failed":
			final = &e.Response
		}
	}
	if final == nil {
		t.Fatal("a Responses stream without its terminal event")
	}
	a := Answer{Text: final.OutputText(),
		Usage: api.Usage{Input: int(final.Usage.InputTokens), Output: int(final.Usage.OutputTokens),
			CacheRead: int(final.Usage.InputTokensDetails.CachedTokens)}}
	for _, it := range final.Output {
		if it.Type == "function_call" {
			f := it.AsFunctionCall()
			a.Tools = append(a.Tools, Call{f.CallID, f.Name, f.Arguments})
		}
	}
	a.Stop = translate.ResponsesStop(string(final.Status), final.IncompleteDetails.Reason, len(a.Tools) > 0)
	return a
}
