package translate_test

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestAnswerStopReasonsFollowTheTable(t *testing.T) {
	chat := func(finish, extra string) string {
		return `{"id":"c","created":1,"model":"m","choices":[{"message":{"content":"x"` + extra + `},"finish_reason":"` + finish + `"}]}`
	}
	msgs := func(stop string) string {
		return `{"id":"m","type":"message","model":"m","content":[{"type":"text","text":"x"}],"stop_reason":"` + stop + `","usage":{}}`
	}
	resp := func(status, details string) string {
		return `{"id":"r","object":"response","status":"` + status + `","incomplete_details":` + details + `,"output":[{"type":"message","content":[{"type":"output_text","text":"x"}]}]}`
	}
	for _, tc := range []struct {
		name     string
		from     api.API
		body     string
		chat     string // finish_reason
		messages string // stop_reason
		status   string // Responses status
		reason   string // Responses incomplete_details.reason
	}{
		{"chat stop", api.Chat, chat("stop", ""), "stop", "end_turn", "completed", ""},
		{"chat length", api.Chat, chat("length", ""), "length", "max_tokens", "incomplete", "max_output_tokens"},
		{"chat content_filter", api.Chat, chat("content_filter", ""), "content_filter", "refusal", "incomplete", "content_filter"},
		{"chat stop with tool calls", api.Chat, chat("stop", `,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]`), "tool_calls", "tool_use", "completed", ""},
		{"chat engine's own word", api.Chat, chat("eos", ""), "stop", "end_turn", "completed", ""},
		{"messages end_turn", api.Messages, msgs("end_turn"), "stop", "end_turn", "completed", ""},
		{"messages stop_sequence", api.Messages, msgs("stop_sequence"), "stop", "stop_sequence", "completed", ""},
		{"messages max_tokens", api.Messages, msgs("max_tokens"), "length", "max_tokens", "incomplete", "max_output_tokens"},
		{"messages pause_turn", api.Messages, msgs("pause_turn"), "stop", "pause_turn", "completed", ""},
		{"messages context", api.Messages, msgs("model_context_window_exceeded"), "length", "model_context_window_exceeded", "incomplete", "max_output_tokens"},
		{"messages refusal", api.Messages, msgs("refusal"), "content_filter", "refusal", "incomplete", "content_filter"},
		{"responses completed", api.Responses, resp("completed", "null"), "stop", "end_turn", "completed", ""},
		{"responses max_output_tokens", api.Responses, resp("incomplete", `{"reason":"max_output_tokens"}`), "length", "max_tokens", "incomplete", "max_output_tokens"},
		{"responses content_filter", api.Responses, resp("incomplete", `{"reason":"content_filter"}`), "content_filter", "refusal", "incomplete", "content_filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.from != api.Chat {
				translatetest.Eq(t, "finish_reason", translatetest.AsChat(t, translatetest.Translated(t, tc.from, api.Chat, tc.body)).Choices[0].FinishReason, tc.chat)
			}
			if tc.from != api.Messages {
				translatetest.Eq(t, "stop_reason", string(translatetest.AsMessage(t, translatetest.Translated(t, tc.from, api.Messages, tc.body)).StopReason), tc.messages)
			}
			if tc.from != api.Responses {
				r := translatetest.AsResponse(t, translatetest.Translated(t, tc.from, api.Responses, tc.body))
				translatetest.Eq(t, "status", string(r.Status), tc.status)
				translatetest.Eq(t, "incomplete_details.reason", string(r.IncompleteDetails.Reason), tc.reason)
				if tc.status == "incomplete" {
					translatetest.Eq(t, "message item status", string(r.Output[0].AsMessage().Status), "incomplete")
				}
			}
		})
	}
}

