package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// Any client, any engine, end to end: the official SDKs talk to a real
// Caddy in front of scripted engines that each speak one API
// (translate_engines_test.go), and every client gets its own grammar back:
// JSON answers, streams event by event, tool calls and their results over
// two turns, usage, errors.

// callerKey is the gateway key the tests' clients use: it must never reach
// an engine, which gets its own.
const callerKey = "caller-translate-key-0001"

// weatherResult is what the client's tool answers; the engines quote it.
const weatherResult = "18 degrees and sunny in Paris"

// anthropicClient is the Anthropic SDK pointed at the gateway with a key.
func anthropicClient(key string) anthropic.Client {
	return anthropic.NewClient(
		anthropicoption.WithHTTPClient(testClient),
		anthropicoption.WithBaseURL(gwURL+"/"),
		anthropicoption.WithAPIKey(key),
		anthropicoption.WithMaxRetries(0),
		anthropicoption.WithRequestTimeout(30*time.Second),
	)
}

// wantCity asserts tool arguments (JSON text) are get_weather's for Paris.
func wantCity(t *testing.T, what string, args string) {
	t.Helper()
	var a struct{ City string }
	if err := json.Unmarshal([]byte(args), &a); err != nil || a.City != "Paris" {
		t.Fatalf("%s: arguments %q, want {\"city\":\"Paris\"} (%v)", what, args, err)
	}
}

// ---- Meridian ----

// Meridian's request, verbatim: a Chat Completions client names an
// OpenAI engine that is rate limited and a body fallback that speaks only
// Anthropic's Messages; the answer is the fallback's, as a chat
// completion.
func TestMeridianFallbackToAMessagesEngine(t *testing.T) {
	limited := failing(t, 429, `{"error":{"message":"Rate limit reached for gpt-4o-mini","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	claude := scriptedMessages(t)
	startGateway(t, fmt.Sprintf(`
		keys %s
		annotate_response on
		engine openai {
			to %s
			models gpt-4o-mini
			api openai
		}
		engine anthropic {
			to %s
			api anthropic
			models claude-3-5-sonnet-20241022
			api_key some-key x-api-key
		}`, callerKey, limited.URL, claude.URL))

	check := func(t *testing.T, c openai.ChatCompletion, raw string) {
		t.Helper()
		if c.Object != "chat.completion" || len(c.Choices) != 1 || c.Choices[0].Message.Content != msgGreeting ||
			c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Role != "assistant" {
			t.Fatalf("not the Messages engine's answer as a chat completion: %s", raw)
		}
		if c.Usage.PromptTokens != msgInputTokens || c.Usage.CompletionTokens != msgOutputTokens ||
			c.Usage.TotalTokens != msgInputTokens+msgOutputTokens {
			t.Fatalf("usage %+v, want the engine's %d in, %d out", c.Usage, msgInputTokens, msgOutputTokens)
		}
		var extra struct {
			ExtraFields struct {
				Provider string `json:"provider"`
			} `json:"extra_fields"`
		}
		if json.Unmarshal([]byte(raw), &extra); extra.ExtraFields.Provider != "anthropic" {
			t.Fatalf("extra_fields.provider %q, want anthropic: %s", extra.ExtraFields.Provider, raw)
		}
	}

	for _, model := range []string{"openai/gpt-4o-mini", "gpt-4o-mini"} {
		t.Run(model, func(t *testing.T) {
			body := `{"model":"` + model + `","messages":[{"role":"user","content":"Hello!"}],"fallbacks":["anthropic/claude-3-5-sonnet-20241022"]}`
			resp, out := post(t, "/v1/chat/completions", body, "Authorization", "Bearer "+callerKey)
			if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "anthropic" {
				t.Fatalf("%d engine %q: %s", resp.StatusCode, resp.Header.Get("X-LLM-Engine"), out)
			}
			var c openai.ChatCompletion
			if err := json.Unmarshal([]byte(out), &c); err != nil {
				t.Fatalf("%v: %s", err, out)
			}
			check(t, c, out)
		})
	}

	t.Run("openai-go", func(t *testing.T) {
		var raw *http.Response
		c, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams("openai/gpt-4o-mini", "Hello!"),
			option.WithJSONSet("fallbacks", []string{"anthropic/claude-3-5-sonnet-20241022"}), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw.Header.Get("X-LLM-Engine") != "anthropic" {
			t.Fatalf("headers %v", raw.Header)
		}
		check(t, *c, c.RawJSON())
	})

	// what each engine was sent: the primary its own API, the fallback a
	// Messages request with its own key and version, never the caller's key
	for i, r := range limited.all() {
		if r.path != "/v1/chat/completions" || !strings.Contains(string(r.body), `"gpt-4o-mini"`) ||
			strings.Contains(string(r.body), "fallbacks") || strings.Contains(r.header.Get("Authorization"), callerKey) {
			t.Fatalf("the rate-limited engine's request %d: %s %v %s", i, r.path, r.header, r.body)
		}
	}
	for _, r := range claude.sawOnly(t, "/v1/messages", "X-Api-Key", "some-key", callerKey) {
		var m struct {
			Model     string `json:"model"`
			MaxTokens int    `json:"max_tokens"`
		}
		json.Unmarshal(r.body, &m)
		if m.Model != "claude-3-5-sonnet-20241022" || m.MaxTokens == 0 || r.header.Get("Anthropic-Version") != "2023-06-01" ||
			strings.Contains(string(r.body), "fallbacks") {
			t.Fatalf("the Messages engine was sent %s (anthropic-version %q)", r.body, r.header.Get("Anthropic-Version"))
		}
		if r.header.Get("Authorization") != "" {
			t.Fatalf("the Messages engine got an Authorization header besides its x-api-key: %q", r.header.Get("Authorization"))
		}
	}
	claude.noneRefused(t)
}

// ---- Anthropic SDK on a Chat engine ----

func weatherToolAnthropic() []anthropic.ToolUnionParam {
	return []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{
		Name:        "get_weather",
		Description: anthropic.String("The weather in a city"),
		InputSchema: anthropic.ToolInputSchemaParam{
			Properties: map[string]any{"city": map[string]any{"type": "string"}},
			Required:   []string{"city"},
		},
	}}}
}

// chatEngineGateway serves model gpt-chat from a scripted Chat-only engine
// with its own bearer key.
func chatEngineGateway(t *testing.T) *scriptedEngine {
	t.Helper()
	e := scriptedChat(t)
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine chatty {
			to %s
			api chat
			api_key chat-engine-key
			models gpt-chat
		}`, callerKey, e.URL))
	return e
}

