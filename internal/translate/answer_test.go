package translate

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// One answer of each API with a bit of everything: reasoning, text, tool
// calls (one id Messages would refuse, one call without arguments) and
// usage with cache counts.
const (
	anChatFixture = `{"id":"chatcmpl-abc","object":"chat.completion","created":1700000000,"model":"gpt-x",
	"choices":[{"index":0,"message":{"role":"assistant","content":"Hello <b>&amp;","reasoning_content":"think first",
	"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get","arguments":"{\"q\": \"x\"}"}},
	{"id":"functions.Bash:0","type":"function","function":{"name":"bash","arguments":""}}]},"finish_reason":"tool_calls"}],
	"usage":{"prompt_tokens":100,"completion_tokens":20,"total_tokens":120,"prompt_tokens_details":{"cached_tokens":40},"completion_tokens_details":{"reasoning_tokens":5}}}`

	anMessagesFixture = `{"id":"msg_01","type":"message","role":"assistant","model":"claude-x",
	"content":[{"type":"thinking","thinking":"hmm","signature":"sig=="},{"type":"text","text":"Hi "},{"type":"text","text":"there"},
	{"type":"tool_use","id":"toolu_1","name":"get","input":{"q":"x","n":[1,2]}}],
	"stop_reason":"tool_use","stop_sequence":null,
	"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":30,"output_tokens":7}}`

	anResponsesFixture = `{"id":"resp_9","object":"response","created_at":1700000001,"status":"completed","model":"gpt-r",
	"output":[{"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"plan"}]},
	{"type":"message","id":"msg_1","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Answer","annotations":[]}]},
	{"type":"function_call","id":"fc_1","call_id":"call_7","name":"get","arguments":"{\"q\":1}","status":"completed"}],
	"usage":{"input_tokens":50,"input_tokens_details":{"cached_tokens":10},"output_tokens":9,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":59}}`
)

func anTranslate(t *testing.T, from, to api.API, body string) []byte {
	t.Helper()
	out, err := AnswerBody(from, to, []byte(body), AnswerOptions{})
	if err != nil {
		t.Fatalf("Answer(%s→%s): %v", from, to, err)
	}
	if !json.Valid(out) {
		t.Fatalf("Answer(%s→%s) is not JSON: %s", from, to, out)
	}
	return out
}

// The official SDKs' types are the check: an answer a client's SDK reads
// wrong is wrong, whatever the table says.
func anAsChat(t *testing.T, b []byte) openai.ChatCompletion {
	t.Helper()
	var c openai.ChatCompletion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("openai.ChatCompletion: %v\n%s", err, b)
	}
	return c
}

func anAsMessage(t *testing.T, b []byte) anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("anthropic.Message: %v\n%s", err, b)
	}
	return m
}

func anAsResponse(t *testing.T, b []byte) responses.Response {
	t.Helper()
	var r responses.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("responses.Response: %v\n%s", err, b)
	}
	return r
}

func anEq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

func anJSONEq(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		t.Errorf("%s = %s, want %s (not JSON)", what, got, want)
		return
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}

func TestAnswerMessagesToChat(t *testing.T) {
	c := anAsChat(t, anTranslate(t, api.Messages, api.Chat, anMessagesFixture))
	anEq(t, "id", c.ID, "chatcmpl-01")
	anEq(t, "object", string(c.Object), "chat.completion")
	anEq(t, "model", c.Model, "claude-x")
	if c.Created == 0 {
		t.Error("created = 0, want now")
	}
	ch := c.Choices[0]
	anEq(t, "content", ch.Message.Content, "Hi there")
	anEq(t, "finish_reason", ch.FinishReason, "tool_calls")
	anEq(t, "reasoning_content", ch.Message.JSON.ExtraFields["reasoning_content"].Raw(), `"hmm"`)
	if len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("tool_calls = %d, want 1", len(ch.Message.ToolCalls))
	}
	tc := ch.Message.ToolCalls[0].AsFunction()
	anEq(t, "tool id", tc.ID, "toolu_1")
	anEq(t, "tool name", tc.Function.Name, "get")
	anJSONEq(t, "arguments", tc.Function.Arguments, `{"q":"x","n":[1,2]}`)
	// Messages' input excludes the cache's: Chat's prompt counts it all.
	anEq(t, "prompt_tokens", c.Usage.PromptTokens, 45)
	anEq(t, "cached_tokens", c.Usage.PromptTokensDetails.CachedTokens, 30)
	anEq(t, "completion_tokens", c.Usage.CompletionTokens, 7)
	anEq(t, "total_tokens", c.Usage.TotalTokens, 52)
}

