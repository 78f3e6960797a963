package translate_test

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
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

func TestAnswerMessagesToChat(t *testing.T) {
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, anMessagesFixture))
	translatetest.Eq(t, "id", c.ID, "chatcmpl-01")
	translatetest.Eq(t, "object", string(c.Object), "chat.completion")
	translatetest.Eq(t, "model", c.Model, "claude-x")
	if c.Created == 0 {
		t.Error("created = 0, want now")
	}
	ch := c.Choices[0]
	translatetest.Eq(t, "content", ch.Message.Content, "Hi there")
	translatetest.Eq(t, "finish_reason", ch.FinishReason, "tool_calls")
	translatetest.Eq(t, "reasoning_content", ch.Message.JSON.ExtraFields["reasoning_content"].Raw(), `"hmm"`)
	if len(ch.Message.ToolCalls) != 1 {
		t.Fatalf("tool_calls = %d, want 1", len(ch.Message.ToolCalls))
	}
	tc := ch.Message.ToolCalls[0].AsFunction()
	translatetest.Eq(t, "tool id", tc.ID, "toolu_1")
	translatetest.Eq(t, "tool name", tc.Function.Name, "get")
	translatetest.JSONEq(t, "arguments", tc.Function.Arguments, `{"q":"x","n":[1,2]}`)
	// Messages' input excludes the cache's: Chat's prompt counts it all.
	translatetest.Eq(t, "prompt_tokens", c.Usage.PromptTokens, 45)
	translatetest.Eq(t, "cached_tokens", c.Usage.PromptTokensDetails.CachedTokens, 30)
	translatetest.Eq(t, "completion_tokens", c.Usage.CompletionTokens, 7)
	translatetest.Eq(t, "total_tokens", c.Usage.TotalTokens, 52)
}

func TestAnswerChatToMessages(t *testing.T) {
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, anChatFixture))
	translatetest.Eq(t, "id", m.ID, "msg_abc")
	translatetest.Eq(t, "type", string(m.Type), "message")
	translatetest.Eq(t, "role", string(m.Role), "assistant")
	translatetest.Eq(t, "model", string(m.Model), "gpt-x")
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "tool_use")
	translatetest.Eq(t, "stop_sequence valid", m.JSON.StopSequence.Valid(), false)
	if len(m.Content) != 4 {
		t.Fatalf("content = %d blocks, want thinking, text, 2 tool_use: %+v", len(m.Content), m.Content)
	}
	th := m.Content[0].AsThinking()
	translatetest.Eq(t, "thinking", th.Thinking, "think first")
	translatetest.Eq(t, "signature", th.Signature, "")
	translatetest.Eq(t, "text", m.Content[1].AsText().Text, "Hello <b>&amp;")
	tu := m.Content[2].AsToolUse()
	translatetest.Eq(t, "tool id", tu.ID, "call_1")
	translatetest.Eq(t, "tool name", tu.Name, "get")
	translatetest.JSONEq(t, "input", string(tu.Input), `{"q":"x"}`)
	tu = m.Content[3].AsToolUse()
	translatetest.Eq(t, "sanitized id", tu.ID, "functions_Bash_0")
	translatetest.Eq(t, "empty arguments", string(tu.Input), `{}`)
	// Chat's prompt_tokens includes the cache read: Messages' does not.
	translatetest.Eq(t, "input_tokens", m.Usage.InputTokens, 60)
	translatetest.Eq(t, "cache_read_input_tokens", m.Usage.CacheReadInputTokens, 40)
	translatetest.Eq(t, "cache_creation_input_tokens", m.Usage.CacheCreationInputTokens, 0)
	translatetest.Eq(t, "output_tokens", m.Usage.OutputTokens, 20)
}