func TestTranslatedAnthropicSDKOnAChatEngine(t *testing.T) {
	e := chatEngineGateway(t)
	c := anthropicClient(callerKey)
	ctx := context.Background()
	first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is the weather in Paris?"))}
	params := func(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
		return anthropic.MessageNewParams{
			Model:     "gpt-chat",
			MaxTokens: 1024,
			System:    []anthropic.TextBlockParam{{Text: "You are terse."}},
			Messages:  msgs,
			Tools:     weatherToolAnthropic(),
		}
	}
	// second is the turn after the tool ran: the assistant's tool_use, then
	// the tool_result
	second := func(t *testing.T, msg anthropic.Message) []anthropic.MessageParam {
		t.Helper()
		if msg.StopReason != anthropic.StopReasonToolUse {
			t.Fatalf("stop_reason %q, want tool_use: %s", msg.StopReason, msg.RawJSON())
		}
		var use *anthropic.ContentBlockUnion
		for i := range msg.Content {
			if msg.Content[i].Type == "tool_use" {
				use = &msg.Content[i]
			}
		}
		if use == nil || use.Name != "get_weather" || use.ID == "" {
			t.Fatalf("no get_weather tool_use: %s", msg.RawJSON())
		}
		wantCity(t, "tool_use input", string(use.Input))
		if msg.Usage.InputTokens != chatPromptTokens || msg.Usage.OutputTokens != chatCompletionTokens {
			t.Fatalf("usage %+v, want the engine's %d in, %d out", msg.Usage, chatPromptTokens, chatCompletionTokens)
		}
		return append(append([]anthropic.MessageParam{}, first...), msg.ToParam(),
			anthropic.NewUserMessage(anthropic.NewToolResultBlock(use.ID, weatherResult, false)))
	}
	final := func(t *testing.T, msg anthropic.Message) {
		t.Helper()
		if msg.StopReason != anthropic.StopReasonEndTurn || len(msg.Content) != 1 || msg.Content[0].Type != "text" ||
			msg.Content[0].Text != toolSaid+weatherResult || msg.Role != "assistant" || msg.Type != "message" {
			t.Fatalf("final answer: %s", msg.RawJSON())
		}
		if msg.Usage.InputTokens != chatPromptTokens || msg.Usage.OutputTokens != chatCompletionTokens {
			t.Fatalf("usage %+v", msg.Usage)
		}
	}

	t.Run("json", func(t *testing.T) {
		msg, err := c.Messages.New(ctx, params(first))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(msg.ID, "msg_") {
			t.Fatalf("id %q", msg.ID)
		}
		msg, err = c.Messages.New(ctx, params(second(t, *msg)))
		if err != nil {
			t.Fatal(err)
		}
		final(t, *msg)
	})

	stream := func(t *testing.T, msgs []anthropic.MessageParam) (anthropic.Message, []string) {
		t.Helper()
		s := c.Messages.NewStreaming(ctx, params(msgs))
		var acc anthropic.Message
		var types []string
		for s.Next() {
			ev := s.Current()
			types = append(types, ev.Type)
			if err := acc.Accumulate(ev); err != nil {
				t.Fatalf("accumulating %s: %v (events %v)", ev.RawJSON(), err, types)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%v (events %v)", err, types)
		}
		if len(types) < 4 || types[0] != "message_start" || strings.Join(types[len(types)-2:], " ") != "message_delta message_stop" {
			t.Fatalf("events %v", types)
		}
		return acc, types
	}
	t.Run("stream", func(t *testing.T) {
		msg, types := stream(t, first)
		if n := strings.Count(strings.Join(types, " "), "content_block_delta"); n < 2 {
			t.Fatalf("the arguments came in %d deltas, want them streamed: %v", n, types)
		}
		msg2, types := stream(t, second(t, msg))
		if n := strings.Count(strings.Join(types, " "), "content_block_delta"); n < 2 {
			t.Fatalf("the text came in %d deltas: %v", n, types)
		}
		final(t, msg2)
	})

	// the engine was sent Chat Completions with its own key, and the
	// second turns carried the call and its result as Chat messages
	reqs := e.sawOnly(t, "/v1/chat/completions", "Authorization", "chat-engine-key", callerKey)
	for _, r := range reqs {
		if r.header.Get("Anthropic-Version") != "" || r.header.Get("X-Api-Key") != "" {
			t.Fatalf("the Chat engine got Anthropic headers: %v", r.header)
		}
	}
	var turn2 providertest.ChatRequest
	json.Unmarshal(reqs[1].body, &turn2)
	if len(turn2.Messages) != 4 || turn2.Messages[0].Role != "system" || turn2.Messages[3].Role != "tool" ||
		turn2.Messages[2].ToolCalls[0].ID != turn2.Messages[3].ToolCallID || textOf(turn2.Messages[3].Content) != weatherResult {
		t.Fatalf("the second turn reached the engine as %s", reqs[1].body)
	}
	if s := string(reqs[2].body); !strings.Contains(s, `"include_usage":true`) {
		t.Fatalf("a streamed turn did not ask the engine for its usage: %s", s)
	}
	e.noneRefused(t)
}

// ---- openai-go chat on a Messages engine ----

func weatherToolChat() []openai.ChatCompletionToolUnionParam {
	return []openai.ChatCompletionToolUnionParam{openai.ChatCompletionFunctionTool(shared.FunctionDefinitionParam{
		Name:        "get_weather",
		Description: openai.String("The weather in a city"),
		Parameters: shared.FunctionParameters{
			"type":       "object",
			"properties": map[string]any{"city": map[string]any{"type": "string"}},
			"required":   []string{"city"},
		},
	})}
}

// messagesEngineGateway serves model claude-x from a scripted
// Messages-only engine with its own x-api-key.
func messagesEngineGateway(t *testing.T) *scriptedEngine {
	t.Helper()
	e := scriptedMessages(t)
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine claude {
			to %s
			api anthropic
			api_key msg-engine-key x-api-key
			models claude-x
		}`, callerKey, e.URL))
	return e
}

func TestTranslatedOpenAIChatOnAMessagesEngine(t *testing.T) {
	e := messagesEngineGateway(t)
	client := sdk(callerKey)
	ctx := context.Background()
	first := []openai.ChatCompletionMessageParamUnion{
		openai.SystemMessage("You are terse."),
		openai.UserMessage("What is the weather in Paris?"),
	}
	params := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
		return openai.ChatCompletionNewParams{Model: "claude-x", Messages: msgs, Tools: weatherToolChat()}
	}
	call := func(t *testing.T, c openai.ChatCompletion) openai.ChatCompletionMessageToolCallUnion {
		t.Helper()
		ch := c.Choices[0]
		if ch.FinishReason != "tool_calls" || len(ch.Message.ToolCalls) != 1 || ch.Message.ToolCalls[0].Function.Name != "get_weather" ||
			ch.Message.ToolCalls[0].ID == "" || ch.Message.Content != msgToolPreface {
			t.Fatalf("want the text and one get_weather call, finish tool_calls: %s", c.RawJSON())
		}
		wantCity(t, "tool call", ch.Message.ToolCalls[0].Function.Arguments)
		return ch.Message.ToolCalls[0]
	}
	final := func(t *testing.T, c openai.ChatCompletion) {
		t.Helper()
		if c.Choices[0].FinishReason != "stop" || c.Choices[0].Message.Content != toolSaid+weatherResult || len(c.Choices[0].Message.ToolCalls) != 0 {
			t.Fatalf("final answer: %s", c.RawJSON())
		}
		if c.Usage.PromptTokens != msgInputTokens || c.Usage.CompletionTokens != msgOutputTokens {
			t.Fatalf("usage %+v", c.Usage)
		}
	}

	t.Run("json", func(t *testing.T) {
		c, err := client.Chat.Completions.New(ctx, params(first))
		if err != nil {
			t.Fatal(err)
		}
		if c.Object != "chat.completion" || c.Usage.PromptTokens != msgInputTokens || c.Usage.CompletionTokens != msgOutputTokens {
			t.Fatalf("%s", c.RawJSON())
		}
		tc := call(t, *c)
		msgs := append(append([]openai.ChatCompletionMessageParamUnion{}, first...), c.Choices[0].Message.ToParam(),
			openai.ToolMessage(weatherResult, tc.ID))
		c, err = client.Chat.Completions.New(ctx, params(msgs))
		if err != nil {
			t.Fatal(err)
		}
		final(t, *c)
	})

	stream := func(t *testing.T, msgs []openai.ChatCompletionMessageParamUnion) (openai.ChatCompletion, int) {
		t.Helper()
		p := params(msgs)
		p.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		s := client.Chat.Completions.NewStreaming(ctx, p)
		var acc openai.ChatCompletionAccumulator
		chunks := 0
		var last openai.ChatCompletionChunk
		for s.Next() {
			last = s.Current()
			chunks++
			if !acc.AddChunk(last) {
				t.Fatalf("the accumulator refused chunk %d: %s", chunks, last.RawJSON())
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		// with include_usage the last chunk is the usage one, without choices
		if len(last.Choices) != 0 || last.Usage.PromptTokens != msgInputTokens || last.Usage.CompletionTokens != msgOutputTokens {
			t.Fatalf("last chunk %s, want the usage chunk", last.RawJSON())
		}
		return acc.ChatCompletion, chunks
	}
	t.Run("stream", func(t *testing.T) {
		c, chunks := stream(t, first)
		if chunks < 5 {
			t.Fatalf("%d chunks: the answer was not streamed", chunks)
		}
		tc := call(t, c)
		// the assistant turn as many clients send it back: an empty content
		// beside the calls, which Messages must not get as an empty block
		asst := openai.ChatCompletionAssistantMessageParam{
			Content: openai.ChatCompletionAssistantMessageParamContentUnion{OfString: openai.String("")},
			ToolCalls: []openai.ChatCompletionMessageToolCallUnionParam{{OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{
				ID:       tc.ID,
				Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: tc.Function.Name, Arguments: tc.Function.Arguments},
			}}},
		}
		msgs := append(append([]openai.ChatCompletionMessageParamUnion{}, first...),
			openai.ChatCompletionMessageParamUnion{OfAssistant: &asst}, openai.ToolMessage(weatherResult, tc.ID))
		c, _ = stream(t, msgs)
		final(t, c)
	})

	reqs := e.sawOnly(t, "/v1/messages", "X-Api-Key", "msg-engine-key", callerKey)
	for i, r := range reqs {
		if r.header.Get("Anthropic-Version") != "2023-06-01" || r.header.Get("Authorization") != "" {
			t.Fatalf("request %d: anthropic-version %q, Authorization %q", i, r.header.Get("Anthropic-Version"), r.header.Get("Authorization"))
		}
	}
	var turn2 providertest.MessagesRequest
	json.Unmarshal(reqs[1].body, &turn2)
	if textOf(turn2.System) != "You are terse." && string(turn2.System) != `"You are terse."` {
		t.Fatalf("the system message reached the engine as %s", reqs[1].body)
	}
	e.noneRefused(t)
}

// ---- openai-go Responses on a Chat engine ----

func weatherToolResponses() []responses.ToolUnionParam {
	return []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{
		Name:        "get_weather",
		Description: openai.String("The weather in a city"),
		Parameters: map[string]any{
			"type":                 "object",
			"properties":           map[string]any{"city": map[string]any{"type": "string"}},
			"required":             []string{"city"},
			"additionalProperties": false,
		},
		Strict: openai.Bool(true),
	}}}
}

func TestTranslatedOpenAIResponsesOnAChatEngine(t *testing.T) {
	e := chatEngineGateway(t)
	responsesToolTurns(t, "gpt-chat", chatPromptTokens, chatCompletionTokens)
	reqs := e.sawOnly(t, "/v1/chat/completions", "Authorization", "chat-engine-key", callerKey)
	var turn2 providertest.ChatRequest
	json.Unmarshal(reqs[1].body, &turn2)
	if n := len(turn2.Messages); n != 4 || turn2.Messages[0].Role != "system" || turn2.Messages[3].Role != "tool" ||
		textOf(turn2.Messages[3].Content) != weatherResult {
		t.Fatalf("the second turn reached the engine as %s", reqs[1].body)
	}
	e.noneRefused(t)
}

func TestTranslatedOpenAIResponsesOnAMessagesEngine(t *testing.T) {
	e := messagesEngineGateway(t)
	responsesToolTurns(t, "claude-x", msgInputTokens, msgOutputTokens)
	reqs := e.sawOnly(t, "/v1/messages", "X-Api-Key", "msg-engine-key", callerKey)
	var turn2 providertest.MessagesRequest
	json.Unmarshal(reqs[1].body, &turn2)
	if len(turn2.Messages) != 3 || textOf(turn2.System) != "You are terse." && string(turn2.System) != `"You are terse."` {
		t.Fatalf("the second turn reached the engine as %s", reqs[1].body)
	}
	e.noneRefused(t)
}

// responsesToolTurns has the Responses API call get_weather on model and
// answer with its output, as JSON and streamed; in and out are the
// engine's token counts.
func responsesToolTurns(t *testing.T, model string, in, out int64) {
	t.Helper()
	client := sdk(callerKey)
	ctx := context.Background()
	question := responses.ResponseInputItemParamOfMessage("What is the weather in Paris?", responses.EasyInputMessageRoleUser)
	params := func(items ...responses.ResponseInputItemUnionParam) responses.ResponseNewParams {
		return responses.ResponseNewParams{
			Model:        model,
			Instructions: openai.String("You are terse."),
			Input:        responses.ResponseNewParamsInputUnion{OfInputItemList: items},
			Tools:        weatherToolResponses(),
		}
	}
	call := func(t *testing.T, r responses.Response) responses.ResponseOutputItemUnion {
		t.Helper()
		var fc []responses.ResponseOutputItemUnion
		for _, it := range r.Output {
			if it.Type == "function_call" {
				fc = append(fc, it)
			}
		}
		if r.Status != "completed" || len(fc) != 1 || fc[0].Name != "get_weather" || fc[0].CallID == "" {
			t.Fatalf("want one get_weather function_call: %s", r.RawJSON())
		}
		if fc[0].ID != "" && !strings.HasPrefix(fc[0].ID, "fc_") {
			t.Fatalf("function_call item id %q: Responses' are fc_…", fc[0].ID)
		}
		wantCity(t, "function_call", fc[0].Arguments.OfString)
		return fc[0]
	}
	// second is the next turn's input: the call, then its output
	second := func(fc responses.ResponseOutputItemUnion) []responses.ResponseInputItemUnionParam {
		out := responses.ResponseInputItemParamOfFunctionCallOutput(weatherResult)
		out.OfFunctionCallOutput.CallID = openai.String(fc.CallID)
		return []responses.ResponseInputItemUnionParam{question,
			responses.ResponseInputItemParamOfFunctionCall(fc.Arguments.OfString, fc.CallID, fc.Name), out}
	}
	final := func(t *testing.T, r responses.Response) {
		t.Helper()
		if r.Status != "completed" || r.OutputText() != toolSaid+weatherResult || !strings.HasPrefix(r.ID, "resp_") ||
			r.Usage.InputTokens != in || r.Usage.OutputTokens != out {
			t.Fatalf("final response: %s", r.RawJSON())
		}
	}

	t.Run("json", func(t *testing.T) {
		r, err := client.Responses.New(ctx, params(question))
		if err != nil {
			t.Fatal(err)
		}
		fc := call(t, *r)
		r, err = client.Responses.New(ctx, params(second(fc)...))
		if err != nil {
			t.Fatal(err)
		}
		final(t, *r)
	})

	stream := func(t *testing.T, items ...responses.ResponseInputItemUnionParam) (responses.Response, []string) {
		t.Helper()
		s := client.Responses.NewStreaming(ctx, params(items...))
		var types []string
		var done responses.Response
		seq := int64(-1)
		for s.Next() {
			ev := s.Current()
			types = append(types, ev.Type)
			if ev.SequenceNumber <= seq {
				t.Fatalf("sequence_number %d after %d: %v", ev.SequenceNumber, seq, types)
			}
			seq = ev.SequenceNumber
			if ev.Type == "response.completed" {
				done = ev.Response
			}
		}
		if err := s.Err(); err != nil {
			t.Fatalf("%v (events %v)", err, types)
		}
		if len(types) < 4 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Fatalf("events %v", types)
		}
		return done, types
	}
	t.Run("stream", func(t *testing.T) {
		r, types := stream(t, question)
		if n := strings.Count(strings.Join(types, " "), "response.function_call_arguments.delta"); n < 2 {
			t.Fatalf("the arguments came in %d deltas: %v", n, types)
		}
		fc := call(t, r)
		r, types = stream(t, second(fc)...)
		if n := strings.Count(strings.Join(types, " "), "response.output_text.delta"); n < 2 {
			t.Fatalf("the text came in %d deltas: %v", n, types)
		}
		final(t, r)
	})
}

// ---- errors ----

// An engine's error reaches a client through translation in the client's
// own error shape, with the status and the engine's message.
func TestTranslatedErrorsHaveTheClientsShape(t *testing.T) {
	openAIBody := func(typ, code, msg string) string {
		return fmt.Sprintf(`{"error":{"message":%q,"type":%q,"param":null,"code":%q}}`, msg, typ, code)
	}
	anthropicBody := func(typ, msg string) string {
		return fmt.Sprintf(`{"type":"error","error":{"type":%q,"message":%q},"request_id":"req_1"}`, typ, msg)
	}
	engines := []struct {
		name, api string
		status    int
		body      string
	}{
		{"chat429", "chat", 429, openAIBody("requests", "rate_limit_exceeded", "Rate limit reached for requests")},
		{"chat500", "chat", 500, openAIBody("server_error", "", "The server had an error while processing your request")},
		{"chat529", "chat", 529, `upstream overloaded`},
		{"msg429", "anthropic", 429, anthropicBody("rate_limit_error", "Number of request tokens has exceeded your per-minute rate limit")},
		{"msg529", "anthropic", 529, anthropicBody("overloaded_error", "Overloaded")},
		{"msg500", "anthropic", 500, anthropicBody("api_error", "Internal server error")},
	}
	var site strings.Builder
	fmt.Fprintf(&site, "keys %s\n", callerKey)
	for _, e := range engines {
		up := failing(t, e.status, e.body)
		fmt.Fprintf(&site, "engine %s {\n to %s\n api %s\n models %s\n retries 0\n}\n", e.name, up.URL, e.api, e.name)
	}
	startGateway(t, site.String())
	ctx := context.Background()

	anthropicCases := []struct {
		model    string
		stream   bool
		status   int
		typ      anthropic.ErrorType
		contains string
	}{
		{"chat429", false, 429, anthropic.ErrorTypeRateLimitError, "Rate limit reached for requests"},
		{"chat429", true, 429, anthropic.ErrorTypeRateLimitError, "Rate limit reached for requests"},
		{"chat500", false, 500, anthropic.ErrorTypeAPIError, "The server had an error"},
		{"chat529", false, 529, anthropic.ErrorTypeOverloadedError, "upstream overloaded"},
	}
	for _, c := range anthropicCases {
		t.Run(fmt.Sprintf("anthropic-sdk %s stream=%v", c.model, c.stream), func(t *testing.T) {
			p := anthropic.MessageNewParams{Model: anthropic.Model(c.model), MaxTokens: 100,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}}
			cl := anthropicClient(callerKey)
			var err error
			if c.stream {
				s := cl.Messages.NewStreaming(ctx, p)
				for s.Next() {
				}
				err = s.Err()
			} else {
				_, err = cl.Messages.New(ctx, p)
			}
			var e *anthropic.Error
			if !errors.As(err, &e) {
				t.Fatalf("want an anthropic.Error, got %v", err)
			}
			if e.StatusCode != c.status || e.Type() != c.typ || !strings.Contains(e.Message, c.contains) {
				t.Fatalf("status %d type %q message %q, want %d %q containing %q; body %s", e.StatusCode, e.Type(), e.Message,
					c.status, c.typ, c.contains, e.RawJSON())
			}
			var shape struct {
				Type string `json:"type"`
			}
			if json.Unmarshal([]byte(e.RawJSON()), &shape); shape.Type != "error" {
				t.Fatalf("not Anthropic's error shape: %s", e.RawJSON())
			}
		})
	}

	openAICases := []struct {
		model     string
		responses bool
		status    int
		typ, code string
		contains  string
	}{
		{"msg429", false, 429, "rate_limit_error", "rate_limit_exceeded", "per-minute rate limit"},
		{"msg529", false, 529, "server_error", "server_is_overloaded", "Overloaded"},
		{"msg500", false, 500, "server_error", "", "Internal server error"},
		{"msg500", true, 500, "server_error", "", "Internal server error"},
		{"msg429", true, 429, "rate_limit_error", "rate_limit_exceeded", "per-minute rate limit"},
	}
	for _, c := range openAICases {
		t.Run(fmt.Sprintf("openai-go %s responses=%v", c.model, c.responses), func(t *testing.T) {
			var err error
			if c.responses {
				_, err = sdk(callerKey).Responses.New(ctx, responses.ResponseNewParams{Model: c.model,
					Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}})
			} else {
				_, err = sdk(callerKey).Chat.Completions.New(ctx, chatParams(c.model, "hi"))
			}
			e := apiError(t, err, c.status)
			// the SDK shows the inner object: the body's shape is read raw
			path, body := "/v1/chat/completions", `{"model":"`+c.model+`","messages":[{"role":"user","content":"hi"}]}`
			if c.responses {
				path, body = "/v1/responses", `{"model":"`+c.model+`","input":"hi"}`
			}
			resp, raw := post(t, path, body, "Authorization", "Bearer "+callerKey)
			var top map[string]json.RawMessage
			if json.Unmarshal([]byte(raw), &top); resp.StatusCode != c.status || len(top) != 1 || top["error"] == nil {
				t.Fatalf("not OpenAI's error shape {\"error\":{…}}: %d %s", resp.StatusCode, raw)
			}
			if e.Type != c.typ || e.Code != c.code || !strings.Contains(e.Message, c.contains) {
				t.Fatalf("type %q code %q message %q, want %q %q containing %q; body %s", e.Type, e.Code, e.Message,
					c.typ, c.code, c.contains, e.RawJSON())
			}
		})
	}
}

// ---- what cannot be translated ----

// A Chat request asking for two choices cannot go to an engine that speaks
// only Messages: a 400 that names the member and the engine, and the
// engine is never sent it.
func TestTranslationRefusesAMemberWithA400NamingItAndTheEngine(t *testing.T) {
	e := messagesEngineGateway(t)
	p := chatParams("claude-x", "hi")
	p.N = openai.Int(2)
	_, err := sdk(callerKey).Chat.Completions.New(context.Background(), p)
	ae := apiError(t, err, 400)
	if !strings.Contains(ae.Message, "claude") || !regexp.MustCompile(`\bn\b`).MatchString(ae.Message) || !strings.Contains(ae.Message, "speaks messages") {
		t.Fatalf("the message names neither the member n, the engine nor the API it speaks: %q", ae.Message)
	}
	if ae.Type != "invalid_request_error" {
		t.Fatalf("type %q", ae.Type)
	}
	if n := len(e.all()); n != 0 {
		t.Fatalf("the engine was sent %d requests", n)
	}
	// a Responses client's previous_response_id: the gateway keeps no
	// conversation, and says which API the engine speaks
	_, err = sdk(callerKey).Responses.New(context.Background(), responses.ResponseNewParams{Model: "claude-x",
		Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi")}, PreviousResponseID: openai.String("resp_1")})
	if ae := apiError(t, err, 400); !strings.Contains(ae.Message, "speaks messages") || !strings.Contains(ae.Message, "previous_response_id") {
		t.Fatalf("previous_response_id: %q", ae.Message)
	}
	// n:1 is what Messages answers anyway: it goes through
	p.N = openai.Int(1)
	if c, err := sdk(callerKey).Chat.Completions.New(context.Background(), p); err != nil || c.Choices[0].Message.Content != msgGreeting {
		t.Fatalf("n:1: %v %+v", err, c)
	}
	e.noneRefused(t)
}

// ---- keys ----

// A key restricted to a model cannot reach another engine by naming it
// "engine/model", translated or not.
func TestTranslatedEngineSlashModelRespectsKeyRules(t *testing.T) {
	const limitedKey = "limited-translate-key-0001"
	chat := scriptedChat(t)
	claude := scriptedMessages(t)
	startGateway(t, fmt.Sprintf(`
		key team %s {
			models gpt-chat
		}
		key ops %s
		engine chatty {
			to %s
			api chat
			models gpt-chat
		}
		engine claude {
			to %s
			api anthropic
			models claude-x
		}`, limitedKey, callerKey, chat.URL, claude.URL))
	ctx := context.Background()
	limited := anthropicClient(limitedKey)
	for _, model := range []string{"claude/claude-x", "claude", "chatty/claude-x"} {
		_, err := sdk(limitedKey).Chat.Completions.New(ctx, chatParams(model, "hi"))
		apiError(t, err, 403)
		_, err = limited.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		var ae *anthropic.Error
		if !errors.As(err, &ae) || ae.StatusCode != 403 || ae.Type() != anthropic.ErrorTypePermissionError {
			t.Fatalf("%s through Messages: want a 403 permission_error, got %v", model, err)
		}
	}
	if n := len(claude.all()); n != 0 {
		t.Fatalf("the engine the key may not use was sent %d requests", n)
	}
	// what the key may use it reaches through translation, by either name
	for _, model := range []string{"gpt-chat", "chatty/gpt-chat"} {
		msg, err := limited.Messages.New(ctx, anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 10,
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
		if err != nil || msg.Content[0].Text != chatGreeting {
			t.Fatalf("%s: %v", model, err)
		}
	}
	// the unrestricted key reaches the Messages engine by its slash name
	c, err := sdk(callerKey).Chat.Completions.New(ctx, chatParams("claude/claude-x", "hi"))
	if err != nil || c.Choices[0].Message.Content != msgGreeting {
		t.Fatalf("ops key: %v", err)
	}
	chat.noneRefused(t)
	claude.noneRefused(t)
}

// ---- resume ----

// messagesThatBreaks streams the first 40 canned words as a Messages
// answer, then cuts the connection.
func messagesThatBreaks(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/messages" {
		providertest.AnthropicError(w, 404, "not_found_error", "Not Found")
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	event := func(name, data string) {
		fmt.Fprintf(w, "event: %s\ndata: %s\n\n", name, data)
		w.(http.Flusher).Flush()
	}
	event("message_start", `{"type":"message_start","message":{"id":"msg_primary","type":"message","role":"assistant","model":"primary-model","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":9,"output_tokens":1}}}`)
	event("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)
	event("ping", `{"type":"ping"}`)
	for _, word := range canned[:40] {
		q, _ := json.Marshal(word)
		event("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":`+string(q)+`}}`)
	}
	panic(http.ErrAbortHandler)
}