func TestAnswerRefusalCarries(t *testing.T) {
	const chat = `{"id":"c","created":1,"model":"m","choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, chat))
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "refusal")
	translatetest.Eq(t, "stop_details.type", string(m.StopDetails.Type), "refusal")
	translatetest.Eq(t, "text", m.Content[0].AsText().Text, "I can't help with that.")

	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Chat, api.Responses, chat))
	translatetest.Eq(t, "status", string(r.Status), "completed") // Chat said stop
	part := r.Output[0].AsMessage().Content[0]
	translatetest.Eq(t, "part type", part.Type, "refusal")
	translatetest.Eq(t, "refusal", part.Refusal, "I can't help with that.")

	back := translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, string(translatetest.Translated(t, api.Chat, api.Messages, chat))))
	translatetest.Eq(t, "refusal back", back.Choices[0].Message.Refusal, "I can't help with that.")
	translatetest.Eq(t, "content back is null", back.Choices[0].Message.JSON.Content.Valid(), false)
	translatetest.Eq(t, "finish_reason back", back.Choices[0].FinishReason, "content_filter")

	fromResp := translatetest.AsChat(t, translatetest.Translated(t, api.Responses, api.Chat, string(translatetest.Translated(t, api.Chat, api.Responses, chat))))
	translatetest.Eq(t, "refusal via Responses", fromResp.Choices[0].Message.Refusal, "I can't help with that.")

	// A refusal with no text but an explanation in stop_details.
	const msgs = `{"id":"m","type":"message","model":"m","content":[],"stop_reason":"refusal","stop_details":{"type":"refusal","category":"cyber","explanation":"Declined."},"usage":{}}`
	translatetest.Eq(t, "explanation", translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, msgs)).Choices[0].Message.Refusal, "Declined.")
}

func TestAnswerIDs(t *testing.T) {
	const noIDs = `{"model":"m","choices":[{"message":{"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}},{"type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	one, two := translatetest.Translated(t, api.Chat, api.Messages, noIDs), translatetest.Translated(t, api.Chat, api.Messages, noIDs)
	if string(one) != string(two) {
		t.Errorf("the same answer got two translations:\n%s\n%s", one, two)
	}
	m := translatetest.AsMessage(t, one)
	if !strings.HasPrefix(m.ID, "msg_") || len(m.ID) < 8 {
		t.Errorf("id = %q, want msg_<hash>", m.ID)
	}
	a, b := m.Content[0].AsToolUse().ID, m.Content[1].AsToolUse().ID
	if !strings.HasPrefix(a, "toolu_") || a == b {
		t.Errorf("tool ids = %q, %q: want two distinct toolu_…", a, b)
	}
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, `{"type":"message","content":[{"type":"tool_use","name":"f","input":{}}],"stop_reason":"tool_use","usage":{}}`))
	if id := c.Choices[0].Message.ToolCalls[0].ID; !strings.HasPrefix(id, "call_") {
		t.Errorf("tool id = %q, want call_…", id)
	}
	for _, tc := range []struct {
		from, to api.API
		id, want string
	}{
		{api.Chat, api.Messages, "chatcmpl-xyz", "msg_xyz"},
		{api.Chat, api.Responses, "chatcmpl-xyz", "resp_xyz"},
		{api.Chat, api.Messages, "gen-123", "msg_gen-123"},
	} {
		body := `{"id":"` + tc.id + `","model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`
		var got string
		if tc.to == api.Messages {
			got = translatetest.AsMessage(t, translatetest.Translated(t, tc.from, tc.to, body)).ID
		} else {
			got = translatetest.AsResponse(t, translatetest.Translated(t, tc.from, tc.to, body)).ID
		}
		translatetest.Eq(t, "id of "+tc.id, got, tc.want)
	}
}

func TestAnswerCustomToolsGoBackAsCustomCalls(t *testing.T) {
	const chat = `{"id":"c","created":1,"model":"m","choices":[{"message":{"tool_calls":[
		{"id":"call_p","type":"function","function":{"name":"apply_patch","arguments":"{\"input\":\"*** Begin Patch\\n\"}"}},
		{"id":"call_f","type":"function","function":{"name":"get","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	out, err := translate.AnswerBody(api.Chat, api.Responses, []byte(chat), translate.AnswerOptions{CustomTools: []string{"apply_patch"}})
	if err != nil {
		t.Fatal(err)
	}
	r := translatetest.AsResponse(t, out)
	ct := r.Output[0].AsCustomToolCall()
	translatetest.Eq(t, "type", r.Output[0].Type, "custom_tool_call")
	translatetest.Eq(t, "call_id", ct.CallID, "call_p")
	translatetest.Eq(t, "name", ct.Name, "apply_patch")
	translatetest.Eq(t, "input", ct.Input, "*** Begin Patch\n")
	translatetest.Eq(t, "other tool", r.Output[1].Type, "function_call")

	// And back: the freeform input is the one string parameter again.
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Responses, api.Chat, string(out)))
	translatetest.JSONEq(t, "arguments", c.Choices[0].Message.ToolCalls[0].Function.Arguments, `{"input":"*** Begin Patch\n"}`)
	translatetest.Eq(t, "finish_reason", c.Choices[0].FinishReason, "tool_calls")
}

func TestAnswerReasoningKeepsSignaturesWhereItCan(t *testing.T) {
	const msgs = `{"id":"msg_r","type":"message","model":"m","content":[
		{"type":"thinking","thinking":"","signature":"only-sig"},
		{"type":"redacted_thinking","data":"opaque"},
		{"type":"text","text":"ok"}],"stop_reason":"end_turn","usage":{}}`
	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Messages, api.Responses, msgs))
	translatetest.Eq(t, "signature-only thinking keeps a summary part", len(r.Output[0].AsReasoning().Summary), 1)
	translatetest.Eq(t, "redacted has no summary", len(r.Output[1].AsReasoning().Summary), 0)
	translatetest.Eq(t, "redacted data", r.Output[1].AsReasoning().EncryptedContent, "opaque")

	back := translatetest.AsMessage(t, translatetest.Translated(t, api.Responses, api.Messages, string(translatetest.Translated(t, api.Messages, api.Responses, msgs))))
	translatetest.Eq(t, "block 0", back.Content[0].Type, "thinking")
	translatetest.Eq(t, "signature", back.Content[0].AsThinking().Signature, "only-sig")
	translatetest.Eq(t, "block 1", back.Content[1].Type, "redacted_thinking")
	translatetest.Eq(t, "data", back.Content[1].AsRedactedThinking().Data, "opaque")

	// Chat has no place for a signature or redacted data.
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, msgs))
	translatetest.Eq(t, "text", c.Choices[0].Message.Content, "ok")
	if _, ok := c.Choices[0].Message.JSON.ExtraFields["reasoning_content"]; ok {
		t.Error("empty reasoning written as reasoning_content")
	}

	// Open-weight servers: Chat's "reasoning", Responses' reasoning_text.
	const vllm = `{"id":"c","created":1,"model":"m","choices":[{"message":{"content":"x","reasoning":"deep"},"finish_reason":"stop"}]}`
	translatetest.Eq(t, "reasoning", translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, vllm)).Content[0].AsThinking().Thinking, "deep")
	const oss = `{"id":"r","status":"completed","output":[{"type":"reasoning","summary":[],"content":[{"type":"reasoning_text","text":"raw"}]}]}`
	translatetest.Eq(t, "reasoning_text", translatetest.AsMessage(t, translatetest.Translated(t, api.Responses, api.Messages, oss)).Content[0].AsThinking().Thinking, "raw")
}

func TestAnswerReadsWhatEnginesSend(t *testing.T) {
	// Ollama's arguments as an object; content as text parts; a float time.
	const chat = `{"id":"c","created":1.7e9,"model":"m","choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],
		"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":{"k":"v"}}}]},"finish_reason":"tool_calls"}]}`
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, chat))
	translatetest.Eq(t, "text", m.Content[0].AsText().Text, "ab")
	translatetest.JSONEq(t, "input", string(m.Content[1].AsToolUse().Input), `{"k":"v"}`)
	translatetest.Eq(t, "created", translatetest.AsResponse(t, translatetest.Translated(t, api.Chat, api.Responses, chat)).CreatedAt, 1.7e9)

	// Arguments cut short by max_tokens: Messages' input must be an object.
	const cut = `{"id":"c","created":1,"model":"m","choices":[{"message":{"tool_calls":[{"id":"t","type":"function","function":{"name":"f","arguments":"{\"a\": \"unfinis"}}]},"finish_reason":"length"}]}`
	m = translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, cut))
	translatetest.Eq(t, "input", string(m.Content[0].AsToolUse().Input), `{}`)
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "max_tokens")

	// Server tools ran on the engine's side: no counterpart, dropped.
	const server = `{"id":"m","type":"message","model":"m","content":[{"type":"server_tool_use","id":"srvtoolu_1","name":"web_search","input":{}},
		{"type":"web_search_tool_result","tool_use_id":"srvtoolu_1","content":[]},{"type":"text","text":"found"}],"stop_reason":"end_turn","usage":{}}`
	c := translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, server))
	translatetest.Eq(t, "content", c.Choices[0].Message.Content, "found")
	translatetest.Eq(t, "tool calls", len(c.Choices[0].Message.ToolCalls), 0)
	translatetest.Eq(t, "finish_reason", c.Choices[0].FinishReason, "stop")

	// Texts around a tool call stay in order in Responses' items.
	const order = `{"id":"m","type":"message","model":"m","content":[{"type":"text","text":"before"},{"type":"tool_use","id":"t","name":"f","input":{}},{"type":"text","text":"after"}],"stop_reason":"tool_use","usage":{}}`
	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Messages, api.Responses, order))
	translatetest.Eq(t, "items", len(r.Output), 3)
	translatetest.Eq(t, "output_text", r.OutputText(), "beforeafter")
}

func TestAnswerRefusesWhatIsNoAnswer(t *testing.T) {
	for _, tc := range []struct {
		name string
		from api.API
		body string
		want string // in the error
	}{
		{"not JSON", api.Chat, `<html>502</html>`, "invalid character"},
		{"empty", api.Messages, ``, "unexpected end"},
		{"no choices", api.Chat, `{"id":"x"}`, "no choices"},
		{"empty choices", api.Chat, `{"choices":[]}`, "no choice"},
		{"an error with status 200", api.Chat, `{"error":{"message":"model overloaded"}}`, "model overloaded"},
		{"choices of the wrong type", api.Chat, `{"choices":{}}`, "cannot unmarshal"},
		{"content not an array", api.Messages, `{"type":"message","content":"hi"}`, "cannot unmarshal"},
		{"a Messages error", api.Messages, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`, "Overloaded"},
		{"no content", api.Messages, `{"type":"message"}`, "no content"},
		{"tool input not JSON", api.Chat, `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":[1,}}]}}]}`, "invalid character"},
		{"a failed response", api.Responses, `{"status":"failed","error":{"code":"server_error","message":"boom"},"output":[]}`, "boom"},
		{"a background response", api.Responses, `{"status":"queued","output":[]}`, "queued"},
		{"no output", api.Responses, `{"status":"completed"}`, "no output"},
		{"an array", api.Responses, `[]`, "cannot unmarshal"},
	} {
		for _, to := range translatetest.Clients {
			if to == tc.from {
				continue
			}
			_, err := translate.AnswerBody(tc.from, to, []byte(tc.body), translate.AnswerOptions{})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("%s (%s→%s): err = %v, want one saying %q", tc.name, tc.from, to, err, tc.want)
			}
		}
	}
	if out, err := translate.AnswerBody(api.Chat, api.Chat, []byte(`not even JSON`), translate.AnswerOptions{}); err != nil || string(out) != `not even JSON` {
		t.Errorf("Answer(Chat, Chat) = %q, %v: want the body unchanged", out, err)
	}
}
