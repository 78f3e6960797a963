package translate

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// stHuge is an engine's stream made as it is read, never held whole: the
// events before the answer, n times the event carrying one piece, and the
// events after it. Reading it allocates nothing.
type stHuge struct {
	head, tail []string
	piece      string
	n          int
	cur        string // what is left of the event being read
}

func (h *stHuge) Read(p []byte) (int, error) {
	for h.cur == "" {
		switch {
		case len(h.head) > 0:
			h.cur, h.head = h.head[0], h.head[1:]
		case h.n > 0:
			h.cur = h.piece
			h.n--
		case len(h.tail) > 0:
			h.cur, h.tail = h.tail[0], h.tail[1:]
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, h.cur)
	h.cur = h.cur[n:]
	return n, nil
}

// stPieceSize is what each event of a huge answer carries.
const stPieceSize = 8 << 10

// stHugeAnswer is an engine of api answering with size bytes of text, or
// of one tool call's arguments (Gemini, whose calls come whole in one
// part: calls of stPieceSize each).
func stHugeAnswer(engine api.API, tool bool, size int) *stHuge {
	piece := strings.Repeat("a", stPieceSize)
	h := &stHuge{n: size / stPieceSize}
	ev := func(name, data string) string {
		if name == "" {
			return "data: " + data + "\n\n"
		}
		return "event: " + name + "\ndata: " + data + "\n\n"
	}
	switch engine {
	case api.Chat:
		h.head = []string{ev("", `{"id":"c1","model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`)}
		h.piece = ev("", `{"choices":[{"index":0,"delta":{"content":"`+piece+`"}}]}`)
		finish := "stop"
		if tool {
			h.head = append(h.head, ev("", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"write","arguments":""}}]}}]}`))
			h.piece = ev("", `{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"`+piece+`"}}]}}]}`)
			finish = "tool_calls"
		}
		h.tail = []string{ev("", `{"choices":[{"index":0,"delta":{},"finish_reason":"`+finish+`"}],"usage":{"prompt_tokens":1,"completion_tokens":2}}`), ev("", "[DONE]")}
	case api.Messages:
		h.head = []string{ev("message_start", `{"type":"message_start","message":{"id":"msg_1","model":"m","usage":{"input_tokens":1,"output_tokens":1}}}`),
			ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`)}
		h.piece = ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"`+piece+`"}}`)
		if tool {
			h.head[1] = ev("content_block_start", `{"type":"content_block_start","index":0,"content_block":{"type":"tool_use","id":"toolu_1","name":"write","input":{}}}`)
			h.piece = ev("content_block_delta", `{"type":"content_block_delta","index":0,"delta":{"type":"input_json_delta","partial_json":"`+piece+`"}}`)
		}
		h.tail = []string{ev("content_block_stop", `{"type":"content_block_stop","index":0}`),
			ev("message_delta", `{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":2}}`),
			ev("message_stop", `{"type":"message_stop"}`)}
	case api.Responses:
		h.head = []string{ev("response.created", `{"type":"response.created","response":{"id":"resp_1","model":"m","created_at":1}}`),
			ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"message"}}`)}
		h.piece = ev("response.output_text.delta", `{"type":"response.output_text.delta","output_index":0,"delta":"`+piece+`"}`)
		if tool {
			h.head[1] = ev("response.output_item.added", `{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","call_id":"call_1","name":"write"}}`)
			h.piece = ev("response.function_call_arguments.delta", `{"type":"response.function_call_arguments.delta","output_index":0,"delta":"`+piece+`"}`)
		}
		h.tail = []string{ev("response.output_item.done", `{"type":"response.output_item.done","output_index":0,"item":{}}`),
			ev("response.completed", `{"type":"response.completed","response":{"status":"completed","usage":{"input_tokens":1,"output_tokens":2}}}`)}
	case api.Converse:
		h.head = []string{ev("messageStart", `{"role":"assistant"}`)}
		h.piece = ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+piece+`"}}`)
		if tool {
			h.head = append(h.head, ev("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tu_1","name":"write"}}}`))
			h.piece = ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"`+piece+`"}}}`)
		}
		h.tail = []string{ev("contentBlockStop", `{"contentBlockIndex":0}`), ev("messageStop", `{"stopReason":"end_turn"}`),
			ev("metadata", `{"usage":{"inputTokens":1,"outputTokens":2}}`)}
	case api.Gemini:
		h.piece = ev("", `{"candidates":[{"content":{"role":"model","parts":[{"text":"`+piece+`"}]}}]}`)
		if tool {
			h.piece = ev("", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"write","args":{"d":"`+piece+`"}}}]}}]}`)
		}
		h.tail = []string{ev("", `{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2}}`)}
	}
	return h
}

// TestHugeAnswersKeepMemoryFlat: every client API of every engine API
// reads a huge answer (100 MB of text, 10 MB of tool-call arguments) with
// what it allocates bounded, not growing with the answer: a Chat or
// Messages client gets it all, a Responses client (whose closing events
// repeat the answer) gets it cut past 1 MiB with ErrAnswerTooLarge. Before
// the bound, a Responses client's Stream kept all of it (issue 51).
func TestHugeAnswersKeepMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB through each direction")
	}
	const allocLimit = 6 << 20
	for _, size := range []struct {
		name string
		tool bool
		n    int
	}{{"text 100 MB", false, 100 << 20}, {"arguments 10 MB", true, 10 << 20}} {
		for _, from := range []api.API{api.Chat, api.Messages, api.Responses, api.Converse, api.Gemini} {
			for _, to := range []api.API{api.Chat, api.Messages, api.Responses} {
				if from == to {
					continue
				}
				t.Run(fmt.Sprintf("%s/%v-%v", size.name, from, to), func(t *testing.T) {
					n := size.n
					if raceEnabled {
						n /= 10 // what it proves is the allocations, not counted under -race
					}
					up := stHugeAnswer(from, size.tool, n)
					r := NewReader(io.NopCloser(up), NewStream(from, to, StreamOptions{Model: "m"}))
					defer r.Close()
					var before, after runtime.MemStats
					runtime.GC()
					runtime.ReadMemStats(&before)
					got, err := io.CopyBuffer(io.Discard, r, make([]byte, 32<<10))
					runtime.ReadMemStats(&after)
					alloc := after.TotalAlloc - before.TotalAlloc
					t.Logf("%d bytes to the client, %d KiB allocated, err %v", got, alloc>>10, err)
					if alloc > allocLimit && !raceEnabled {
						t.Errorf("%d KiB allocated for the answer, want at most %d KiB", alloc>>10, allocLimit>>10)
					}
					if to == api.Responses {
						if !errors.Is(err, ErrAnswerTooLarge) || got > 4<<20 {
							t.Errorf("a Responses client: %d bytes and %v, want the stream cut past 1 MiB with ErrAnswerTooLarge", got, err)
						}
						return
					}
					if err != nil || got < int64(n) {
						t.Errorf("%d bytes and %v, want the whole answer (%d bytes)", got, err, n)
					}
				})
			}
		}
	}
}

// TestResponsesAnswerUnderTheCapIsWhole: an answer just under the bound is
// told whole, and its last event (which repeats it all) fits one event.
func TestResponsesAnswerUnderTheCapIsWhole(t *testing.T) {
	up := stHugeAnswer(api.Chat, true, maxKept-64<<10)
	r := NewReader(io.NopCloser(up), NewStream(api.Chat, api.Responses, StreamOptions{}))
	defer r.Close()
	out, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	evs := stSplit(t, out) // the sse.Reader it uses refuses an event over 1 MiB
	last := evs[len(evs)-1]
	if last.name != "response.completed" || len(last.data) < maxKept-64<<10 {
		t.Fatalf("last event %s of %d bytes", last.name, len(last.data))
	}
}

// TestStreamBlocksAreBounded: an engine that opens tool call after tool
// call is cut past maxBlocks when it holds them all (every one still open,
// or a Responses client's), while a Chat or Messages client of calls that
// each close goes on: their closed blocks are dropped.
func TestStreamBlocksAreBounded(t *testing.T) {
	call := func(i int) string {
		return fmt.Sprintf("data: {\"choices\":[{\"index\":0,\"delta\":{\"tool_calls\":[{\"index\":%d,\"id\":\"c%d\",\"function\":{\"name\":\"f\",\"arguments\":\"{}\"}}]}}]}\n\n", i, i)
	}
	gemini := func(int) string {
		return "data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]}\n\n"
	}
	for _, c := range []struct {
		from, to api.API
		piece    func(int) string
		cut      bool
	}{
		{api.Chat, api.Messages, call, true}, // a Chat engine's calls stay open till the end
		{api.Chat, api.Responses, call, true},
		{api.Gemini, api.Chat, gemini, false}, // each closes at once
		{api.Gemini, api.Messages, gemini, false},
		{api.Gemini, api.Responses, gemini, true},
	} {
		s := NewStream(c.from, c.to, StreamOptions{})
		var out []byte
		for i := range 3 * maxBlocks {
			out = s.Event(out[:0], []byte(c.piece(i)))
		}
		if got := errors.Is(s.Err(), ErrTooManyBlocks); got != c.cut {
			t.Errorf("%v-%v: %v after %d calls, want cut %v", c.from, c.to, s.Err(), 3*maxBlocks, c.cut)
		}
		if len(s.blocks) > maxBlocks {
			t.Errorf("%v-%v: %d blocks held", c.from, c.to, len(s.blocks))
		}
	}
}

// TestOneEventTranslatesIntoBoundedOutput: a Gemini chunk of a hundred
// thousand one-letter parts would be ~150 bytes of events a part.
func TestOneEventTranslatesIntoBoundedOutput(t *testing.T) {
	parts := strings.Repeat(`{"text":"a"},`, 80_000)
	ev := []byte(`data: {"candidates":[{"content":{"parts":[` + parts + `{"text":"b"}]}}]}` + "\n\n")
	s := NewStream(api.Gemini, api.Responses, StreamOptions{})
	out := s.Event(nil, ev)
	if !errors.Is(s.Err(), ErrEventTooLarge) || len(out) > maxEventOutput+4<<10 {
		t.Fatalf("%d bytes, %v", len(out), s.Err())
	}
	if more := s.Event(nil, ev); len(more) != 0 || len(s.End(nil)) != 0 {
		t.Fatal("a cut stream wrote more")
	}
	if !bytes.Contains(out, []byte("response.output_text.delta")) {
		t.Fatal("nothing before the cut")
	}
}
