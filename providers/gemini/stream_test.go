package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// The Gemini captures (testdata/streams/gemini_*.sse, written by hand: its
// README.md says after what) tell the scenarios of the other APIs'
// captures as :streamGenerateContent?alt=sse does: whole parts per chunk,
// no [DONE], the finishReason of the tool calls in a later chunk of its
// own (T15).

func TestStreamGeminiScenarios(t *testing.T) {
	for _, to := range translatetest.Clients {
		for _, scenario := range []string{"text", "thinking", "length", "error"} {
			t.Run(fmt.Sprintf("gemini-%v/%s", to, scenario), func(t *testing.T) {
				out := translatetest.Run(t, api.Gemini, to, translate.StreamOptions{IncludeUsage: true}, translatetest.Capture(t, api.Gemini, scenario))
				evs := translatetest.Split(t, out)
				got := translatetest.Reassemble(t, to, evs)
				want := translatetest.Expect(scenario, api.Gemini, to)
				want.Signature = "" // a thought's signature is Gemini's alone: no client gets it as a thinking signature
				if to == api.Responses && scenario == "thinking" {
					got.Usage.Reasoning = 0
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
				}
				if scenario == "error" {
					return // an SDK stops at the error: Reassemble's alone
				}
				want.Thinking = ""
				if got := translatetest.ReadSDK(t, to, evs); !reflect.DeepEqual(got, want) {
					t.Errorf("read by the SDK:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
				}
			})
		}
	}
}

// TestStreamGeminiToolsSignatureComesBack reads a Gemini 3 answer with two
// parallel calls, the first signed, as each client, and sends the
// client's next request (the calls and their results, as its SDK writes
// them) back to Gemini: the signature is on the first call's part again,
// and each result names its function.
func TestStreamGeminiToolsSignatureComesBack(t *testing.T) {
	for _, to := range translatetest.Clients {
		t.Run("gemini-"+to.String(), func(t *testing.T) {
			out := translatetest.Run(t, api.Gemini, to, translate.StreamOptions{IncludeUsage: true}, translatetest.Capture(t, api.Gemini, "tools"))
			got := translatetest.Reassemble(t, to, translatetest.Split(t, out))
			if got.Text != "Let me check." || got.Stop != translate.StopTool || got.Usage.Input != 300 || got.Usage.Output != 40 {
				t.Fatalf("reassembled %+v\n%s", got, out)
			}
			if len(got.Tools) != 2 || got.Tools[0].Name != "get_weather" || got.Tools[0].Args != `{"city":"Paris"}` ||
				got.Tools[1].Name != "get_time" || got.Tools[1].Args != `{"tz":"CET"}` {
				t.Fatalf("tools %+v", got.Tools)
			}
			if _, sig := geminiSplitID(got.Tools[0].ID); sig != "CiQB/+w=" {
				t.Errorf("first call's id %q carries signature %q", got.Tools[0].ID, sig)
			}
			if strings.Contains(got.Tools[1].ID, geminiSigMark) || got.Tools[0].ID == got.Tools[1].ID {
				t.Errorf("ids %q, %q", got.Tools[0].ID, got.Tools[1].ID)
			}
			gmCheckNext(t, to, got.Tools, "CiQB/+w=")
		})
	}
}

// gmCheckNext sends the client's next turn to Gemini and checks what its
// calls and results became.
func gmCheckNext(t *testing.T, client api.API, calls []translatetest.Call, sig string) {
	t.Helper()
	body := gmNextTurn(client, calls)
	req, dropped, err := translate.RequestBody(client, api.Gemini, body, translate.RequestOptions{})
	if err != nil {
		t.Fatalf("%v\n%s", err, body)
	}
	var g struct {
		Contents []struct {
			Role  string `json:"role"`
			Parts []struct {
				Text         *string `json:"text"`
				Signature    string  `json:"thoughtSignature"`
				FunctionCall *struct {
					Name string          `json:"name"`
					Args json.RawMessage `json:"args"`
				} `json:"functionCall"`
				FunctionResponse *struct {
					Name     string            `json:"name"`
					Response map[string]string `json:"response"`
				} `json:"functionResponse"`
			} `json:"parts"`
		} `json:"contents"`
	}
	if err := json.Unmarshal(req, &g); err != nil {
		t.Fatal(err)
	}
	if len(g.Contents) != 3 || g.Contents[1].Role != "model" || g.Contents[2].Role != "user" {
		t.Fatalf("contents: %s (dropped %v)", req, dropped)
	}
	model := g.Contents[1].Parts
	var fcs []int
	for i, p := range model {
		if p.FunctionCall != nil {
			fcs = append(fcs, i)
		}
	}
	if len(fcs) != 2 || model[fcs[0]].Signature != sig || model[fcs[1]].Signature != "" ||
		model[fcs[0]].FunctionCall.Name != "get_weather" || string(model[fcs[0]].FunctionCall.Args) != `{"city":"Paris"}` {
		t.Errorf("model turn: %s", req)
	}
	res := g.Contents[2].Parts
	if len(res) != 2 || res[0].FunctionResponse == nil || res[0].FunctionResponse.Name != "get_weather" ||
		res[0].FunctionResponse.Response["output"] != "18C" || res[1].FunctionResponse == nil || res[1].FunctionResponse.Name != "get_time" {
		t.Errorf("results: %s", req)
	}
	if strings.Contains(string(req), geminiSigMark) {
		t.Errorf("an id went to Gemini: %s", req)
	}
}

// gmNextTurn is the client's next request: its question, the answer's
// calls and their results ("18C" for the first).
func gmNextTurn(client api.API, calls []translatetest.Call) []byte {
	var b []byte
	results := []string{"18C", "14:00"}
	switch client {
	case api.Chat:
		var tc, msgs []any
		for _, c := range calls {
			tc = append(tc, map[string]any{"id": c.ID, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Args}})
		}
		msgs = append(msgs, map[string]any{"role": "user", "content": "Weather and time?"},
			map[string]any{"role": "assistant", "content": "Let me check.", "tool_calls": tc})
		for i, c := range calls {
			msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": c.ID, "content": results[i]})
		}
		b, _ = json.Marshal(map[string]any{"model": "g", "messages": msgs})
	case api.Messages:
		content := []any{map[string]any{"type": "text", "text": "Let me check."}}
		var rs []any
		for i, c := range calls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": json.RawMessage(c.Args)})
			rs = append(rs, map[string]any{"type": "tool_result", "tool_use_id": c.ID, "content": results[i]})
		}
		b, _ = json.Marshal(map[string]any{"model": "g", "max_tokens": 100, "messages": []any{
			map[string]any{"role": "user", "content": "Weather and time?"},
			map[string]any{"role": "assistant", "content": content},
			map[string]any{"role": "user", "content": rs}}})
	case api.Responses:
		input := []any{map[string]any{"role": "user", "content": "Weather and time?"},
			map[string]any{"type": "message", "role": "assistant", "content": []any{map[string]any{"type": "output_text", "text": "Let me check."}}}}
		for _, c := range calls {
			input = append(input, map[string]any{"type": "function_call", "call_id": c.ID, "name": c.Name, "arguments": c.Args})
		}
		for i, c := range calls {
			input = append(input, map[string]any{"type": "function_call_output", "call_id": c.ID, "output": results[i]})
		}
		b, _ = json.Marshal(map[string]any{"model": "g", "input": input})
	}
	return b
}