// chatContinuing is a Chat-only engine that continues the canned text
// after the assistant message placed last (content a string or text parts).
func chatContinuing(t *testing.T) *scriptedEngine {
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			providertest.OpenAIError(w, 404, "invalid_request_error", "Invalid URL")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req providertest.ChatRequest
		if msg := providertest.CheckChat(body, &req); msg != "" {
			e.refuse(msg)
			providertest.OpenAIError(w, 400, "invalid_request_error", msg)
			return
		}
		last := req.Messages[len(req.Messages)-1]
		prefix := textOf(last.Content)
		if last.Role != "assistant" || prefix == "" || !strings.HasPrefix(cannedText(), prefix) {
			msg := fmt.Sprintf("the last message is %s %q, not a prefix of the canned text", last.Role, prefix)
			e.refuse(msg)
			providertest.OpenAIError(w, 400, "invalid_request_error", msg)
			return
		}
		var rest []string
		for _, f := range strings.SplitAfter(strings.TrimPrefix(cannedText(), prefix), " ") {
			if f != "" {
				rest = append(rest, f)
			}
		}
		streamWords(w, "fb-9", 999, "backup-model", rest)
		io.WriteString(w, `data: {"id":"fb-9","object":"chat.completion.chunk","created":999,"model":"backup-model","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			io.WriteString(w, `data: {"id":"fb-9","object":"chat.completion.chunk","created":999,"model":"backup-model","choices":[],"usage":{"prompt_tokens":50,"completion_tokens":20,"total_tokens":70}}`+"\n\n")
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
	return e
}

// A Messages stream cut mid-answer is resumed on a fallback that speaks
// only Chat Completions: the Anthropic SDK accumulates one whole message.
func TestTranslatedMessagesStreamResumesOnAChatFallback(t *testing.T) {
	primary := newRecorder(t, messagesThatBreaks)
	backup := chatContinuing(t)
	startGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			api anthropic
			models big
			fallback backup
			resume on
			stream_idle_timeout 300ms
		}
		engine backup {
			to %s
			api chat
			models backup
			prefill on
		}`, primary.URL, backup.URL))
	client := anthropicSDK()
	s := client.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{
		Model: "big", MaxTokens: 1000,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("count to 60"))},
	})
	var acc anthropic.Message
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulating %s: %v (events %v)", ev.RawJSON(), err, types)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("%v (events %v; backup refused %q)", err, types, backup.refused)
	}
	joined := strings.Join(types, " ")
	if strings.Count(joined, "message_start") != 1 || strings.Count(joined, "content_block_start") != 1 ||
		strings.Count(joined, "message_stop") != 1 || types[len(types)-1] != "message_stop" {
		t.Fatalf("not one message: events %v", types)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != cannedText() || acc.StopReason != anthropic.StopReasonEndTurn || acc.ID != "msg_primary" {
		t.Fatalf("the client accumulated %s\nwant the text %q", acc.RawJSON(), cannedText())
	}
	if n := len(backup.all()); n != 1 {
		t.Fatalf("the backup saw %d requests", n)
	}
	backup.noneRefused(t)
}

