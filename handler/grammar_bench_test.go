package handler

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

var benchChunk = []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}` + "\n\n")

// BenchmarkClassifyEvent is the per-event work of relaying a committed
// stream: one pass (grammar.Scan).
func BenchmarkClassifyEvent(b *testing.B) {
	g := grammar.Grammar{End: grammar.EndFinish}
	b.ReportAllocs()
	b.SetBytes(int64(len(benchChunk)))
	for b.Loop() {
		if e := g.Scan(benchChunk, false); e.Kind != grammar.Content {
			b.Fatal("not content")
		}
	}
}

// BenchmarkRewriteEvent is the per-event work a rewritten stream adds (a
// resumed one, or one after the gateway's loading chunks): its ids
// replaced from the one scan, into a buffer the stream reuses.
func BenchmarkRewriteEvent(b *testing.B) {
	r := &grammar.Rewrite{ID: []byte(`"chatcmpl-gw"`), Created: []byte(`1700000000`), Model: []byte(`"m"`)}
	g := grammar.Grammar{End: grammar.EndFinish}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		e := g.Scan(benchChunk, false)
		out = r.AppendTo(out[:0], benchChunk, &e)
	}
}
