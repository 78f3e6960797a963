package bedrock

import (
	"encoding/json"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestRequestToConverse(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "no model, no stream, system hoisted", From: api.Chat, To: api.Converse,
			Body: `{"model":"m","stream":true,"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"Hi"},{"role":"user","content":[{"type":"text","text":"there"},{"type":"text","text":"  "}]}]}`,
			Want: map[string]string{"model": "-", "stream": "-", "system": `[{"text":"Be brief."}]`,
				"messages": `[{"role":"user","content":[{"text":"Hi"},{"text":"there"}]}]`}},
		{Name: "inference config", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"user","content":"x"}],"max_tokens":100,"temperature":1.5,"top_p":0.9,"stop":["END"," "]}`,
			Want: map[string]string{"inferenceConfig": `{"maxTokens":100,"temperature":1,"topP":0.9,"stopSequences":["END"]}`}, Dropped: []string{"stop[1]"}},
		{Name: "image bytes", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/jpg;base64,QUJD"}}]}]}`,
			Want: map[string]string{"messages.0.content.0": `{"image":{"format":"jpeg","source":{"bytes":"QUJD"}}}`}},
		{Name: "image url", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://x/y.png"}}]}]}`,
			Err:  "messages[0].content[0]"},
		{Name: "image url", From: api.Messages, To: api.Converse,
			Body: `{"max_tokens":1,"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://x/y.png"}}]}]}`,
			Err:  "messages[0]"},
		{Name: "tool loop", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"user","content":"weather?"},
				{"role":"assistant","content":"","tool_calls":[{"id":"functions.get:0","type":"function","function":{"name":"get","arguments":"{\"c\":\"P\"}"}},{"id":"call_2","type":"function","function":{"name":"get","arguments":""}}]},
				{"role":"tool","tool_call_id":"functions.get:0","content":"sunny"},{"role":"tool","tool_call_id":"call_2","content":""},
				{"role":"user","content":"thanks"}],
				"tools":[{"type":"function","function":{"name":"get","description":"Weather","parameters":{"type":"object"}}}],"tool_choice":"required"}`,
			Want: map[string]string{
				"messages.1": `{"role":"assistant","content":[{"toolUse":{"toolUseId":"functions_get_0","name":"get","input":{"c":"P"}}},{"toolUse":{"toolUseId":"call_2","name":"get","input":{}}}]}`,
				"messages.2": `{"role":"user","content":[{"toolResult":{"toolUseId":"functions_get_0","content":[{"text":"sunny"}]}},{"toolResult":{"toolUseId":"call_2","content":[{"json":{}}]}},{"text":"thanks"}]}`,
				"toolConfig": `{"tools":[{"toolSpec":{"name":"get","description":"Weather","inputSchema":{"json":{"type":"object"}}}}],"toolChoice":{"any":{}}}`}},
		{Name: "tool result error", From: api.Messages, To: api.Converse,
			Body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"f","input":{}}]},{"role":"user","content":[{"type":"text","text":"hm"},{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":"boom"}]}],"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}}`,
			Want: map[string]string{"messages.1.content.0": `{"toolResult":{"toolUseId":"t1","content":[{"text":"boom"}],"status":"error"}}`,
				"toolConfig.toolChoice": `{"tool":{"name":"f"}}`}},
		{Name: "tool_choice none, no history", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":"none"}`,
			Want: map[string]string{"toolConfig": "-"}},
		{Name: "tool_choice none, history", From: api.Responses, To: api.Converse,
			Body:    `{"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}],"tools":[{"type":"function","name":"f"}],"tool_choice":"none"}`,
			Want:    map[string]string{"toolConfig.toolChoice": "-", "toolConfig.tools.0.toolSpec.name": `"f"`},
			Dropped: []string{"tool_choice"}},
		{Name: "history without tools", From: api.Chat, To: api.Converse,
			Body: `{"messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"g","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":"1"}]}`,
			Want: map[string]string{"toolConfig": `{"tools":[{"toolSpec":{"name":"g","inputSchema":{"json":{"type":"object","properties":{}}}}}]}`}},
		{Name: "same roles merged", From: api.Responses, To: api.Converse,
			Body: `{"input":[{"role":"user","content":"a"},{"role":"user","content":"b"},{"role":"assistant","content":"c"},{"role":"assistant","content":"d"}]}`,
			Want: map[string]string{"messages": `[{"role":"user","content":[{"text":"a"},{"text":"b"}]},{"role":"assistant","content":[{"text":"c"},{"text":"d"}]}]`}},
		{Name: "thinking for claude", From: api.Chat, To: api.Converse, Opts: translate.RequestOptions{Model: "us.anthropic.claude-sonnet-4-5-20250929-v1:0"},
			Body:    `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high","temperature":0.2,"max_tokens":10000}`,
			Want:    map[string]string{"additionalModelRequestFields": `{"thinking":{"type":"enabled","budget_tokens":4096}}`, "inferenceConfig.temperature": "-"},
			Dropped: []string{"temperature"}},
		{Name: "thinking not for nova", From: api.Chat, To: api.Converse, Opts: translate.RequestOptions{Model: "amazon.nova-pro-v1:0"},
			Body:    `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"high"}`,
			Want:    map[string]string{"additionalModelRequestFields": "-"},
			Dropped: []string{"reasoning_effort"}},
		{Name: "thinking replayed", From: api.Messages, To: api.Converse,
			Body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"s1"},{"type":"redacted_thinking","data":"QUJD"},{"type":"text","text":"ok"}]}]}`,
			Want: map[string]string{"messages.0.content.0": `{"reasoningContent":{"reasoningText":{"text":"hm","signature":"s1"}}}`,
				"messages.0.content.1": `{"reasoningContent":{"redactedContent":"QUJD"}}`}},
		{Name: "n", From: api.Chat, To: api.Converse, Body: `{"messages":[],"n":2}`, Err: "n"},
	})
}

// TestRequestConverseLongToolIDs: Bedrock's ids are at most 64 bytes; a
// longer one is shortened the same way in the call and its result.
func TestRequestConverseLongToolIDs(t *testing.T) {
	long := "call_0123456789012345678901234567890123456789012345678901234567890123456789"
	body := `{"messages":[{"role":"assistant","tool_calls":[{"id":"` + long + `","type":"function","function":{"name":"g","arguments":"{}"}}]},{"role":"tool","tool_call_id":"` + long + `","content":"1"}]}`
	out, _, err := translate.RequestBody(api.Chat, api.Converse, []byte(body), translate.RequestOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var m any
	_ = json.Unmarshal(out, &m)
	call, result := translatetest.At(m, "messages.0.content.0.toolUse.toolUseId"), translatetest.At(m, "messages.1.content.0.toolResult.toolUseId")
	if call != result || len(call) > 64+2 {
		t.Errorf("call %s, result %s", call, result)
	}
}
