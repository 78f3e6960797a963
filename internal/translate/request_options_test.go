package translate_test

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func TestRequestReasoning(t *testing.T) {
	const asst = `{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"ok"}]}`
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "thinking history dropped once", From: api.Messages, To: api.Chat,
			Body:    `{"max_tokens":9,"messages":[{"role":"user","content":"a"},` + asst + `,{"role":"user","content":"b"},` + asst + `]}`,
			Want:    map[string]string{"messages.1": `{"role":"assistant","content":"ok"}`},
			Dropped: []string{"messages[1].content[0] (thinking)"}},
		{Name: "thinking history dropped", From: api.Messages, To: api.Responses,
			Body:    `{"max_tokens":9,"messages":[{"role":"user","content":"a"},` + asst + `]}`,
			Want:    map[string]string{"input.1": `{"type":"message","role":"assistant","content":"ok"}`},
			Dropped: []string{"messages[1].content[0] (thinking)"}},
		{Name: "budget low", From: api.Messages, To: api.Chat, Body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":1024}}`,
			Want: map[string]string{"reasoning_effort": `"low"`}},
		{Name: "budget medium", From: api.Messages, To: api.Chat, Body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":2048}}`,
			Want: map[string]string{"reasoning_effort": `"medium"`}},
		{Name: "budget high", From: api.Messages, To: api.Responses, Body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":10000}}`,
			Want: map[string]string{"reasoning": `{"effort":"high"}`}},
		{Name: "adaptive with effort", From: api.Messages, To: api.Chat, Body: `{"max_tokens":9,"messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"}}`,
			Want: map[string]string{"reasoning_effort": `"medium"`}},
		{Name: "adaptive alone", From: api.Messages, To: api.Chat, Body: `{"max_tokens":9,"messages":[],"thinking":{"type":"adaptive"}}`,
			Want: map[string]string{"reasoning_effort": "-"}, Dropped: []string{"thinking"}},
		{Name: "effort to budget", From: api.Chat, To: api.Messages, Body: `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium","temperature":0.2,"top_p":0.5}`,
			Want:    map[string]string{"thinking": `{"type":"enabled","budget_tokens":2048}`, "temperature": "-", "top_p": "-"},
			Dropped: []string{"temperature", "top_p"}},
		{Name: "budget below max_tokens", From: api.Responses, To: api.Messages, Body: `{"input":"x","reasoning":{"effort":"high"},"max_output_tokens":2000}`,
			Want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":1999}`, "max_tokens": "2000"}},
		{Name: "budget too small: no thinking", From: api.Chat, To: api.Messages, Body: `{"messages":[],"reasoning_effort":"low","max_tokens":500}`,
			Want: map[string]string{"thinking": "-"}, Dropped: []string{"reasoning_effort"}},
		{Name: "forced tool: no thinking", From: api.Chat, To: api.Messages,
			Body: `{"messages":[],"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required"}`,
			Want: map[string]string{"thinking": "-"}, Dropped: []string{"reasoning_effort"}},
		{Name: "tool loop without thinking: no thinking", From: api.Chat, To: api.Messages,
			Body: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"a"}}]}`,
			Want: map[string]string{"thinking": "-"}, Dropped: []string{"reasoning_effort"}},
		{Name: "effort none", From: api.Chat, To: api.Messages, Body: `{"messages":[],"reasoning_effort":"none"}`,
			Want: map[string]string{"thinking": "-"}},
		{Name: "reasoning_content dropped", From: api.Chat, To: api.Messages,
			Body:    `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","reasoning_content":"because"}]}`,
			Want:    map[string]string{"messages.1.content": `[{"type":"text","text":"y"}]`},
			Dropped: []string{"messages[1].reasoning_content"}},
		{Name: "reasoning items dropped", From: api.Responses, To: api.Chat,
			Body:    `{"input":[{"type":"reasoning","summary":[],"encrypted_content":"e"},{"role":"user","content":"x"},{"type":"reasoning","summary":[]}],"reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"]}`,
			Want:    map[string]string{"reasoning_effort": `"high"`, "messages.0.content": `"x"`},
			Dropped: []string{"input[0] (reasoning)"}},
	})
}

