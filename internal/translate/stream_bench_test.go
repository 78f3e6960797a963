package translate_test

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// stBenchPrelude is what an upstream sends before its text, and
// stBenchDelta one of its text deltas.
var stBenchPrelude = map[api.API][]string{
	api.Chat: {"data: " + `{"id":"chatcmpl-9xYz","object":"chat.completion.chunk","created":1700000000,"model":"qwen3-coder","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}]}` + "\n\n"},
	api.Messages: {
		"event: message_start\ndata: " + `{"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL","type":"message","role":"assistant","model":"claude-sonnet-4-5","content":[],"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"output_tokens":1}}}` + "\n\n",
		"event: content_block_start\ndata: " + `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}` + "\n\n",
	},
	api.Responses: {
		"event: response.created\ndata: " + `{"type":"response.created","response":{"id":"resp_68af","object":"response","created_at":1700000000,"status":"in_progress","model":"gpt-5-codex","output":[],"usage":null},"sequence_number":0}` + "\n\n",
		"event: response.output_item.added\ndata: " + `{"type":"response.output_item.added","output_index":0,"item":{"id":"msg_1","type":"message","status":"in_progress","role":"assistant","content":[]},"sequence_number":1}` + "\n\n",
	},
}

var stBenchDelta = map[api.API]string{
	api.Chat:      "data: " + `{"id":"chatcmpl-9xYz","object":"chat.completion.chunk","created":1700000000,"model":"qwen3-coder","system_fingerprint":"b5000","choices":[{"index":0,"delta":{"content":" the quick brown fox"},"logprobs":null,"finish_reason":null}]}` + "\n\n",
	api.Messages:  "event: content_block_delta\ndata: " + `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":" the quick brown fox"}}` + "\n\n",
	api.Responses: "event: response.output_text.delta\ndata: " + `{"type":"response.output_text.delta","item_id":"msg_1","output_index":0,"content_index":0,"delta":" the quick brown fox","logprobs":[],"sequence_number":2}` + "\n\n",
}

// BenchmarkStream measures one streamed text delta in each direction: a
// pooled Stream, reset every 1000 events (a long answer), writing into a
// reused buffer as the gateway's relay does.
func BenchmarkStream(b *testing.B) {
	for _, d := range stDirections {
		from, to := d[0], d[1]
		b.Run(from.String()+"-"+to.String(), func(b *testing.B) {
			var prelude [][]byte
			for _, ev := range stBenchPrelude[from] {
				prelude = append(prelude, []byte(ev))
			}
			translatetest.BenchStream(b, from, to, translate.StreamOptions{IncludeUsage: true}, prelude, []byte(stBenchDelta[from]))
		})
	}
}
