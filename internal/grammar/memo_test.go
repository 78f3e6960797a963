package grammar

import (
	"reflect"
	"strings"
	"testing"
)

const (
	benchPrefix = `{"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789",`
	benchChunk  = benchPrefix + `"choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}`
)

// A stream scanned with a memo is told what it is told without one, event
// by event: chunks that repeat their first members, one that does not, a
// broken one, the end and the usage chunk, and Anthropic's events.
func TestScanMemoIsScan(t *testing.T) {
	streams := map[string]struct {
		g      Grammar
		events []string
	}{
		"openai": {openAI, []string{
			benchChunk,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"fox"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"fox"},"logprobs":null,"finish_reason":null}]`,
			`{"id":"chatcmpl-other","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"x"}}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`,
			benchPrefix + `"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12,"total_tokens":21}}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"late"}}],"model":"repeated","usage":null}`,
			`[DONE]`,
			`{"choices":[{"index":0,"delta":{"content":"llama.cpp puts choices first"}}],"created":1,"id":"x"}`,
			`{"choices":[{"index":0,"delta":{"content":"again"}}],"created":1,"id":"x"}`,
		}},
		"template": {openAI, []string{
			benchChunk,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"fox"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":" jumps \"over\" \\"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":""},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"bad \x"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,"finish_reason":null}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,"finish_reason":"stop"}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"content":"ok"},"logprobs":null,"finish_reason":"length"}]}`,
			benchPrefix + `"choices":[{"index":0,"delta":{"contenu":"ok"},"logprobs":null,"finish_reason":"length"}]}`,
			`{"id":"a","model":"m1","choices":[{"delta":{"content":"x"}}]}`,
			`{"id":"a","model":"m2","choices":[{"delta":{"content":"x"}}]}`,
			`{"id":"a","model":"m3","choices":[{"delta":{"content":"x"}}]}`,
			`{"id":"a","model":"m3","choices":[{"delta":{"content":"xy"}}],"usage":{"prompt_tokens":1}}`,
			`{"id":"a","model":"m3","choices":[{"delta":{"content":"xyz"}}],"usage":{"prompt_tokens":1}}`,
			`{"id":"a","model":"m3","choices":[{"delta":{"content":"xyz"}}],"usage":{"prompt_tokens":2}}`,
		}},
		"anthropic": {anthropic, []string{
			`{"type":"message_start","message":{"id":"msg_1","usage":{"input_tokens":25,"output_tokens":1}}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"!"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"again"}}`,
			`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"and again"}}`,
			`{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"a\""}}`,
			`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`,
			`{"type":"message_stop"}`,
		}},
	}
	for name, s := range streams {
		var m Memo
		for _, data := range s.events {
			got, want := s.g.ScanMemo(ev(data), &m), s.g.Scan(ev(data), false)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("%s: %s:\nScanMemo %+v\nScan     %+v", name, data, got, want)
			}
		}
	}
}

// Whatever three events follow each other, the third is scanned with the
// memo of the first two as it is without: the template the first two
// teach (one string they differ in) never takes a third that a scan
// would read otherwise.
func FuzzScanMemoTemplate(f *testing.F) {
	f.Add(`{"id":"x","choices":[{"delta":{"content":"`, `a`, `b`, `c"}}]}`, false)
	f.Add(`{"type":"content_block_delta","delta":{"type":"text_delta","text":"`, `Hi`, ``, `"}}`, true)
	f.Add(`{"id":"x","choices":[{"delta":{"content":"`, `a"},"finish_reason":null}],"usage":{"x":"`, `b"},"finish_reason":"stop"}],"usage":{"x":"`, `"}}`, false)
	f.Fuzz(func(t *testing.T, head, s1, s2, tail string, anthropicStream bool) {
		g := openAI
		if anthropicStream {
			g = anthropic
		}
		var m Memo
		g.ScanMemo(ev(head+s1+tail), &m)
		g.ScanMemo(ev(head+s2+tail), &m)
		for _, third := range []string{head + s1 + s2 + tail, head + s2 + s1 + tail, head + tail, head + s2 + tail} {
			if got, want := g.ScanMemo(ev(third), &m), g.Scan(ev(third), false); !reflect.DeepEqual(got, want) {
				t.Fatalf("%q after %q, %q:\nScanMemo %+v\nScan     %+v", third, head+s1+tail, head+s2+tail, got, want)
			}
		}
	})
}

// Whatever two events follow each other, the second is scanned with the
// memo of the first as it is without.
func FuzzScanMemo(f *testing.F) {
	f.Add(benchChunk, `"choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`, false)
	f.Add(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hi"}}`, `"delta":{"type":"text_delta","text":""}}`, true)
	f.Fuzz(func(t *testing.T, first, tail string, anthropicStream bool) {
		g := openAI
		if anthropicStream {
			g = anthropic
		}
		var m Memo
		g.ScanMemo(ev(first), &m)
		second := tail
		if at := m.resume.At; at > 0 {
			second = first[:at] + tail // share the bytes the memo keeps
		}
		if got, want := g.ScanMemo(ev(second), &m), g.Scan(ev(second), false); !reflect.DeepEqual(got, want) {
			t.Fatalf("%q after %q:\nScanMemo %+v\nScan     %+v", second, first, got, want)
		}
	})
}

// BenchmarkScanMemo is BenchmarkScanEvent for chunks that differ in their
// text, as a stream's do: the memo's template.
func BenchmarkScanMemo(b *testing.B) {
	benchScanMemo(b, ev(benchChunk), ev(strings.Replace(benchChunk, " the quick", " brown", 1)))
}

// BenchmarkScanMemoResume is BenchmarkScanMemo for chunks that differ in
// more than a string (a Responses stream numbers its events): the resume.
func BenchmarkScanMemoResume(b *testing.B) {
	benchScanMemo(b, ev(strings.Replace(benchChunk, `"index":0`, `"index":1`, 1)), ev(strings.Replace(benchChunk, " the quick", " brown", 1)))
}

// benchScanMemo scans the two chunks in turn with one memo.
func benchScanMemo(b *testing.B, one, other []byte) {
	chunks := [2][]byte{one, other}
	var m Memo
	openAI.ScanMemo(other, &m)
	b.ReportAllocs()
	b.SetBytes(int64(len(one)))
	i := 0
	for b.Loop() {
		i ^= 1
		if e := openAI.ScanMemo(chunks[i], &m); e.Kind != Content {
			b.Fatal("not content")
		}
	}
}