func TestRequestSampling(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "max_tokens default", From: api.Chat, To: api.Messages, Body: `{"messages":[]}`, Want: map[string]string{"max_tokens": "8192"}},
		{Name: "max_tokens option", From: api.Chat, To: api.Messages, Body: `{"messages":[]}`, Opts: translate.RequestOptions{MaxTokens: 321},
			Want: map[string]string{"max_tokens": "321"}},
		{Name: "max_completion_tokens", From: api.Chat, To: api.Messages, Body: `{"messages":[],"max_completion_tokens":77}`, Want: map[string]string{"max_tokens": "77"}},
		{Name: "max_output_tokens", From: api.Responses, To: api.Messages, Body: `{"input":"x","max_output_tokens":66}`, Want: map[string]string{"max_tokens": "66"}},
		{Name: "max_tokens", From: api.Messages, To: api.Responses, Body: `{"max_tokens":55,"messages":[]}`, Want: map[string]string{"max_output_tokens": "55"}},
		{Name: "max_tokens", From: api.Messages, To: api.Chat, Body: `{"max_tokens":55,"messages":[]}`, Want: map[string]string{"max_tokens": "55"}},
		{Name: "max_tokens", From: api.Responses, To: api.Chat, Body: `{"input":"x","max_output_tokens":55}`, Want: map[string]string{"max_tokens": "55"}},
		{Name: "temperature clamped", From: api.Chat, To: api.Messages, Body: `{"messages":[],"temperature":1.7,"top_p":0.9}`,
			Want: map[string]string{"temperature": "1", "top_p": "0.9"}},
		{Name: "temperature", From: api.Messages, To: api.Chat, Body: `{"max_tokens":1,"messages":[],"temperature":0.3,"top_k":40}`,
			Want: map[string]string{"temperature": "0.3", "top_k": "-"}, Dropped: []string{"top_k"}},
		{Name: "temperature", From: api.Chat, To: api.Responses, Body: `{"messages":[],"temperature":0,"top_p":1}`,
			Want: map[string]string{"temperature": "0", "top_p": "1"}},
		{Name: "stop string", From: api.Chat, To: api.Messages, Body: `{"messages":[],"stop":"END"}`, Want: map[string]string{"stop_sequences": `["END"]`}},
		{Name: "stop white space", From: api.Chat, To: api.Messages, Body: `{"messages":[],"stop":["\n\n","END"]}`,
			Want: map[string]string{"stop_sequences": `["END"]`}, Dropped: []string{"stop[0]"}},
		{Name: "stop_sequences", From: api.Messages, To: api.Chat, Body: `{"max_tokens":1,"messages":[],"stop_sequences":["a","b"]}`,
			Want: map[string]string{"stop": `["a","b"]`}},
		{Name: "no stop in Responses", From: api.Chat, To: api.Responses, Body: `{"messages":[],"stop":["a"]}`,
			Want: map[string]string{"stop": "-"}, Dropped: []string{"stop"}},
		{Name: "penalties and friends", From: api.Chat, To: api.Messages,
			Body:    `{"messages":[],"seed":1,"logprobs":true,"top_logprobs":2,"frequency_penalty":0.1,"presence_penalty":0.1,"logit_bias":{"1":2}}`,
			Dropped: []string{"seed", "logprobs", "top_logprobs", "frequency_penalty", "presence_penalty", "logit_bias"}},
		{Name: "shared members carried", From: api.Chat, To: api.Responses,
			Body:    `{"messages":[],"top_logprobs":2,"prompt_cache_key":"k","verbosity":"low","service_tier":"flex","seed":1}`,
			Want:    map[string]string{"top_logprobs": "2", "prompt_cache_key": `"k"`, "text.verbosity": `"low"`, "service_tier": `"flex"`},
			Dropped: []string{"seed"}},
		{Name: "n>1 refused", From: api.Chat, To: api.Messages, Body: `{"messages":[],"n":2}`, Err: "n"},
		{Name: "n>1 refused", From: api.Chat, To: api.Responses, Body: `{"messages":[],"n":3}`, Err: "n"},
		{Name: "n=1 fine", From: api.Chat, To: api.Messages, Body: `{"messages":[],"n":1}`, Want: map[string]string{"n": "-"}},
	})
}