func TestAnswerChatToResponses(t *testing.T) {
	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Chat, api.Responses, anChatFixture))
	translatetest.Eq(t, "id", r.ID, "resp_abc")
	translatetest.Eq(t, "object", string(r.Object), "response")
	translatetest.Eq(t, "created_at", r.CreatedAt, 1700000000)
	translatetest.Eq(t, "status", string(r.Status), "completed")
	translatetest.Eq(t, "model", string(r.Model), "gpt-x")
	translatetest.Eq(t, "output_text", r.OutputText(), "Hello <b>&amp;")
	translatetest.Eq(t, "error valid", r.JSON.Error.Valid(), false)
	if len(r.Output) != 4 {
		t.Fatalf("output = %d items, want reasoning, message, 2 function_call: %s", len(r.Output), r.RawJSON())
	}
	rs := r.Output[0].AsReasoning()
	translatetest.Eq(t, "reasoning type", r.Output[0].Type, "reasoning")
	translatetest.Eq(t, "summary", rs.Summary[0].Text, "think first")
	msg := r.Output[1].AsMessage()
	translatetest.Eq(t, "message status", string(msg.Status), "completed")
	if msg.ID == "" || msg.ID[:4] != "msg_" {
		t.Errorf("message id = %q, want msg_…", msg.ID)
	}
	fc := r.Output[2].AsFunctionCall()
	translatetest.Eq(t, "call_id", fc.CallID, "call_1")
	translatetest.Eq(t, "fc id", fc.ID, "fc_call_1")
	translatetest.Eq(t, "name", fc.Name, "get")
	translatetest.JSONEq(t, "arguments", fc.Arguments, `{"q":"x"}`)
	translatetest.Eq(t, "status", string(fc.Status), "completed")
	fc = r.Output[3].AsFunctionCall()
	translatetest.Eq(t, "call_id kept", fc.CallID, "functions.Bash:0")
	translatetest.Eq(t, "fc id sanitized", fc.ID, "fc_functions_Bash_0")
	translatetest.Eq(t, "no arguments", fc.Arguments, "{}")
	translatetest.Eq(t, "input_tokens", r.Usage.InputTokens, 100)
	translatetest.Eq(t, "cached_tokens", r.Usage.InputTokensDetails.CachedTokens, 40)
	translatetest.Eq(t, "output_tokens", r.Usage.OutputTokens, 20)
	translatetest.Eq(t, "reasoning_tokens", r.Usage.OutputTokensDetails.ReasoningTokens, 5)
	translatetest.Eq(t, "total_tokens", r.Usage.TotalTokens, 120)
}

func TestAnswerResponsesToChat(t *testing.T) {
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Responses, api.Chat, anResponsesFixture))
	translatetest.Eq(t, "id", c.ID, "chatcmpl-9")
	translatetest.Eq(t, "created", c.Created, 1700000001)
	ch := c.Choices[0]
	translatetest.Eq(t, "content", ch.Message.Content, "Answer")
	translatetest.Eq(t, "reasoning_content", ch.Message.JSON.ExtraFields["reasoning_content"].Raw(), `"plan"`)
	translatetest.Eq(t, "finish_reason", ch.FinishReason, "tool_calls")
	tc := ch.Message.ToolCalls[0].AsFunction()
	translatetest.Eq(t, "tool id is call_id", tc.ID, "call_7")
	translatetest.JSONEq(t, "arguments", tc.Function.Arguments, `{"q":1}`)
	translatetest.Eq(t, "prompt_tokens", c.Usage.PromptTokens, 50)
	translatetest.Eq(t, "cached_tokens", c.Usage.PromptTokensDetails.CachedTokens, 10)
	translatetest.Eq(t, "reasoning_tokens", c.Usage.CompletionTokensDetails.ReasoningTokens, 3)
}