func TestAnswerChatToMessages(t *testing.T) {
	m := anAsMessage(t, anTranslate(t, api.Chat, api.Messages, anChatFixture))
	anEq(t, "id", m.ID, "msg_abc")
	anEq(t, "type", string(m.Type), "message")
	anEq(t, "role", string(m.Role), "assistant")
	anEq(t, "model", string(m.Model), "gpt-x")
	anEq(t, "stop_reason", string(m.StopReason), "tool_use")
	anEq(t, "stop_sequence valid", m.JSON.StopSequence.Valid(), false)
	if len(m.Content) != 4 {
		t.Fatalf("content = %d blocks, want thinking, text, 2 tool_use: %+v", len(m.Content), m.Content)
	}
	th := m.Content[0].AsThinking()
	anEq(t, "thinking", th.Thinking, "think first")
	anEq(t, "signature", th.Signature, "")
	anEq(t, "text", m.Content[1].AsText().Text, "Hello <b>&amp;")
	tu := m.Content[2].AsToolUse()
	anEq(t, "tool id", tu.ID, "call_1")
	anEq(t, "tool name", tu.Name, "get")
	anJSONEq(t, "input", string(tu.Input), `{"q":"x"}`)
	tu = m.Content[3].AsToolUse()
	anEq(t, "sanitized id", tu.ID, "functions_Bash_0")
	anEq(t, "empty arguments", string(tu.Input), `{}`)
	// Chat's prompt_tokens includes the cache read: Messages' does not.
	anEq(t, "input_tokens", m.Usage.InputTokens, 60)
	anEq(t, "cache_read_input_tokens", m.Usage.CacheReadInputTokens, 40)
	anEq(t, "cache_creation_input_tokens", m.Usage.CacheCreationInputTokens, 0)
	anEq(t, "output_tokens", m.Usage.OutputTokens, 20)
}

func TestAnswerChatToResponses(t *testing.T) {
	r := anAsResponse(t, anTranslate(t, api.Chat, api.Responses, anChatFixture))
	anEq(t, "id", r.ID, "resp_abc")
	anEq(t, "object", string(r.Object), "response")
	anEq(t, "created_at", r.CreatedAt, 1700000000)
	anEq(t, "status", string(r.Status), "completed")
	anEq(t, "model", string(r.Model), "gpt-x")
	anEq(t, "output_text", r.OutputText(), "Hello <b>&amp;")
	anEq(t, "error valid", r.JSON.Error.Valid(), false)
	if len(r.Output) != 4 {
		t.Fatalf("output = %d items, want reasoning, message, 2 function_call: %s", len(r.Output), r.RawJSON())
	}
	rs := r.Output[0].AsReasoning()
	anEq(t, "reasoning type", r.Output[0].Type, "reasoning")
	anEq(t, "summary", rs.Summary[0].Text, "think first")
	msg := r.Output[1].AsMessage()
	anEq(t, "message status", string(msg.Status), "completed")
	if msg.ID == "" || msg.ID[:4] != "msg_" {
		t.Errorf("message id = %q, want msg_…", msg.ID)
	}
	fc := r.Output[2].AsFunctionCall()
	anEq(t, "call_id", fc.CallID, "call_1")
	anEq(t, "fc id", fc.ID, "fc_call_1")
	anEq(t, "name", fc.Name, "get")
	anJSONEq(t, "arguments", fc.Arguments, `{"q":"x"}`)
	anEq(t, "status", string(fc.Status), "completed")
	fc = r.Output[3].AsFunctionCall()
	anEq(t, "call_id kept", fc.CallID, "functions.Bash:0")
	anEq(t, "fc id sanitized", fc.ID, "fc_functions_Bash_0")
	anEq(t, "no arguments", fc.Arguments, "{}")
	anEq(t, "input_tokens", r.Usage.InputTokens, 100)
	anEq(t, "cached_tokens", r.Usage.InputTokensDetails.CachedTokens, 40)
	anEq(t, "output_tokens", r.Usage.OutputTokens, 20)
	anEq(t, "reasoning_tokens", r.Usage.OutputTokensDetails.ReasoningTokens, 5)
	anEq(t, "total_tokens", r.Usage.TotalTokens, 120)
}

func TestAnswerResponsesToChat(t *testing.T) {
	c := anAsChat(t, anTranslate(t, api.Responses, api.Chat, anResponsesFixture))
	anEq(t, "id", c.ID, "chatcmpl-9")
	anEq(t, "created", c.Created, 1700000001)
	ch := c.Choices[0]
	anEq(t, "content", ch.Message.Content, "Answer")
	anEq(t, "reasoning_content", ch.Message.JSON.ExtraFields["reasoning_content"].Raw(), `"plan"`)
	anEq(t, "finish_reason", ch.FinishReason, "tool_calls")
	tc := ch.Message.ToolCalls[0].AsFunction()
	anEq(t, "tool id is call_id", tc.ID, "call_7")
	anJSONEq(t, "arguments", tc.Function.Arguments, `{"q":1}`)
	anEq(t, "prompt_tokens", c.Usage.PromptTokens, 50)
	anEq(t, "cached_tokens", c.Usage.PromptTokensDetails.CachedTokens, 10)
	anEq(t, "reasoning_tokens", c.Usage.CompletionTokensDetails.ReasoningTokens, 3)
}

