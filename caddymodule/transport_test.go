package caddymodule

import (
	"encoding/json"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// An engine's connections keep a 1 KiB write buffer, not Go's 4 KiB: it
// holds a request's headers, and an open stream keeps its connection;
// a transport block's write_buffer_size still wins.
func TestEngineTransportsKeepASmallWriteBuffer(t *testing.T) {
	ctx, cancel := caddy.NewContext(caddy.Context{Context: t.Context()})
	defer cancel()
	tr, err := newTransport(ctx, engines.Config{Name: "e", To: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Cleanup()
	if tr.WriteBufferSize != 1<<10 {
		t.Fatalf("write buffer %d", tr.WriteBufferSize)
	}
	tr, err = newTransport(ctx, engines.Config{Name: "e", To: "http://127.0.0.1:1", Transport: json.RawMessage(`{"write_buffer_size":8192}`)})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Cleanup()
	if tr.WriteBufferSize != 8192 {
		t.Fatalf("write buffer %d with write_buffer_size 8192", tr.WriteBufferSize)
	}
}
