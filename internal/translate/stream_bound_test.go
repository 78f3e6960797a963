package translate_test

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// stHugeAnswer is an engine of api answering with size bytes of text, or
// of one tool call's arguments. The engines of the providers' APIs are
// checked in their packages (providers/bedrock, providers/gemini).
func stHugeAnswer(engine api.API, tool bool, size int) *translatetest.Huge {
	piece := strings.Repeat("a", translatetest.PieceSize)
	h := &translatetest.Huge{N: size / translatetest.PieceSize}
	ev := translatetest.SSE
	switch engine {
	case api.Chat:
		h.Head = []string{ev("", `{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)}
		h.Piece = ev("", `{"choices":[{"index":0,"delta":{"content":"`+piece+`"}}]}`)
		finish := "stop"
		if tool {
			h.Head = append(h.Head, ev("", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}}]}`))
			h.Piece = ev("", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`+piece+`"}}]}}]}`)
			finish = "tool_calls"
		}
		h.Tail = []string{ev("", `{"choices":[{"index":0,"delta":{},"finish_reason":"`+finish+`"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`), ev("", "[DONE]")}
	case api.Messages:
		h.Head = []string{ev("message_start", `{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1,"output_tokens":1}}}`),
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
		h.Piece = ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+piece+`"}}`)
		if tool {
			h.Head[1] = ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write","input":{}}}`)
			h.Piece = ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+piece+`"}}`)
		}
		h.Tail = []string{ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`),
			ev("message_stop", `{"type":"message_stop"}`)}
	case api.Responses:
		h.Head = []string{ev("response.created", `{"type":"response.created","response":{"id":"resp_1","model":"m","created_at":1}}`),
			ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}`)}
		h.Piece = ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"delta":"`+piece+`"}`)
		if tool {
			h.Head[1] = ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"call_1","name":"write"}}`)
			h.Piece = ev("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","output_index":0,"delta":"`+piece+`"}`)
		}
		h.Tail = []string{ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{}}`),
			ev("response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2}}}`)}
	}
	return h
}

// TestHugeAnswersKeepMemoryFlat: every client API of every client API's
// engine (the providers' APIs are checked in their packages) reads a huge answer (100 MB of text, 10 MB of tool-call arguments) with
// what it allocates bounded, not growing with the answer: a Chat or
// Messages client gets it all, a Responses client (whose closing events
// repeat the answer) gets it cut past 1 MiB with ErrAnswerTooLarge. Before
// the bound, a Responses client's Stream kept all of it (issue 51).
func TestHugeAnswersKeepMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB through each direction")
	}
	for _, size := range translatetest.HugeSizes {
		for _, from := range translatetest.Clients {
			for _, to := range translatetest.Clients {
				if from == to {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v-%v", size.Name, from, to), func(t *testing.T) {
					translatetest.KeepsMemoryFlat(t, from, to, size.N, func(n int) io.Reader { return stHugeAnswer(from, size.Tool, n) })
				})
			}
		}
	}
}

// TestResponsesAnswerUnderTheCapIsWhole: an answer just under the bound is
// told whole, and its last event (which repeats it all) fits one event.
func TestResponsesAnswerUnderTheCapIsWhole(t *testing.T) {
	up := stHugeAnswer(api.Chat, true, translate.MaxKept-64<<10)
	r := translate.NewReader(io.NopCloser(up), translate.NewStream(api.Chat, api.Responses, translate.StreamOptions{}))
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	evs := translatetest.Split(t, out) // the sse.Reader it uses refuses an event over 1 MiB
	last := evs[len(evs)-1]
	if last.Name != "response.completed" || len(last.Data) < translate.MaxKept-64<<10 {
		t.Fatalf("last event %s of %d bytes", last.Name, len(last.Data))
	}
}

// TestStreamBlocksAreBounded: an engine that opens tool call after tool
// call is cut past maxBlocks when it holds them all (every one still open,
// or a Responses client's), while a Chat client of calls that each close
// goes on: their closed blocks are dropped (a Gemini engine's, whose calls
// come whole, is checked in providers/gemini).
func TestStreamBlocksAreBounded(t *testing.T) {
	call := func(i int) string {
		return fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"c%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n", i, i)
	}
	closed := func(i int) string { // a Messages engine's calls, each closed before the next opens
		if i%2 == 0 {
			return fmt.Sprintf("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":%d,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t%d\",\"name\":\"f\",\"input\":{}}}\n\n", i/2, i/2)
		}
		return fmt.Sprintf("event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":%d}\n\n", i/2)
	}
	for _, c := range []struct {
		from, to api.API
		piece    func(int) string
		cut      bool
	}{
		{api.Chat, api.Messages, call, true}, // a Chat engine's calls stay open till the end
		{api.Chat, api.Responses, call, true},
		{api.Messages, api.Chat, closed, false}, // each closes before the next
		{api.Messages, api.Responses, closed, true},
	} {
		s := translate.NewStream(c.from, c.to, translate.StreamOptions{})
		var out []byte
		for i := range 4 * translate.MaxBlocks {
			out = s.Event(out[:0], []byte(c.piece(i)))
		}
		if got := errors.Is(s.Err(), translate.ErrTooManyBlocks); got != c.cut {
			t.Errorf("%v-%v: %v after %d calls, want cut %v", c.from, c.to, s.Err(), 4*translate.MaxBlocks, c.cut)
		}
		if s.HeldBlocks() > translate.MaxBlocks {
			t.Errorf("%v-%v: %d blocks held", c.from, c.to, s.HeldBlocks())
		}
	}
}