func TestAnswerResponsesToMessages(t *testing.T) {
	m := anAsMessage(t, anTranslate(t, api.Responses, api.Messages, anResponsesFixture))
	anEq(t, "id", m.ID, "msg_9")
	anEq(t, "stop_reason", string(m.StopReason), "tool_use")
	if len(m.Content) != 3 {
		t.Fatalf("content = %d blocks, want thinking, text, tool_use", len(m.Content))
	}
	anEq(t, "thinking", m.Content[0].AsThinking().Thinking, "plan")
	anEq(t, "text", m.Content[1].AsText().Text, "Answer")
	tu := m.Content[2].AsToolUse()
	anEq(t, "tool id", tu.ID, "call_7")
	anJSONEq(t, "input", string(tu.Input), `{"q":1}`)
	anEq(t, "input_tokens", m.Usage.InputTokens, 40)
	anEq(t, "cache_read_input_tokens", m.Usage.CacheReadInputTokens, 10)
	anEq(t, "output_tokens", m.Usage.OutputTokens, 9)
}

func TestAnswerMessagesToResponses(t *testing.T) {
	r := anAsResponse(t, anTranslate(t, api.Messages, api.Responses, anMessagesFixture))
	anEq(t, "id", r.ID, "resp_01")
	anEq(t, "status", string(r.Status), "completed")
	anEq(t, "output_text", r.OutputText(), "Hi there")
	rs := r.Output[0].AsReasoning()
	anEq(t, "summary", rs.Summary[0].Text, "hmm")
	anEq(t, "signature as encrypted_content", rs.EncryptedContent, "sig==")
	fc := r.Output[len(r.Output)-1].AsFunctionCall()
	anEq(t, "call_id", fc.CallID, "toolu_1")
	anEq(t, "fc id", fc.ID, "fc_toolu_1")
	anJSONEq(t, "arguments", fc.Arguments, `{"q":"x","n":[1,2]}`)
	anEq(t, "input_tokens", r.Usage.InputTokens, 45)
	anEq(t, "cached_tokens", r.Usage.InputTokensDetails.CachedTokens, 30)
}

// anGist is what a round trip must keep: text, tool calls, stop reason and
// counts, read back by this package's own readers.
type anGist struct {
	text, refusal string
	tools         []Block
	stop          Stop
	usage         api.Usage
}

func anGistOf(t *testing.T, from api.API, b []byte) anGist {
	t.Helper()
	var a Answer
	var err error
	switch from {
	case api.Chat:
		a, err = chatReadAnswer(b, AnswerOptions{})
	case api.Messages:
		a, err = messagesReadAnswer(b, AnswerOptions{})
	default:
		a, err = responsesReadAnswer(b, AnswerOptions{})
	}
	if err != nil {
		t.Fatalf("reading %s: %v\n%s", from, err, b)
	}
	a.settle(b)
	g := anGist{text: a.join(BlockText), refusal: a.join(BlockRefusal), stop: a.Stop, usage: a.Usage}
	for _, p := range a.Blocks {
		if p.Kind == BlockTool {
			p.Args = string(objectArgs(p.Args))
			g.tools = append(g.tools, Block{Kind: BlockTool, ID: p.ID, Name: p.Name, Args: p.Args})
		}
	}
	return g
}

func TestAnswerRoundTripsKeepTheGist(t *testing.T) {
	fixtures := map[api.API]string{
		api.Chat: `{"id":"chatcmpl-rt","created":1,"model":"m","choices":[{"message":{"content":"a<b","tool_calls":[{"id":"call_x","type":"function","function":{"name":"f","arguments":"{\"a\":1}"}}]},"finish_reason":"tool_calls"}],
			"usage":{"prompt_tokens":100,"completion_tokens":20,"prompt_tokens_details":{"cached_tokens":40}}}`,
		api.Messages:  anMessagesFixture,
		api.Responses: anResponsesFixture,
	}
	for _, a := range conversations {
		for _, b := range conversations {
			if a == b {
				continue
			}
			t.Run(a.String()+"→"+b.String()+"→"+a.String(), func(t *testing.T) {
				there := anTranslate(t, a, b, fixtures[a])
				back := anTranslate(t, b, a, string(there))
				want, got := anGistOf(t, a, []byte(fixtures[a])), anGistOf(t, a, back)
				anEq(t, "text", got.text, want.text)
				anEq(t, "stop", got.stop, want.stop)
				if len(got.tools) != len(want.tools) {
					t.Fatalf("tools = %+v, want %+v", got.tools, want.tools)
				}
				for i := range want.tools {
					anEq(t, "tool", got.tools[i], want.tools[i])
				}
				wantUsage := want.usage
				if a != api.Messages && b == api.Messages {
					// Messages has no reasoning count.
					wantUsage.Reasoning = 0
				}
				anEq(t, "usage", got.usage, wantUsage)
			})
		}
	}
}
