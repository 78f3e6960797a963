package translate_test

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestRequestTools(t *testing.T) {
	const chatTools = `"tools":[{"type":"function","function":{"name":"Bash","description":"run","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}},"strict":true}}]`
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "definitions", From: api.Chat, To: api.Messages, Body: `{"messages":[{"role":"user","content":"x"}],` + chatTools + `}`,
			Want: map[string]string{"tools": `[{"name":"Bash","description":"run","input_schema":{"type":"object","properties":{"cmd":{"type":"string"}}}}]`, "tool_choice": "-"}},
		{Name: "definitions", From: api.Chat, To: api.Responses, Body: `{"messages":[{"role":"user","content":"x"}],` + chatTools + `}`,
			Want: map[string]string{"tools": `[{"type":"function","name":"Bash","description":"run","parameters":{"type":"object","properties":{"cmd":{"type":"string"}}},"strict":true}]`}},
		{Name: "definitions", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"name":"Bash","description":"run","input_schema":{"type":"object"},"cache_control":{"type":"ephemeral"}}]}`,
			Want: map[string]string{"tools": `[{"type":"function","function":{"name":"Bash","description":"run","parameters":{"type":"object"}}}]`}},
		{Name: "not strict unless said", From: api.Messages, To: api.Responses,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"name":"Bash","input_schema":{"type":"object"}}]}`,
			Want: map[string]string{"tools.0.strict": `false`}},
		{Name: "tool_choice required", From: api.Chat, To: api.Messages, Body: `{"messages":[],` + chatTools + `,"tool_choice":"required"}`,
			Want: map[string]string{"tool_choice": `{"type":"any"}`}},
		{Name: "tool_choice named", From: api.Chat, To: api.Messages, Body: `{"messages":[],` + chatTools + `,"tool_choice":{"type":"function","function":{"name":"Bash"}}}`,
			Want: map[string]string{"tool_choice": `{"type":"tool","name":"Bash"}`}},
		{Name: "tool_choice none, parallel not attached", From: api.Chat, To: api.Messages, Body: `{"messages":[],` + chatTools + `,"tool_choice":"none","parallel_tool_calls":false}`,
			Want: map[string]string{"tool_choice": `{"type":"none"}`}},
		{Name: "parallel false alone", From: api.Chat, To: api.Messages, Body: `{"messages":[],` + chatTools + `,"parallel_tool_calls":false}`,
			Want: map[string]string{"tool_choice": `{"type":"auto","disable_parallel_tool_use":true}`}},
		{Name: "parallel true is the default", From: api.Chat, To: api.Messages, Body: `{"messages":[],` + chatTools + `,"parallel_tool_calls":true}`,
			Want: map[string]string{"tool_choice": "-"}},
		{Name: "any with parallel off", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true}}`,
			Want: map[string]string{"tool_choice": `"required"`, "parallel_tool_calls": `false`}},
		{Name: "named", From: api.Messages, To: api.Responses,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"name":"a","input_schema":{}}],"tool_choice":{"type":"tool","name":"a"}}`,
			Want: map[string]string{"tool_choice": `{"name":"a","type":"function"}`}},
		{Name: "named", From: api.Responses, To: api.Chat,
			Body: `{"input":[],"tools":[{"type":"function","name":"a","parameters":{}}],"tool_choice":{"type":"function","name":"a"},"parallel_tool_calls":false}`,
			Want: map[string]string{"tool_choice": `{"function":{"name":"a"},"type":"function"}`, "parallel_tool_calls": "false"}},
		{Name: "no parallel_tool_calls without tools", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}}`,
			Want: map[string]string{"parallel_tool_calls": "-"}},
		{Name: "server tools dropped", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"type":"web_search_20250305","name":"web_search"},{"type":"bash_20250124","name":"bash"},{"name":"Read","input_schema":{}}]}`,
			Want: map[string]string{"tools.0.function.name": `"Read"`, "tools.1": "-"}, Dropped: []string{"tools[0] (web_search_20250305)", "tools[1] (bash_20250124)"}},
		{Name: "hosted tools dropped, custom and namespace carried", From: api.Responses, To: api.Chat,
			Body: `{"input":[],"tools":[{"type":"web_search"},{"type":"custom","name":"apply_patch","description":"patch","format":{"type":"grammar","syntax":"lark","definition":"start: x"}},{"type":"namespace","name":"mcp__node_repl","description":"node","tools":[{"type":"function","name":"js","parameters":{"type":"object"}}]},{"type":"file_search"}]}`,
			Want: map[string]string{
				"tools.0.function.name":        `"apply_patch"`,
				"tools.0.function.description": `"patch\n\nThe input must follow this lark grammar:\nstart: x"`,
				"tools.0.function.parameters":  string(translate.CustomParams),
				"tools.1.function.name":        `"mcp__node_repl__js"`,
				"tools.2":                      "-"},
			Dropped: []string{"tools[0] (web_search)", "tools[3] (file_search)"}},
	})
}

