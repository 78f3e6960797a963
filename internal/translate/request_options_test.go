package translate

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

func TestRequestReasoning(t *testing.T) {
	const asst = `{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"sig"},{"type":"redacted_thinking","data":"d"},{"type":"text","text":"ok"}]}`
	rqRun(t, []rqCase{
		{name: "thinking history dropped once", from: api.Messages, to: api.Chat,
			body:    `{"max_tokens":9,"messages":[{"role":"user","content":"a"},` + asst + `,{"role":"user","content":"b"},` + asst + `]}`,
			want:    map[string]string{"messages.1": `{"role":"assistant","content":"ok"}`},
			dropped: []string{"messages[1].content[0] (thinking)"}},
		{name: "thinking history dropped", from: api.Messages, to: api.Responses,
			body:    `{"max_tokens":9,"messages":[{"role":"user","content":"a"},` + asst + `]}`,
			want:    map[string]string{"input.1": `{"type":"message","role":"assistant","content":"ok"}`},
			dropped: []string{"messages[1].content[0] (thinking)"}},
		{name: "budget low", from: api.Messages, to: api.Chat, body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":1024}}`,
			want: map[string]string{"reasoning_effort": `"low"`}},
		{name: "budget medium", from: api.Messages, to: api.Chat, body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":2048}}`,
			want: map[string]string{"reasoning_effort": `"medium"`}},
		{name: "budget high", from: api.Messages, to: api.Responses, body: `{"max_tokens":9,"messages":[],"thinking":{"type":"enabled","budget_tokens":10000}}`,
			want: map[string]string{"reasoning": `{"effort":"high"}`}},
		{name: "adaptive with effort", from: api.Messages, to: api.Chat, body: `{"max_tokens":9,"messages":[],"thinking":{"type":"adaptive"},"output_config":{"effort":"medium"}}`,
			want: map[string]string{"reasoning_effort": `"medium"`}},
		{name: "adaptive alone", from: api.Messages, to: api.Chat, body: `{"max_tokens":9,"messages":[],"thinking":{"type":"adaptive"}}`,
			want: map[string]string{"reasoning_effort": "-"}, dropped: []string{"thinking"}},
		{name: "effort to budget", from: api.Chat, to: api.Messages, body: `{"messages":[{"role":"user","content":"x"}],"reasoning_effort":"medium","temperature":0.2,"top_p":0.5}`,
			want:    map[string]string{"thinking": `{"type":"enabled","budget_tokens":2048}`, "temperature": "-", "top_p": "-"},
			dropped: []string{"temperature", "top_p"}},
		{name: "budget below max_tokens", from: api.Responses, to: api.Messages, body: `{"input":"x","reasoning":{"effort":"high"},"max_output_tokens":2000}`,
			want: map[string]string{"thinking": `{"type":"enabled","budget_tokens":1999}`, "max_tokens": "2000"}},
		{name: "budget too small: no thinking", from: api.Chat, to: api.Messages, body: `{"messages":[],"reasoning_effort":"low","max_tokens":500}`,
			want: map[string]string{"thinking": "-"}, dropped: []string{"reasoning_effort"}},
		{name: "forced tool: no thinking", from: api.Chat, to: api.Messages,
			body: `{"messages":[],"reasoning_effort":"low","tools":[{"type":"function","function":{"name":"a"}}],"tool_choice":"required"}`,
			want: map[string]string{"thinking": "-"}, dropped: []string{"reasoning_effort"}},
		{name: "tool loop without thinking: no thinking", from: api.Chat, to: api.Messages,
			body: `{"messages":[{"role":"user","content":"x"},{"role":"assistant","tool_calls":[{"id":"c","type":"function","function":{"name":"a","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"r"}],"reasoning_effort":"high","tools":[{"type":"function","function":{"name":"a"}}]}`,
			want: map[string]string{"thinking": "-"}, dropped: []string{"reasoning_effort"}},
		{name: "effort none", from: api.Chat, to: api.Messages, body: `{"messages":[],"reasoning_effort":"none"}`,
			want: map[string]string{"thinking": "-"}},
		{name: "reasoning_content dropped", from: api.Chat, to: api.Messages,
			body:    `{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y","reasoning_content":"because"}]}`,
			want:    map[string]string{"messages.1.content": `[{"type":"text","text":"y"}]`},
			dropped: []string{"messages[1].reasoning_content"}},
		{name: "reasoning items dropped", from: api.Responses, to: api.Chat,
			body:    `{"input":[{"type":"reasoning","summary":[],"encrypted_content":"e"},{"role":"user","content":"x"},{"type":"reasoning","summary":[]}],"reasoning":{"effort":"high","summary":"auto"},"include":["reasoning.encrypted_content"]}`,
			want:    map[string]string{"reasoning_effort": `"high"`, "messages.0.content": `"x"`},
			dropped: []string{"input[0] (reasoning)"}},
	})
}

