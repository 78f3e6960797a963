package main

import (
	"net/http"
	"strconv"
	"strings"
)

// X-Bench-Tool-Args: <bytes> asks a stream whose answer is one tool call
// with that many bytes of arguments (at most maxToolArgs), sent in pieces
// of toolArgsPiece, each its own flushed chunk, as a runaway model (or a
// hostile node) would: the hostile phase's translated streams (issue 51)
// send it to a Responses client, whose closing events would repeat it
// whole. The chunks are precomputed: the upstream costs a write per piece.

const (
	maxToolArgs   = 1 << 30
	toolArgsPiece = 8 << 10
)

var (
	toolArgsHead = []byte(`data: {"id":"chatcmpl-bench-tool","object":"chat.completion.chunk","created":1700000000,"model":"bench",` +
		`"choices":[{"index":0,"delta":{"role":"assistant","tool_calls":[{"index":0,"id":"call_bench","type":"function",` +
		`"function":{"name":"write_file","arguments":""}}]},"finish_reason":null}]}` + "\n\n")
	toolArgsChunk = []byte(`data: {"id":"chatcmpl-bench-tool","object":"chat.completion.chunk","created":1700000000,"model":"bench",` +
		`"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"` + strings.Repeat("x", toolArgsPiece) +
		`"}}]},"finish_reason":null}]}` + "\n\n")
	toolArgsTail = []byte(`data: {"id":"chatcmpl-bench-tool","object":"chat.completion.chunk","created":1700000000,"model":"bench",` +
		`"choices":[{"index":0,"delta":{},"finish_reason":"tool_calls"}]}` + "\n\ndata: [DONE]\n\n")
)

// toolArgs is the size X-Bench-Tool-Args asks, 0 for none.
func toolArgs(r *http.Request) int {
	n, err := strconv.Atoi(r.Header.Get("X-Bench-Tool-Args"))
	if err != nil || n <= 0 || n > maxToolArgs {
		return 0
	}
	return n
}

// toolStream streams a tool call of size bytes of arguments, and counts
// the bytes of them written in u.toolArgsSent (a stream the gateway cuts
// stops at the first write that fails).
func (u *upstream) toolStream(w http.ResponseWriter, size int) {
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	if _, err := w.Write(toolArgsHead); err != nil {
		return
	}
	for sent := 0; sent < size; sent += toolArgsPiece {
		if _, err := w.Write(toolArgsChunk); err != nil {
			return
		}
		flusher.Flush()
		u.toolArgsSent.Add(toolArgsPiece)
	}
	_, _ = w.Write(toolArgsTail)
	flusher.Flush()
}