func TestRequestFormatUserStream(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"string"}}}`
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "json_schema", From: api.Chat, To: api.Messages,
			Body: `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}}`,
			Want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":` + schema + `}}`}},
		{Name: "json_schema", From: api.Chat, To: api.Responses,
			Body: `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}}`,
			Want: map[string]string{"text.format": `{"type":"json_schema","name":"x","strict":true,"schema":` + schema + `}`}},
		{Name: "output_config.format", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}}`,
			Want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":` + schema + `}}`}},
		{Name: "text.format", From: api.Responses, To: api.Messages,
			Body: `{"input":"x","text":{"format":{"type":"json_schema","name":"x","schema":` + schema + `},"verbosity":"high"}}`,
			Want: map[string]string{"output_config.format.schema": schema}, Dropped: []string{"text.verbosity"}},
		{Name: "json_object dropped", From: api.Chat, To: api.Messages, Body: `{"messages":[],"response_format":{"type":"json_object"}}`,
			Want: map[string]string{"output_config": "-"}, Dropped: []string{"response_format"}},
		{Name: "json_object", From: api.Chat, To: api.Responses, Body: `{"messages":[],"response_format":{"type":"json_object"}}`,
			Want: map[string]string{"text.format": `{"type":"json_object"}`}},
		{Name: "user", From: api.Chat, To: api.Messages, Body: `{"messages":[],"user":"u-1"}`, Want: map[string]string{"metadata": `{"user_id":"u-1"}`}},
		{Name: "e-mail user dropped", From: api.Chat, To: api.Messages, Body: `{"messages":[],"user":"a@b.c"}`,
			Want: map[string]string{"metadata": "-"}, Dropped: []string{"user"}},
		{Name: "metadata.user_id", From: api.Messages, To: api.Chat, Body: `{"max_tokens":1,"messages":[],"metadata":{"user_id":"u-1"}}`,
			Want: map[string]string{"user": `"u-1"`, "metadata": "-"}},
		{Name: "metadata", From: api.Responses, To: api.Chat, Body: `{"input":"x","metadata":{"k":"v"},"user":"u"}`,
			Want: map[string]string{"metadata": `{"k":"v"}`, "user": `"u"`}},
		{Name: "stream usage always", From: api.Messages, To: api.Chat, Body: `{"max_tokens":1,"messages":[],"stream":true}`,
			Want: map[string]string{"stream": "true", "stream_options": `{"include_usage":true}`}},
		{Name: "stream usage always", From: api.Responses, To: api.Chat, Body: `{"input":"x","stream":true}`,
			Want: map[string]string{"stream_options": `{"include_usage":true}`}},
		{Name: "no stream", From: api.Responses, To: api.Chat, Body: `{"input":"x","stream":false}`,
			Want: map[string]string{"stream": "-", "stream_options": "-"}},
		{Name: "stream", From: api.Chat, To: api.Messages, Body: `{"messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			Want: map[string]string{"stream": "true", "stream_options": "-"}},
		{Name: "stream", From: api.Chat, To: api.Responses, Body: `{"messages":[],"stream":true}`,
			Want: map[string]string{"stream": "true", "store": "false"}},
	})
}

func TestRequestStateAndExtras(t *testing.T) {
	translatetest.RunRequests(t, []translatetest.RequestCase{
		{Name: "previous_response_id refused", From: api.Responses, To: api.Chat, Body: `{"input":"x","previous_response_id":"resp_1"}`, Err: "previous_response_id"},
		{Name: "previous_response_id refused", From: api.Responses, To: api.Messages, Body: `{"input":"x","previous_response_id":"resp_1"}`, Err: "previous_response_id"},
		{Name: "conversation refused", From: api.Responses, To: api.Chat, Body: `{"input":"x","conversation":"conv_1"}`, Err: "conversation"},
		{Name: "background refused", From: api.Responses, To: api.Chat, Body: `{"input":"x","background":true}`, Err: "background"},
		{Name: "Codex extras", From: api.Responses, To: api.Messages,
			Body: `{"input":"x","store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","truncation":"auto","service_tier":"priority","reasoning":{"summary":"auto"}}`,
			Want: map[string]string{"store": "-", "include": "-"}, Dropped: []string{"truncation", "service_tier"}},
		{Name: "Claude Code extras", From: api.Messages, To: api.Chat,
			Body: `{"max_tokens":1,"messages":[],"context_management":{"edits":[]},"container":"c","mcp_servers":[],"output_config":{"effort":"high"},"thinking":{"type":"adaptive"}}`,
			Want: map[string]string{"reasoning_effort": `"high"`}, Dropped: []string{"context_management", "container", "mcp_servers"}},
		{Name: "unknown member listed", From: api.Chat, To: api.Messages, Body: `{"messages":[],"chat_template_kwargs":{}}`,
			Dropped: []string{"chat_template_kwargs"}},
		{Name: "wrong type", From: api.Chat, To: api.Messages, Body: `{"messages":[],"max_tokens":"many"}`, Err: "max_tokens"},
		{Name: "unknown role", From: api.Chat, To: api.Messages, Body: `{"messages":[{"role":"robot","content":"x"}]}`, Err: "messages[0].role"},
	})
}
