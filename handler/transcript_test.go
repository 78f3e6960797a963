package handler

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// A transcript reads each event where its scan found the members: the
// text decoded, a second choice or a tool call ends it.
func TestATranscriptReadsTheScannedEvent(t *testing.T) {
	tr := &transcript{}
	for _, ev := range []string{
		`{"id":"c-1","created":5,"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`,
		`{"id":"c-1","choices":[{"index":0,"delta":{"content":"caf\u00e9 \"au\"\n"},"finish_reason":null}]}`,
		`{"id":"c-1","choices":[{"index":0,"delta":{"content":"lait","function_call":null}}]}`,
		`{"choices":[],"usage":{"completion_tokens":3}}`,
	} {
		tr.add([]byte("data: " + ev + "\n\n"))
	}
	if tr.off || string(tr.text) != "café \"au\"\nlait" || string(tr.id) != `"c-1"` || string(tr.created) != "5" {
		t.Fatalf("%+v %q", tr, tr.text)
	}
	tr.add([]byte("data: {\"choices\":[{\"index\":1,\"delta\":{\"content\":\"x\"}}]}\n\n"))
	if !tr.off {
		t.Fatal("a second choice: still resumable")
	}
	tr = &transcript{}
	tr.add([]byte("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":0}]}}]}\n\n"))
	if !tr.off {
		t.Fatal("a tool call: still resumable")
	}

	tr = &transcript{gram: grammar.Grammar{API: api.Messages}}
	for _, ev := range []string{
		`{"type":"message_start","message":{"id":"m"}}`,
		`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`,
		`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hello, w\u00f6rld"}}`,
	} {
		tr.add([]byte("data: " + ev + "\n\n"))
	}
	if tr.off || string(tr.text) != "Hello, wörld" {
		t.Fatalf("%+v %q", tr, tr.text)
	}
	tr.add([]byte("data: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\"}}\n\n"))
	if !tr.off {
		t.Fatal("a second block: still resumable")
	}
}

// BenchmarkTranscriptEvent is what a resumable stream's transcript costs
// per event: no allocation but the text's growth.
func BenchmarkTranscriptEvent(b *testing.B) {
	g := grammar.Grammar{API: api.Chat}
	e := g.Scan(benchChunk, false)
	tr := &transcript{}
	b.ReportAllocs()
	for b.Loop() {
		tr.addScanned(&e)
		if len(tr.text) > 1<<16 {
			tr.text = tr.text[:0]
		}
	}
}
