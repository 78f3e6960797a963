package translate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The Gemini captures (testdata/streams/gemini_*.sse) tell the scenarios
// of the other APIs' captures as :streamGenerateContent?alt=sse does:
// whole parts per chunk, no [DONE], the finishReason of the tool calls in
// a later chunk of its own (T15).

func TestStreamGeminiScenarios(t *testing.T) {
	for _, to := range conversations {
		for _, scenario := range []string{"text", "thinking", "length", "error"} {
			t.Run(fmt.Sprintf("gemini-%v/%s", to, scenario), func(t *testing.T) {
				out := stRun(t, api.Gemini, to, StreamOptions{IncludeUsage: true}, stCapture(t, api.Gemini, scenario))
				got := stReassemble(t, to, stSplit(t, out))
				want := stExpect(scenario, api.Gemini, to)
				want.Signature = "" // a thought's signature is Gemini's alone: no client gets it as a thinking signature
				if to == api.Responses && scenario == "thinking" {
					got.Usage.Reasoning = 0
				}
				if !reflect.DeepEqual(got, want) {
					t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
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
	for _, to := range conversations {
		t.Run("gemini-"+to.String(), func(t *testing.T) {
			out := stRun(t, api.Gemini, to, StreamOptions{IncludeUsage: true}, stCapture(t, api.Gemini, "tools"))
			got := stReassemble(t, to, stSplit(t, out))
			if got.Text != "Let me check." || got.Stop != StopTool || got.Usage.Input != 300 || got.Usage.Output != 40 {
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
func gmCheckNext(t *testing.T, client api.API, calls []stCall, sig string) {
	t.Helper()
	body := gmNextTurn(client, calls)
	req, dropped, err := RequestBody(client, api.Gemini, body, RequestOptions{})
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
func gmNextTurn(client api.API, calls []stCall) []byte {
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
		s := NewStream(api.Gemini, api.Chat, StreamOptions{IncludeUsage: true, Model: "gemini-x"})
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
	got := stFeed(NewStream(api.Gemini, api.Messages, StreamOptions{}), ev)
	if !strings.Contains(got, `"type":"rate_limit_error","message":"Quota exceeded"`) {
		t.Errorf("messages: %s", got)
	}
	got = stFeed(NewStream(api.Gemini, api.Chat, StreamOptions{}), ev)
	if !strings.Contains(got, `"type":"rate_limit_error","param":null,"code":"rate_limit_exceeded"`) {
		t.Errorf("chat: %s", got)
	}
}

// BenchmarkStreamGemini measures one streamed text chunk of a Gemini
// upstream per client, as BenchmarkStream does for the others.
func BenchmarkStreamGemini(b *testing.B) {
	prelude := []byte(`data: {"candidates":[{"content":{"parts":[{"text":"Sure"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"totalTokenCount":25},"modelVersion":"gemini-2.5-flash","responseId":"mK8RaeXyLo6e"}` + "\n\n")
	delta := []byte(`data: {"candidates":[{"content":{"parts":[{"text":" the quick brown fox"}],"role":"model"},"index":0}],"usageMetadata":{"promptTokenCount":25,"totalTokenCount":25},"modelVersion":"gemini-2.5-flash","responseId":"mK8RaeXyLo6e"}` + "\n\n")
	for _, to := range conversations {
		b.Run("gemini-"+to.String(), func(b *testing.B) {
			s := NewStream(api.Gemini, to, StreamOptions{IncludeUsage: true})
			out := make([]byte, 0, 64<<10)
			start := func() {
				s.Reset(api.Gemini, to, StreamOptions{IncludeUsage: true})
				out = s.Event(out[:0], prelude)
			}
			for range 2 {
				start()
				for range 1000 {
					out = s.Event(out[:0], delta)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(delta)))
			b.ResetTimer()
			for i := range b.N {
				if i%1000 == 0 {
					start()
				}
				out = s.Event(out[:0], delta)
			}
		})
	}
}