func TestStreamGeminiEnds(t *testing.T) {
	cases := []struct {
		name string
		evs  []string
		want string // in the Chat client's stream
		none bool   // End adds nothing: the answer was never whole
	}{
		{"blocked prompt", []string{`data: {"promptFeedback":{"blockReason":"SAFETY"},"usageMetadata":{"promptTokenCount":7}}` + "\n\n"},
			`"finish_reason":"content_filter"`, false},
		{"safety mid-answer", []string{`data: {"candidates":[{"content":{"parts":[{"text":"So"}],"role":"model"},"finishReason":"SAFETY"}]}` + "\n\n"},
			`"finish_reason":"content_filter"`, false},
		{"cut", []string{`data: {"candidates":[{"content":{"parts":[{"text":"So"}],"role":"model"}}]}` + "\n\n"}, "", true},
		{"malformed call", []string{`data: {"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}` + "\n\n"},
			`"finish_reason":"stop"`, false},
		{"usage after finish", []string{
			`data: {"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"STOP"}]}` + "\n\n",
			`data: {"usageMetadata":{"promptTokenCount":5,"candidatesTokenCount":1,"thoughtsTokenCount":2}}` + "\n\n"},
			`"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8,"prompt_tokens_details":{"cached_tokens":0},"completion_tokens_details":{"reasoning_tokens":2}}`, false},
	}
	for _, c := range cases {
		s := translate.NewStream(api.Gemini, api.Chat, translate.StreamOptions{IncludeUsage: true, Model: "gemini-x"})
		var out []byte
		for _, ev := range c.evs {
			out = s.Event(out, []byte(ev))
		}
		end := s.End(nil)
		if c.none {
			if len(end) != 0 {
				t.Errorf("%s: End wrote %q", c.name, end)
			}
			continue
		}
		all := string(out) + string(end)
		if !strings.Contains(all, c.want) || !strings.HasSuffix(all, "data: [DONE]\n\n") || !strings.Contains(all, `"model":"gemini-x"`) {
			t.Errorf("%s: %s", c.name, all)
		}
	}
}

func TestStreamGeminiErrorTypes(t *testing.T) {
	ev := `data: {"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}` + "\n\n"
	got := translatetest.Feed(translate.NewStream(api.Gemini, api.Messages, translate.StreamOptions{}), ev)
	if !strings.Contains(got, `"type":"rate_limit_error","message":"Quota exceeded"`) {
		t.Errorf("messages: %s", got)
	}
	got = translatetest.Feed(translate.NewStream(api.Gemini, api.Chat, translate.StreamOptions{}), ev)
	if !strings.Contains(got, `"type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"`) {
		t.Errorf("chat: %s", got)
	}
}