func TestRequestToolHistory(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "calls and results merged, results first, ids sanitized", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","content":"","tool_calls":[{"id":"functions.Bash:0","type":"function","function":{"name":"Bash","arguments":"{\"cmd\":\"ls\"}"}},{"id":"call_2","type":"function","function":{"name":"Read","arguments":""}}]},{"role":"tool","tool_call_id":"functions.Bash:0","content":"a"},{"role":"tool","tool_call_id":"call_2","content":[{"type":"text","text":"b"}]},{"role":"user","content":"next"}],"tools":[{"type":"function","function":{"name":"Bash"}},{"type":"function","function":{"name":"Read"}}]}`,
			Want: map[string]string{
				"messages.1":           `{"role":"assistant","content":[{"type":"tool_use","id":"functions_Bash_0","name":"Bash","input":{"cmd":"ls"}},{"type":"tool_use","id":"call_2","name":"Read","input":{}}]}`,
				"messages.2.content":   `[{"type":"tool_result","tool_use_id":"functions_Bash_0","content":"a"},{"type":"tool_result","tool_use_id":"call_2","content":"b"},{"type":"text","text":"next"}]`,
				"messages.3":           "-",
				"tools.1.input_schema": `{"type":"object","properties":{}}`}},
		{Name: "missing ids synthesized and paired", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"user","content":"go"},{"role":"assistant","tool_calls":[{"type":"function","function":{"name":"A","arguments":"{}"}},{"type":"function","function":{"name":"B","arguments":"{}"}}]},{"role":"tool","content":"a"},{"role":"tool","content":"b"}]}`,
			Want: map[string]string{"messages.1.content.0.id": `"call_1_0"`, "messages.1.content.1.id": `"call_1_1"`,
				"messages.2.content.0.tool_use_id": `"call_1_0"`, "messages.2.content.1.tool_use_id": `"call_1_1"`}},
		{Name: "history without tools declares them, choice none", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"A","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"a"}]}`,
			Want: map[string]string{"tools": `[{"name":"A","input_schema":{"type":"object","properties":{}}}]`, "tool_choice": `{"type":"none"}`}},
		{Name: "tool_use and tool_result", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"text","text":"let me"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{"p":"a"}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":[{"type":"text","text":"x"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"QQ"}}]},{"type":"tool_result","tool_use_id":"toolu_2","is_error":true,"content":"boom"},{"type":"text","text":"and?"}]}]}`,
			Want: map[string]string{
				"messages.0": `{"role":"assistant","content":"let me","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"Read","arguments":"{\"p\":\"a\"}"}}]}`,
				"messages.1": `{"role":"tool","content":"x","tool_call_id":"toolu_1"}`,
				"messages.2": `{"role":"tool","content":"Error: boom","tool_call_id":"toolu_2"}`,
				"messages.3": `{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,QQ"}},{"type":"text","text":"and?"}]}`}},
		{Name: "function_call items without id", From: api.Messages, To: api.Responses,
			Body: `{"max_tokens":1,"messages":[{"role":"assistant","content":[{"type":"text","text":"let me"},{"type":"tool_use","id":"toolu_1","name":"Read","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"x"},{"type":"text","text":"and?"}]}]}`,
			Want: map[string]string{
				"input.0": `{"type":"message","role":"assistant","content":"let me"}`,
				"input.1": `{"type":"function_call","call_id":"toolu_1","name":"Read","arguments":"{}"}`,
				"input.2": `{"type":"function_call_output","call_id":"toolu_1","output":"x"}`,
				"input.3": `{"type":"message","role":"user","content":[{"type":"input_text","text":"and?"}]}`}},
		{Name: "Codex items", From: api.Responses, To: api.Messages,
			Body: `{"input":[{"role":"user","content":"fix"},{"type":"reasoning","id":"rs_1","encrypted_content":"e","summary":[]},{"type":"function_call","id":"fc_1","call_id":"call_1","name":"shell","arguments":"{\"command\":[\"ls\"]}"},{"type":"function_call_output","call_id":"call_1","output":"a.go"},{"type":"custom_tool_call","call_id":"call_2","name":"apply_patch","input":"*** Begin Patch"},{"type":"custom_tool_call_output","call_id":"call_2","output":"ok"},{"type":"function_call","call_id":"call_3","name":"js","namespace":"mcp__node_repl","arguments":"{}"},{"type":"reasoning","encrypted_content":"f"}],"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}}]}`,
			Want: map[string]string{
				"messages.1.content.0":      `{"type":"tool_use","id":"call_1","name":"shell","input":{"command":["ls"]}}`,
				"messages.2.content.0":      `{"type":"tool_result","tool_use_id":"call_1","content":"a.go"}`,
				"messages.3.content.0":      `{"type":"tool_use","id":"call_2","name":"apply_patch","input":{"input":"*** Begin Patch"}}`,
				"messages.5.content.0.name": `"mcp__node_repl__js"`},
			Dropped: []string{"input[1] (reasoning)"}},
		{Name: "item_reference refused", From: api.Responses, To: api.Chat,
			Body: `{"input":[{"role":"user","content":"x"},{"type":"item_reference","id":"msg_1"}]}`, Err: "input[1]"},
		{Name: "bad arguments kept as {}", From: api.Chat, To: api.Messages,
			Body:    `{"messages":[{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"A","arguments":"{\"cut"}}]}]}`,
			Want:    map[string]string{"messages.0.content.0.input": `{}`},
			Dropped: []string{"messages[0].tool_calls[0] (arguments not a JSON object)"}},
	})
}

func TestCustomAndNamespaceTools(t *testing.T) {
	body := []byte(`{"tools":[{"type":"custom","name":"apply_patch"},{"type":"function","name":"shell"},{"type":"namespace","name":"mcp__x","tools":[{"type":"function","name":"js"},{"type":"custom","name":"exec"}]}]}`)
	r, err := translate.ReadRequest(api.Responses, body)
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Custom; len(got) != 2 || got[0] != "apply_patch" || got[1] != "mcp__x__exec" {
		t.Errorf("Custom = %q", got)
	}
	if ns := r.Namespaces; len(ns) != 2 || ns["mcp__x__js"] != [2]string{"mcp__x", "js"} {
		t.Errorf("Namespaces = %q", ns)
	}
	if translate.FlatName("mcp__a__", "b") != "mcp__a__b" {
		t.Error("a namespace ending in __ is not joined by another __")
	}
}
