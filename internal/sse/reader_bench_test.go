package sse

import (
	"bytes"
	"io"
	"testing"
)

var benchChunk = []byte(`data: {"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}` + "\n\n")

// BenchmarkSSEReader splits a 50-event stream into events.
func BenchmarkSSEReader(b *testing.B) {
	stream := bytes.Repeat(benchChunk, 50)
	b.ReportAllocs()
	b.SetBytes(int64(len(stream)))
	for b.Loop() {
		r := NewReader(bytes.NewReader(stream))
		for {
			if _, err := r.Next(); err == io.EOF {
				break
			} else if err != nil {
				b.Fatal(err)
			}
		}
	}
}