func TestRequestSampling(t *testing.T) {
	rqRun(t, []rqCase{
		{name: "max_tokens default", from: api.Chat, to: api.Messages, body: `{"messages":[]}`, want: map[string]string{"max_tokens": "8192"}},
		{name: "max_tokens option", from: api.Chat, to: api.Messages, body: `{"messages":[]}`, opts: RequestOptions{MaxTokens: 321},
			want: map[string]string{"max_tokens": "321"}},
		{name: "max_completion_tokens", from: api.Chat, to: api.Messages, body: `{"messages":[],"max_completion_tokens":77}`, want: map[string]string{"max_tokens": "77"}},
		{name: "max_output_tokens", from: api.Responses, to: api.Messages, body: `{"input":"x","max_output_tokens":66}`, want: map[string]string{"max_tokens": "66"}},
		{name: "max_tokens", from: api.Messages, to: api.Responses, body: `{"max_tokens":55,"messages":[]}`, want: map[string]string{"max_output_tokens": "55"}},
		{name: "max_tokens", from: api.Messages, to: api.Chat, body: `{"max_tokens":55,"messages":[]}`, want: map[string]string{"max_tokens": "55"}},
		{name: "max_tokens", from: api.Responses, to: api.Chat, body: `{"input":"x","max_output_tokens":55}`, want: map[string]string{"max_tokens": "55"}},
		{name: "temperature clamped", from: api.Chat, to: api.Messages, body: `{"messages":[],"temperature":1.7,"top_p":0.9}`,
			want: map[string]string{"temperature": "1", "top_p": "0.9"}},
		{name: "temperature", from: api.Messages, to: api.Chat, body: `{"max_tokens":1,"messages":[],"temperature":0.3,"top_k":40}`,
			want: map[string]string{"temperature": "0.3", "top_k": "-"}, dropped: []string{"top_k"}},
		{name: "temperature", from: api.Chat, to: api.Responses, body: `{"messages":[],"temperature":0,"top_p":1}`,
			want: map[string]string{"temperature": "0", "top_p": "1"}},
		{name: "stop string", from: api.Chat, to: api.Messages, body: `{"messages":[],"stop":"END"}`, want: map[string]string{"stop_sequences": `["END"]`}},
		{name: "stop white space", from: api.Chat, to: api.Messages, body: `{"messages":[],"stop":["\n\n","END"]}`,
			want: map[string]string{"stop_sequences": `["END"]`}, dropped: []string{"stop[0]"}},
		{name: "stop_sequences", from: api.Messages, to: api.Chat, body: `{"max_tokens":1,"messages":[],"stop_sequences":["a","b"]}`,
			want: map[string]string{"stop": `["a","b"]`}},
		{name: "no stop in Responses", from: api.Chat, to: api.Responses, body: `{"messages":[],"stop":["a"]}`,
			want: map[string]string{"stop": "-"}, dropped: []string{"stop"}},
		{name: "penalties and friends", from: api.Chat, to: api.Messages,
			body:    `{"messages":[],"seed":1,"logprobs":true,"top_logprobs":2,"frequency_penalty":0.1,"presence_penalty":0.1,"logit_bias":{"1":2}}`,
			dropped: []string{"seed", "logprobs", "top_logprobs", "frequency_penalty", "presence_penalty", "logit_bias"}},
		{name: "shared members carried", from: api.Chat, to: api.Responses,
			body:    `{"messages":[],"top_logprobs":2,"prompt_cache_key":"k","verbosity":"low","service_tier":"flex","seed":1}`,
			want:    map[string]string{"top_logprobs": "2", "prompt_cache_key": `"k"`, "text.verbosity": `"low"`, "service_tier": `"flex"`},
			dropped: []string{"seed"}},
		{name: "n>1 refused", from: api.Chat, to: api.Messages, body: `{"messages":[],"n":2}`, err: "n"},
		{name: "n>1 refused", from: api.Chat, to: api.Responses, body: `{"messages":[],"n":3}`, err: "n"},
		{name: "n=1 fine", from: api.Chat, to: api.Messages, body: `{"messages":[],"n":1}`, want: map[string]string{"n": "-"}},
	})
}

