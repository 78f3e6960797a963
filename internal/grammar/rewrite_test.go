package grammar

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"testing"
)

// A rewritten event keeps its other lines: an Anthropic message_delta
// whose usage gets the carry still says which event it is.
func TestARewrittenEventKeepsItsOtherLines(t *testing.T) {
	t.Parallel()
	r := &Rewrite{Carry: 10}
	ev := []byte("event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":5}}\n\n")
	e := Grammar{API: api.Messages}.Scan(ev, false)
	got := string(r.AppendTo([]byte("before;"), ev, &e))
	want := "before;event: message_delta\ndata: {\"type\":\"message_delta\",\"usage\":{\"output_tokens\":15}}\n\n"
	if got != want {
		t.Fatalf("%q\nwant %q", got, want)
	}
	chunk := []byte("data: {\"id\":\"up-1\",\"created\":7,\"model\":\"real\",\"choices\":[]}\n\n")
	r = &Rewrite{ID: []byte(`"gw-1"`), Created: []byte(`1`), Model: []byte(`"asked"`)}
	if got := string(r.Apply(chunk)); got != "data: {\"id\":\"gw-1\",\"created\":1,\"model\":\"asked\",\"choices\":[]}\n\n" {
		t.Fatalf("%q", got)
	}
	if got := r.Apply([]byte(": keep-alive\n\n")); string(got) != ": keep-alive\n\n" {
		t.Fatalf("a comment: %q", got)
	}
}

// BenchmarkRewriteEvent is the per-event work a rewritten stream adds (a
// resumed one, or one after the gateway's loading chunks): its ids
// replaced from the one scan, into a buffer the stream reuses.
func BenchmarkRewriteEvent(b *testing.B) {
	chunk := ev(benchChunk)
	r := &Rewrite{ID: []byte(`"chatcmpl-gw"`), Created: []byte(`1700000000`), Model: []byte(`"m"`)}
	g := Grammar{API: api.Chat}
	var out []byte
	b.ReportAllocs()
	for b.Loop() {
		e := g.Scan(chunk, false)
		out = r.AppendTo(out[:0], chunk, &e)
	}
}
