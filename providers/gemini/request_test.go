package gemini

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestRequestGemini(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"Bash","description":"run","parameters":{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"cmd":{"type":"string"}},"additionalProperties":false}}}]`
	const img = `data:image/png;base64,iVBORw0KGgo=`
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "contents and system", From: api.Chat, To: api.Gemini,
			Body: `{"model":"gemini-2.5-flash","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":[{"type":"text","text":"What is this?"},{"type":"image_url","image_url":{"url":"` + img + `"}},{"type":"image_url","image_url":{"url":"https://example.com/cat.webp?x=1"}}]},{"role":"assistant","content":"A cat."},{"role":"developer","content":"Answer in French."},{"role":"user","content":"Sure?"}],"stream":true}`,
			Want: map[string]string{
				"model":             "-",
				"stream":            "-",
				"systemInstruction": `{"parts":[{"text":"Be brief.\n\nAnswer in French."}]}`,
				"contents.0":        `{"role":"user","parts":[{"text":"What is this?"},{"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}},{"fileData":{"mimeType":"image/webp","fileUri":"https://example.com/cat.webp?x=1"}}]}`,
				"contents.1":        `{"role":"model","parts":[{"text":"A cat."}]}`,
				"contents.2":        `{"role":"user","parts":[{"text":"Sure?"}]}`,
				"generationConfig":  "-",
			}},
		{Name: "options", From: api.Chat, To: api.Gemini,
			Body: `{"messages":[{"role":"user","content":"x"}],"temperature":0.2,"top_p":0.9,"max_completion_tokens":500,"stop":["END",""],"reasoning_effort":"high","user":"u1",` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"r","schema":{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"a":{"type":"integer"}}}}}}`,
			Want: map[string]string{"generationConfig": `{"temperature":0.2,"topP":0.9,"maxOutputTokens":500,"stopSequences":["END"],` +
				`"responseMimeType":"application/json","responseJsonSchema":{"type":"object","properties":{"a":{"type":"integer"}}},"thinkingConfig":{"includeThoughts":true,"thinkingBudget":4096}}`},
			Dropped: []string{"user", "stop[1]"}},
		{Name: "json_object", From: api.Chat, To: api.Gemini, Body: `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_object"}}`,
			Want: map[string]string{"generationConfig": `{"responseMimeType":"application/json"}`}},
		{Name: "tools", From: api.Chat, To: api.Gemini, Body: `{"messages":[{"role":"user","content":"x"}],` + tools + `}`,
			Want: map[string]string{"tools": `[{"functionDeclarations":[{"name":"Bash","description":"run","parametersJsonSchema":{"type":"object","properties":{"cmd":{"type":"string"}},"additionalProperties":false}}]}]`,
				"toolConfig": "-"}},
		{Name: "tool_choice named", From: api.Chat, To: api.Gemini, Body: `{"messages":[],` + tools + `,"tool_choice":{"type":"function","function":{"name":"Bash"}},"parallel_tool_calls":false}`,
			Want:    map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"ANY","allowedFunctionNames":["Bash"]}}`},
			Dropped: []string{"parallel_tool_calls"}},
		{Name: "tool_choice required", From: api.Messages, To: api.Gemini,
			Body: `{"max_tokens":1,"messages":[],"tools":[{"name":"a","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}}`,
			Want: map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"ANY"}}`, "generationConfig": `{"maxOutputTokens":1}`}},
		{Name: "tool_choice none", From: api.Responses, To: api.Gemini,
			Body: `{"input":"x","tools":[{"type":"function","name":"a","parameters":{}}],"tool_choice":"none"}`,
			Want: map[string]string{"toolConfig": `{"functionCallingConfig":{"mode":"NONE"}}`}},
		{Name: "n", From: api.Chat, To: api.Gemini, Body: `{"messages":[],"n":2}`, Err: "n"},
		{Name: "result of no call", From: api.Responses, To: api.Gemini,
			Body: `{"input":[{"type":"function_call_output","call_id":"c9","output":"x"}]}`, Err: "input[0]"},
	})
}

// TestRequestGeminiToolTurns: tool results name their functions (found by
// the calls' ids), sit in one user content ahead of its text, an error
// result says so, thinking is dropped, and a turn of another engine's
// calls gets Google's stand-in signature while an older turn and a turn
// with Gemini's own signature do not.
func TestRequestGeminiToolTurns(t *testing.T) {
	const foreign = `{"max_tokens":1,"messages":[
		{"role":"user","content":"go"},
		{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"read","input":{"p":"a"}}]},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","content":"A"}]},
		{"role":"assistant","content":"Done."},
		{"role":"user","content":"next"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Reading."},{"type":"tool_use","id":"toolu_2","name":"read","input":{"p":"b"}},{"type":"tool_use","id":"toolu_3","name":"write","input":{}}]},
		{"role":"user","content":[{"type":"text","text":"and?"},{"type":"tool_result","tool_use_id":"toolu_3","content":"denied","is_error":true},{"type":"tool_result","tool_use_id":"toolu_2","content":[{"type":"text","text":"B"}]}]}]}`
	const own = `{"messages":[{"role":"user","content":"go"},
		{"role":"assistant","content":null,"tool_calls":[{"id":"call_x_0-gts-CiQB_-w","type":"function","function":{"name":"read","arguments":"{}"}},{"id":"call_x_1","type":"function","function":{"name":"read","arguments":"{\"p\":1}"}}]},
		{"role":"tool","tool_call_id":"call_x_0-gts-CiQB_-w","content":"1"},{"role":"tool","tool_call_id":"call_x_1","content":"2"}]}`
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "foreign calls", From: api.Messages, To: api.Gemini, Body: foreign,
			Want: map[string]string{
				"contents.1": `{"role":"model","parts":[{"functionCall":{"name":"read","args":{"p":"a"}}}]}`,
				"contents.2": `{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"A"}}}]}`,
				"contents.4": `{"role":"user","parts":[{"text":"next"}]}`,
				"contents.5": `{"role":"model","parts":[{"text":"Reading."},{"functionCall":{"name":"read","args":{"p":"b"}},"thoughtSignature":"skip_thought_signature_validator"},{"functionCall":{"name":"write","args":{}}}]}`,
				"contents.6": `{"role":"user","parts":[{"functionResponse":{"name":"write","response":{"error":"denied"}}},{"functionResponse":{"name":"read","response":{"output":"B"}}},{"text":"and?"}]}`,
				"tools":      `[{"functionDeclarations":[{"name":"read","parametersJsonSchema":{"type":"object","properties":{}}},{"name":"write","parametersJsonSchema":{"type":"object","properties":{}}}]}]`,
			},
			Dropped: []string{"messages[5].content[0]"}},
		{Name: "own signature", From: api.Chat, To: api.Gemini, Body: own,
			Want: map[string]string{
				"contents.1": `{"role":"model","parts":[{"functionCall":{"name":"read","args":{}},"thoughtSignature":"CiQB/+w="},{"functionCall":{"name":"read","args":{"p":1}}}]}`,
				"contents.2": `{"role":"user","parts":[{"functionResponse":{"name":"read","response":{"output":"1"}}},{"functionResponse":{"name":"read","response":{"output":"2"}}}]}`,
				"tools":      `[{"functionDeclarations":[{"name":"read","parametersJsonSchema":{"type":"object","properties":{}}}]}]`,
				"toolConfig": `{"functionCallingConfig":{"mode":"NONE"}}`,
			}},
	})
}

func TestGeminiSignatureID(t *testing.T) {
	for _, sig := range []string{"CiQB/+w=", "CiQBcsjafE5k+/ab", "Cg==", "EqQBCgIYAhIM1gbcDa9GJwZA2b3h"} {
		id := string(geminiAppendSig([]byte("call_1"), []byte(sig)))
		if translate.SanitizeID(id) != id {
			t.Errorf("%q: id %q is not Messages-safe", sig, id)
		}
		if base, got := geminiSplitID(id); base != "call_1" || got != sig {
			t.Errorf("%q: split %q %q", sig, base, got)
		}
	}
	// A signature escaped in the stream's JSON ("\/") comes back whole.
	if _, got := geminiSplitID(string(geminiAppendSig([]byte("c"), []byte(`ab\/cd`)))); got != "ab/cd===" {
		t.Errorf("escaped: %q", got)
	}
	if base, sig := geminiSplitID("call_9"); base != "call_9" || sig != "" {
		t.Errorf("plain id: %q %q", base, sig)
	}
}