// ---- parallel tool calls ----

// Two calls in one turn keep apart in both directions, streamed and not
// (every fragment under one index merged them in other translators), ids
// an Anthropic client may not get are made ones it may, and the two
// results go back to the engine as its API wants them: two tool messages
// after the calls for Chat, one user message with both tool_results for
// Messages.
func TestTranslatedParallelToolCalls(t *testing.T) {
	const paris, lyon = "sunny in Paris", "rainy in Lyon"
	ask := "What is the weather in " + bothCities + "?"
	ctx := context.Background()

	t.Run("anthropic-sdk on chat", func(t *testing.T) {
		e := chatEngineGateway(t)
		c := anthropicClient(callerKey)
		first := []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(ask))}
		params := func(msgs []anthropic.MessageParam) anthropic.MessageNewParams {
			return anthropic.MessageNewParams{Model: "gpt-chat", MaxTokens: 1024, Messages: msgs, Tools: weatherToolAnthropic()}
		}
		turn := func(t *testing.T, stream bool, msgs []anthropic.MessageParam) anthropic.Message {
			t.Helper()
			if !stream {
				m, err := c.Messages.New(ctx, params(msgs))
				if err != nil {
					t.Fatal(err)
				}
				return *m
			}
			s := c.Messages.NewStreaming(ctx, params(msgs))
			var acc anthropic.Message
			for s.Next() {
				if err := acc.Accumulate(s.Current()); err != nil {
					t.Fatalf("accumulating %s: %v", s.Current().RawJSON(), err)
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			return acc
		}
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
				msg := turn(t, stream, first)
				var uses []anthropic.ContentBlockUnion
				for _, b := range msg.Content {
					if b.Type == "tool_use" {
						uses = append(uses, b)
					}
				}
				if msg.StopReason != anthropic.StopReasonToolUse || len(uses) != 2 || uses[0].ID == uses[1].ID {
					t.Fatalf("want two tool_use blocks with their own ids: %s", msg.RawJSON())
				}
				for i, city := range []string{"Paris", "Lyon"} {
					if !providertest.ToolUseID.MatchString(uses[i].ID) {
						t.Errorf("tool_use id %q does not match ^[a-zA-Z0-9_-]+$: Anthropic refuses it in the next turn", uses[i].ID)
					}
					var in struct{ City string }
					if json.Unmarshal(uses[i].Input, &in); in.City != city {
						t.Fatalf("tool_use %d input %s, want %s", i, uses[i].Input, city)
					}
				}
				msgs := append(append([]anthropic.MessageParam{}, first...), msg.ToParam(), anthropic.NewUserMessage(
					anthropic.NewToolResultBlock(uses[0].ID, paris, false), anthropic.NewToolResultBlock(uses[1].ID, lyon, false)))
				final := turn(t, stream, msgs)
				if final.StopReason != anthropic.StopReasonEndTurn || len(final.Content) != 1 || final.Content[0].Text != toolSaid+paris+"; "+lyon {
					t.Fatalf("final answer: %s", final.RawJSON())
				}
			})
		}
		e.noneRefused(t)
	})

	t.Run("openai-go on messages", func(t *testing.T) {
		e := messagesEngineGateway(t)
		client := sdk(callerKey)
		first := []openai.ChatCompletionMessageParamUnion{openai.UserMessage(ask)}
		params := func(msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletionNewParams {
			return openai.ChatCompletionNewParams{Model: "claude-x", Messages: msgs, Tools: weatherToolChat()}
		}
		turn := func(t *testing.T, stream bool, msgs []openai.ChatCompletionMessageParamUnion) openai.ChatCompletion {
			t.Helper()
			if !stream {
				c, err := client.Chat.Completions.New(ctx, params(msgs))
				if err != nil {
					t.Fatal(err)
				}
				return *c
			}
			s := client.Chat.Completions.NewStreaming(ctx, params(msgs))
			var acc openai.ChatCompletionAccumulator
			for s.Next() {
				if !acc.AddChunk(s.Current()) {
					t.Fatalf("the accumulator refused %s", s.Current().RawJSON())
				}
			}
			if err := s.Err(); err != nil {
				t.Fatal(err)
			}
			return acc.ChatCompletion
		}
		for _, stream := range []bool{false, true} {
			t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
				c := turn(t, stream, first)
				m := c.Choices[0].Message
				if c.Choices[0].FinishReason != "tool_calls" || len(m.ToolCalls) != 2 || m.ToolCalls[0].ID == m.ToolCalls[1].ID ||
					m.Content != msgToolPreface {
					t.Fatalf("want the text and two calls: %s", c.RawJSON())
				}
				for i, city := range []string{"Paris", "Lyon"} {
					var in struct{ City string }
					if json.Unmarshal([]byte(m.ToolCalls[i].Function.Arguments), &in); in.City != city {
						t.Fatalf("call %d arguments %q, want %s", i, m.ToolCalls[i].Function.Arguments, city)
					}
				}
				msgs := append(append([]openai.ChatCompletionMessageParamUnion{}, first...), m.ToParam(),
					openai.ToolMessage(paris, m.ToolCalls[0].ID), openai.ToolMessage(lyon, m.ToolCalls[1].ID))
				final := turn(t, stream, msgs)
				if final.Choices[0].FinishReason != "stop" || final.Choices[0].Message.Content != toolSaid+paris+"; "+lyon {
					t.Fatalf("final answer: %s", final.RawJSON())
				}
			})
		}
		e.noneRefused(t)
	})
}