// BenchmarkStreamGemini measures one streamed text chunk of a Gemini
// upstream per client, as BenchmarkStream does for the others.
func BenchmarkStreamGemini(b *testing.B) {
	prelude := []byte(`data: {"candidates":[{"content":{"parts":[{"text":"Sure"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"totalTokenCount":25},"modelVersion":"gemini-2.5-flash","responseId":"mK8RaeXyLo6e"}` + "\n\n")
	delta := []byte(`data: {"candidates":[{"content":{"parts":[{"text":" the quick brown fox"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"totalTokenCount":25},"modelVersion":"gemini-2.5-flash","responseId":"mK8RaeXyLo6e"}` + "\n\n")
	for _, to := range translatetest.Clients {
		b.Run("gemini-"+to.String(), func(b *testing.B) {
			translatetest.BenchStream(b, api.Gemini, to, translate.StreamOptions{IncludeUsage: true}, [][]byte{prelude}, delta)
		})
	}
}

// geminiHuge is a Gemini engine answering with size bytes of text, or of
// tool calls' arguments: its calls come whole in one part, so calls of
// translatetest.PieceSize each.
func geminiHuge(tool bool, size int) *translatetest.Huge {
	piece := strings.Repeat("a", translatetest.PieceSize)
	ev := translatetest.SSE
	h := &translatetest.Huge{N: size / translatetest.PieceSize,
		Piece: ev("", `{"candidates":[{"content":{"role":"model","parts":[{"text":"`+piece+`"}]}}]}`)}
	if tool {
		h.Piece = ev("", `{"candidates":[{"content":{"role":"model","parts":[{"functionCall":{"name":"write","args":{"d":"`+piece+`"}}}]}}]}`)
	}
	h.Tail = []string{ev("", `{"candidates":[{"content":{"role":"model","parts":[]},"finishReason":"STOP"}],"usageMetadata":{"promptTokenCount":1,"candidatesTokenCount":2}}`)}
	return h
}

// TestStreamGeminiHugeAnswersKeepMemoryFlat: the hub's bound holds for a
// Gemini engine's huge answer, as internal/translate checks it for the
// clients' APIs.
func TestStreamGeminiHugeAnswersKeepMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB through each direction")
	}
	for _, size := range translatetest.HugeSizes {
		for _, to := range translatetest.Clients {
			t.Run(fmt.Sprintf("%s/gemini-%v", size.Name, to), func(t *testing.T) {
				translatetest.KeepsMemoryFlat(t, api.Gemini, to, size.N, func(n int) io.Reader { return geminiHuge(size.Tool, n) })
			})
		}
	}
}

// TestStreamGeminiBlocksAreBounded: a Gemini engine's calls come whole and
// each closes at once, so a Chat or Messages client goes on past the
// hub's bound of blocks held (1024), while a Responses client, which holds
// them all, is cut with ErrTooManyBlocks.
func TestStreamGeminiBlocksAreBounded(t *testing.T) {
	call := []byte("data: {\"candidates\":[{\"content\":{\"parts\":[{\"functionCall\":{\"name\":\"f\",\"args\":{}}}]}}]}\n\n")
	for _, to := range translatetest.Clients {
		s := translate.NewStream(api.Gemini, to, translate.StreamOptions{})
		var out []byte
		for range 4 << 10 {
			out = s.Event(out[:0], call)
		}
		if cut := errors.Is(s.Err(), translate.ErrTooManyBlocks); cut != (to == api.Responses) {
			t.Errorf("gemini-%v: %v after 4096 calls", to, s.Err())
		}
	}
}

// TestStreamGeminiOneEventTranslatesIntoBoundedOutput: a Gemini chunk of a
// hundred thousand one-letter parts would be ~150 bytes of events a part;
// the hub cuts what one event makes at twice an event's cap.
func TestStreamGeminiOneEventTranslatesIntoBoundedOutput(t *testing.T) {
	parts := strings.Repeat(`{"text":"a"},`, 80_000)
	ev := []byte(`data: {"candidates":[{"content":{"parts":[` + parts + `{"text":"b"}]}}]}` + "\n\n")
	s := translate.NewStream(api.Gemini, api.Responses, translate.StreamOptions{})
	out := s.Event(nil, ev)
	if !errors.Is(s.Err(), translate.ErrEventTooLarge) || len(out) > 2*sse.MaxEventSize+4<<10 {
		t.Fatalf("%d bytes, %v", len(out), s.Err())
	}
	if more := s.Event(nil, ev); len(more) != 0 || len(s.End(nil)) != 0 {
		t.Fatal("a cut stream wrote more")
	}
	if !bytes.Contains(out, []byte("response.output_text.delta")) {
		t.Fatal("nothing before the cut")
	}
}
