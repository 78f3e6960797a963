package translate

import (
	"encoding/json"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

func TestRequestToConverse(t *testing.T) {
	rqRun(t, []rqCase{
		{name: "no model, no stream, system hoisted", from: api.Chat, to: api.Converse,
			body: `{"model":"m","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"user","content":[{"type":"text","text":"there"},{"type":"text","text":"  "}]}]}`,
			want: map[string]string{"model": "-", "stream": "-", "system": `[{"text":"Be brief."}]`,
				"messages": `[{"role":"user","content":[{"text":"Hi"},{"text":"there"}]}]`}},
		{name: "inference config", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":100,"temperature":1.5,"top_p":0.9,"stop":["END"," "]}`,
			want: map[string]string{"inferenceConfig": `{"maxTokens":100,"temperature":1,"topP":0.9,"stopSequences":["END"]}`}, dropped: []string{"stop[1]"}},
		{name: "image bytes", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpg;base64,QUJD"}}]}]}`,
			want: map[string]string{"messages.0.content.0": `{"image":{"format":"jpeg","source":{"bytes":"QUJD"}}}`}},
		{name: "image url", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
			err:  "messages[0].content[0]"},
		{name: "image url", from: api.Messages, to: api.Converse,
			body: `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`,
			err:  "messages[0]"},
		{name: "tool loop", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":"","tool_calls":[{"id":"functions.get:0","type":"function","function":{"name":"get","arguments":"{\"c\":\"P\"}"}},{"id":"call_2","type":"function","function":{"name":"get","arguments":""}}]},
				{"role":"tool","tool_call_id":"functions.get:0","content":"sunny"},{"role":"tool","tool_call_id":"call_2","content":""},
				{"role":"user","content":"thanks"}],
				"tools":[{"type":"function","function":{"name":"get","description":"Weather","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
			want: map[string]string{
				"messages.1": `{"role":"assistant","content":[{"toolUse":{"toolUseId":"functions_get_0","name":"get","input":{"c":"P"}}},{"toolUse":{"toolUseId":"call_2","name":"get","input":{}}}]}`,
				"messages.2": `{"role":"user","content":[{"toolResult":{"toolUseId":"functions_get_0","content":[{"text":"sunny"}]}},{"toolResult":{"toolUseId":"call_2","content":[{"json":{}}]}},{"text":"thanks"}]}`,
				"toolConfig": `{"tools":[{"toolSpec":{"name":"get","description":"Weather","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"any":{}}}`}},
		{name: "tool result error", from: api.Messages, to: api.Converse,
			body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"hm"},{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"boom"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`,
			want: map[string]string{"messages.1.content.0": `{"toolResult":{"toolUseId":"t1","content":[{"text":"boom"}],"status":"error"}}`,
				"toolConfig.toolChoice": `{"tool":{"name":"f"}}`}},
		{name: "tool_choice none, no history", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			want: map[string]string{"toolConfig": "-"}},
		{name: "tool_choice none, history", from: api.Responses, to: api.Converse,
			body:    `{"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f"}],"tool_choice":"none"}`,
			want:    map[string]string{"toolConfig.toolChoice": "-", "toolConfig.tools.0.toolSpec.name": `"f"`},
			dropped: []string{"tool_choice"}},
		{name: "history without tools", from: api.Chat, to: api.Converse,
			body: `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"g","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"}]}`,
			want: map[string]string{"toolConfig": `{"tools":[{"toolSpec":{"name":"g","inputSchema":{"json":{"type":"object","properties":{}}}}}]}`}},
		{name: "same roles merged", from: api.Responses, to: api.Converse,
			body: `{"input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"assistant","content":"d"}]}`,
			want: map[string]string{"messages": `[{"role":"user","content":[{"text":"a"},{"text":"b"}]},{"role":"assistant","content":[{"text":"c"},{"text":"d"}]}]`}},
		{name: "thinking for claude", from: api.Chat, to: api.Converse, opts: RequestOptions{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
			body:    `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","temperature":0.2,"max_tokens":10000}`,
			want:    map[string]string{"additionalModelRequestFields": `{"thinking":{"type":"enabled","budget_tokens":4096}}`, "inferenceConfig.temperature": "-"},
			dropped: []string{"temperature"}},
		{name: "thinking not for nova", from: api.Chat, to: api.Converse, opts: RequestOptions{Model: "amazon.nova-pro-v1:0"},
			body:    `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`,
			want:    map[string]string{"additionalModelRequestFields": "-"},
			dropped: []string{"reasoning_effort"}},
		{name: "thinking replayed", from: api.Messages, to: api.Converse,
			body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s1"},{"type":"redacted_thinking","data":"QUJD"},{"type":"text","text":"ok"}]}]}`,
			want: map[string]string{"messages.0.content.0": `{"reasoningContent":{"reasoningText":{"text":"hm","signature":"s1"}}}`,
				"messages.0.content.1": `{"reasoningContent":{"redactedContent":"QUJD"}}`}},
		{name: "n", from: api.Chat, to: api.Converse, body: `{"messages":[],"n":2}`, err: "n"},
	})
}

// TestRequestConverseLongToolIDs: Bedrock's ids are at most 64 bytes; a
// longer one is shortened the same way in the call and its result.
func TestRequestConverseLongToolIDs(t *testing.T) {
	long := "call_0123456789012345678901234567890123456789012345678901234567890123456789"
	body := `{"messages":[{"role":"assistant","tool_calls":[{"id":"` + long + `","type":"function","function":{"name":"g","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + long + `","content":"1"}]}`
	out, _, err := RequestBody(api.Chat, api.Converse, []byte(body), RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m any
	_ = json.Unmarshal(out, &m)
	call, result := rqAt(m, "messages.0.content.0.toolUse.toolUseId"), rqAt(m, "messages.1.content.0.toolResult.toolUseId")
	if call != result || len(call) > 64+2 {
		t.Errorf("call %s, result %s", call, result)
	}
}