// ---- translate off ----

// With translation off (for the handler or the engine) a request of an
// API the engine does not speak never reaches it: the client hears an
// error in its own shape instead.
func TestTranslateOffKeepsOtherAPIsAway(t *testing.T) {
	for _, where := range []string{"handler", "engine"} {
		t.Run(where, func(t *testing.T) {
			e := scriptedChat(t)
			handlerLine, engineLine := "translate off", ""
			if where == "engine" {
				handlerLine, engineLine = "", "translate off"
			}
			startGateway(t, fmt.Sprintf(`
				%s
				engine chatty {
					to %s
					api chat
					models gpt-chat
					%s
				}`, handlerLine, e.URL, engineLine))
			c := anthropicSDK()
			_, err := c.Messages.New(context.Background(), anthropic.MessageNewParams{Model: "gpt-chat", MaxTokens: 10,
				Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))}})
			var ae *anthropic.Error
			if !errors.As(err, &ae) || ae.StatusCode < 400 || ae.StatusCode >= 500 || !strings.Contains(ae.RawJSON(), `"type":"error"`) {
				t.Fatalf("want a 4xx in Anthropic's shape, got %v", err)
			}
			if n := len(e.all()); n != 0 {
				t.Fatalf("the engine was sent %d requests", n)
			}
			// its own API still reaches it
			if c, err := sdk("").Chat.Completions.New(context.Background(), chatParams("gpt-chat", "hi")); err != nil || c.Choices[0].Message.Content != chatGreeting {
				t.Fatalf("chat: %v", err)
			}
		})
	}
}

// A Chat engine's stream cut mid-answer reaches an Anthropic client as a
// stream that says so (an error), never as a message that looks whole.
func TestTranslatedCutStreamIsAnErrorForTheClient(t *testing.T) {
	cut := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		streamWords(w, "c1", 1, "m", []string{"Once ", "upon ", "a "})
		panic(http.ErrAbortHandler)
	})
	startGateway(t, fmt.Sprintf(`
		engine chatty {
			to %s
			api chat
			models gpt-chat
			retries 0
		}`, cut.URL))
	c := anthropicSDK()
	s := c.Messages.NewStreaming(context.Background(), anthropic.MessageNewParams{Model: "gpt-chat", MaxTokens: 100,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("a story"))}})
	var types []string
	var acc anthropic.Message
	for s.Next() {
		types = append(types, s.Current().Type)
		acc.Accumulate(s.Current())
	}
	if s.Err() == nil {
		t.Fatalf("the cut stream ended without an error: events %v, message %s", types, acc.RawJSON())
	}
	if len(acc.Content) == 0 || acc.Content[0].Text != "Once upon a " {
		t.Fatalf("the text before the cut: %s (events %v)", acc.RawJSON(), types)
	}
}