func TestRequestFormatUserStream(t *testing.T) {
	const schema = `{"type":"object","properties":{"a":{"type":"string"}}}`
	rqRun(t, []rqCase{
		{name: "json_schema", from: api.Chat, to: api.Messages,
			body: `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}}`,
			want: map[string]string{"output_config": `{"format":{"type":"json_schema","schema":` + schema + `}}`}},
		{name: "json_schema", from: api.Chat, to: api.Responses,
			body: `{"messages":[],"response_format":{"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":` + schema + `}}}`,
			want: map[string]string{"text.format": `{"type":"json_schema","name":"x","strict":true,"schema":` + schema + `}`}},
		{name: "output_config.format", from: api.Messages, to: api.Chat,
			body: `{"max_tokens":1,"messages":[],"output_config":{"format":{"type":"json_schema","schema":` + schema + `}}}`,
			want: map[string]string{"response_format": `{"type":"json_schema","json_schema":{"name":"response","schema":` + schema + `}}`}},
		{name: "text.format", from: api.Responses, to: api.Messages,
			body: `{"input":"x","text":{"format":{"type":"json_schema","name":"x","schema":` + schema + `},"verbosity":"high"}}`,
			want: map[string]string{"output_config.format.schema": schema}, dropped: []string{"text.verbosity"}},
		{name: "json_object dropped", from: api.Chat, to: api.Messages, body: `{"messages":[],"response_format":{"type":"json_object"}}`,
			want: map[string]string{"output_config": "-"}, dropped: []string{"response_format"}},
		{name: "json_object", from: api.Chat, to: api.Responses, body: `{"messages":[],"response_format":{"type":"json_object"}}`,
			want: map[string]string{"text.format": `{"type":"json_object"}`}},
		{name: "user", from: api.Chat, to: api.Messages, body: `{"messages":[],"user":"u-1"}`, want: map[string]string{"metadata": `{"user_id":"u-1"}`}},
		{name: "e-mail user dropped", from: api.Chat, to: api.Messages, body: `{"messages":[],"user":"a@b.c"}`,
			want: map[string]string{"metadata": "-"}, dropped: []string{"user"}},
		{name: "metadata.user_id", from: api.Messages, to: api.Chat, body: `{"max_tokens":1,"messages":[],"metadata":{"user_id":"u-1"}}`,
			want: map[string]string{"user": `"u-1"`, "metadata": "-"}},
		{name: "metadata", from: api.Responses, to: api.Chat, body: `{"input":"x","metadata":{"k":"v"},"user":"u"}`,
			want: map[string]string{"metadata": `{"k":"v"}`, "user": `"u"`}},
		{name: "stream usage always", from: api.Messages, to: api.Chat, body: `{"max_tokens":1,"messages":[],"stream":true}`,
			want: map[string]string{"stream": "true", "stream_options": `{"include_usage":true}`}},
		{name: "stream usage always", from: api.Responses, to: api.Chat, body: `{"input":"x","stream":true}`,
			want: map[string]string{"stream_options": `{"include_usage":true}`}},
		{name: "no stream", from: api.Responses, to: api.Chat, body: `{"input":"x","stream":false}`,
			want: map[string]string{"stream": "-", "stream_options": "-"}},
		{name: "stream", from: api.Chat, to: api.Messages, body: `{"messages":[],"stream":true,"stream_options":{"include_usage":true}}`,
			want: map[string]string{"stream": "true", "stream_options": "-"}},
		{name: "stream", from: api.Chat, to: api.Responses, body: `{"messages":[],"stream":true}`,
			want: map[string]string{"stream": "true", "store": "false"}},
	})
}

func TestRequestStateAndExtras(t *testing.T) {
	rqRun(t, []rqCase{
		{name: "previous_response_id refused", from: api.Responses, to: api.Chat, body: `{"input":"x","previous_response_id":"resp_1"}`, err: "previous_response_id"},
		{name: "previous_response_id refused", from: api.Responses, to: api.Messages, body: `{"input":"x","previous_response_id":"resp_1"}`, err: "previous_response_id"},
		{name: "conversation refused", from: api.Responses, to: api.Chat, body: `{"input":"x","conversation":"conv_1"}`, err: "conversation"},
		{name: "background refused", from: api.Responses, to: api.Chat, body: `{"input":"x","background":true}`, err: "background"},
		{name: "Codex extras", from: api.Responses, to: api.Messages,
			body: `{"input":"x","store":false,"include":["reasoning.encrypted_content"],"prompt_cache_key":"k","truncation":"auto","service_tier":"priority","reasoning":{"summary":"auto"}}`,
			want: map[string]string{"store": "-", "include": "-"}, dropped: []string{"truncation", "service_tier"}},
		{name: "Claude Code extras", from: api.Messages, to: api.Chat,
			body: `{"max_tokens":1,"messages":[],"context_management":{"edits":[]},"container":"c","mcp_servers":[],"output_config":{"effort":"high"},"thinking":{"type":"adaptive"}}`,
			want: map[string]string{"reasoning_effort": `"high"`}, dropped: []string{"context_management", "container", "mcp_servers"}},
		{name: "unknown member listed", from: api.Chat, to: api.Messages, body: `{"messages":[],"chat_template_kwargs":{}}`,
			dropped: []string{"chat_template_kwargs"}},
		{name: "wrong type", from: api.Chat, to: api.Messages, body: `{"messages":[],"max_tokens":"many"}`, err: "max_tokens"},
		{name: "unknown role", from: api.Chat, to: api.Messages, body: `{"messages":[{"role":"robot","content":"x"}]}`, err: "messages[0].role"},
	})
}
