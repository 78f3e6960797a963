package handler

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

var benchChunk = []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}` + "\n\n")

// BenchmarkClassifyEvent is the per-event work of relaying a committed stream.
func BenchmarkClassifyEvent(b *testing.B) {
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		if info, _ := grammar.Inspect(benchChunk); info.Kind != grammar.Content {
			b.Fatal("not content")
		}
	}
}