func TestAnswerResponsesToMessages(t *testing.T) {
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Responses, api.Messages, anResponsesFixture))
	translatetest.Eq(t, "id", m.ID, "msg_9")
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "tool_use")
	if len(m.Content) != 3 {
		t.Fatalf("content = %d blocks, want thinking, text, tool_use", len(m.Content))
	}
	translatetest.Eq(t, "thinking", m.Content[0].AsThinking().Thinking, "plan")
	translatetest.Eq(t, "text", m.Content[1].AsText().Text, "Answer")
	tu := m.Content[2].AsToolUse()
	translatetest.Eq(t, "tool id", tu.ID, "call_7")
	translatetest.JSONEq(t, "input", string(tu.Input), `{"q":1}`)
	translatetest.Eq(t, "input_tokens", m.Usage.InputTokens, 40)
	translatetest.Eq(t, "cache_read_input_tokens", m.Usage.CacheReadInputTokens, 10)
	translatetest.Eq(t, "output_tokens", m.Usage.OutputTokens, 9)
}

func TestAnswerMessagesToResponses(t *testing.T) {
	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Messages, api.Responses, anMessagesFixture))
	translatetest.Eq(t, "id", r.ID, "resp_01")
	translatetest.Eq(t, "status", string(r.Status), "completed")
	translatetest.Eq(t, "output_text", r.OutputText(), "Hi there")
	rs := r.Output[0].AsReasoning()
	translatetest.Eq(t, "summary", rs.Summary[0].Text, "hmm")
	translatetest.Eq(t, "signature as encrypted_content", rs.EncryptedContent, "sig==")
	fc := r.Output[len(r.Output)-1].AsFunctionCall()
	translatetest.Eq(t, "call_id", fc.CallID, "toolu_1")
	translatetest.Eq(t, "fc id", fc.ID, "fc_toolu_1")
	translatetest.JSONEq(t, "arguments", fc.Arguments, `{"q":"x","n":[1,2]}`)
	translatetest.Eq(t, "input_tokens", r.Usage.InputTokens, 45)
	translatetest.Eq(t, "cached_tokens", r.Usage.InputTokensDetails.CachedTokens, 30)
}

// anGist is what a round trip must keep: text, tool calls, stop reason and
// counts, read back by this package's own readers.
type anGist struct {
	text, refusal string
	tools         []translate.Block
	stop          translate.Stop
	usage         api.Usage
}

func anGistOf(t *testing.T, from api.API, b []byte) anGist {
	t.Helper()
	a, err := translate.ReadAnswerOf(from, b)
	if err != nil {
		t.Fatalf("reading %s: %v\n%s", from, err, b)
	}
	a.Settle(b)
	g := anGist{text: a.Join(translate.BlockText), refusal: a.Join(translate.BlockRefusal), stop: a.Stop, usage: a.Usage}
	for _, p := range a.Blocks {
		if p.Kind == translate.BlockTool {
			p.Args = string(translate.ObjectArgs(p.Args))
			g.tools = append(g.tools, translate.Block{Kind: translate.BlockTool, ID: p.ID, Name: p.Name, Args: p.Args})
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
	for _, a := range translatetest.Clients {
		for _, b := range translatetest.Clients {
			if a == b {
				continue
			}
			t.Run(a.String()+"→"+b.String()+"→"+a.String(), func(t *testing.T) {
				there := translatetest.Translated(t, a, b, fixtures[a])
				back := translatetest.Translated(t, b, a, string(there))
				want, got := anGistOf(t, a, []byte(fixtures[a])), anGistOf(t, a, back)
				translatetest.Eq(t, "text", got.text, want.text)
				translatetest.Eq(t, "stop", got.stop, want.stop)
				if len(got.tools) != len(want.tools) {
					t.Fatalf("tools = %+v, want %+v", got.tools, want.tools)
				}
				for i := range want.tools {
					translatetest.Eq(t, "tool", got.tools[i], want.tools[i])
				}
				wantUsage := want.usage
				if a != api.Messages && b == api.Messages {
					// Messages has no reasoning count.
					wantUsage.Reasoning = 0
				}
				translatetest.Eq(t, "usage", got.usage, wantUsage)
			})
		}
	}
}
