package grammar

import (
	"bytes"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

var (
	openAI    = Grammar{API: api.Chat}
	responses = Grammar{API: api.Responses}
	anthropic = Grammar{API: api.Messages}
)

func ev(data string) []byte { return []byte("data: " + data + "\n\n") }

func TestScanReadsAnEventInOnePass(t *testing.T) {
	for _, c := range []struct {
		name      string
		g         Grammar
		ev        []byte
		probe     Kind // the kind before the commit point
		whole     bool
		usage     api.Usage
		hasUsage  bool
		noChoices bool
	}{
		{name: "keep-alive", g: openAI, ev: []byte(": keep-alive\n\n"), probe: Comment},
		{name: "done", g: openAI, ev: ev("[DONE]"), probe: Done},
		{name: "empty data", g: openAI, ev: ev(""), probe: Comment},
		{name: "not JSON", g: openAI, ev: ev("hello"), probe: Malformed},
		{name: "a cut object", g: openAI, ev: ev(`{"choices":[`), probe: Malformed},
		{name: "JSON of another shape", g: openAI, ev: ev(`[1,2]`), probe: Content},
		{name: "role-only chunk", g: openAI, ev: ev(`{"id":"x","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`), probe: Preamble},
		{name: "role and content", g: openAI, ev: ev(`{"choices":[{"delta":{"role":"assistant","content":"Hi"}}]}`), probe: Content},
		{name: "role and a tool call", g: openAI, ev: ev(`{"choices":[{"delta":{"role":"assistant","tool_calls":[{"index":0}]}}]}`), probe: Content},
		{name: "role and reasoning", g: openAI, ev: ev(`{"choices":[{"delta":{"role":"assistant","reasoning_content":"hm"}}]}`), probe: Content},
		{name: "an empty delta without a role", g: openAI, ev: ev(`{"choices":[{"delta":{}}]}`), probe: Content},
		{name: "content", g: openAI, ev: ev(`{"choices":[{"delta":{"content":" the"},"finish_reason":null}]}`), probe: Content},
		{name: "finish", g: openAI, ev: ev(`{"choices":[{"delta":{},"finish_reason":"stop"}]}`), probe: Content, whole: true},
		{name: "role and finish", g: openAI, ev: ev(`{"choices":[{"delta":{"role":"assistant"},"finish_reason":"length"}]}`), probe: Content, whole: true},
		{name: "include_usage's chunk", g: openAI, ev: ev(`{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":12}}`), probe: Content,
			usage: api.Usage{Input: 9, Output: 12}, hasUsage: true, noChoices: true},
		{name: "an error", g: openAI, ev: ev(`{"error":{"message":"overloaded"}}`), probe: ErrorEvent},
		{name: "error null", g: openAI, ev: ev(`{"error":null,"choices":[{"delta":{"content":"x"}}]}`), probe: Content},
		{name: "finish_reason in the text", g: openAI, ev: ev(`{"choices":[{"delta":{"content":"\"finish_reason\":\"stop\""}}]}`), probe: Content},
		{name: "responses delta", g: responses, ev: []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"Hi\"}\n\n"), probe: Content},
		{name: "responses completed", g: responses, ev: ev(`{"type":"response.completed","response":{"usage":{"input_tokens":3,"output_tokens":4}}}`), probe: Content, whole: true,
			usage: api.Usage{Input: 3, Output: 4}, hasUsage: true}, // the answer's usage, in the response it ends with
		{name: "responses failed", g: responses, ev: ev(`{"type": "response.failed"}`), probe: ErrorEvent, whole: true},
		{name: "responses created", g: responses, ev: ev(`{"type":"response.created","response":{"id":"resp_1","status":"in_progress","output":[],"usage":null},"sequence_number":0}`), probe: Preamble},
		{name: "responses in progress", g: responses, ev: ev(`{"type":"response.in_progress","response":{"id":"resp_1","status":"in_progress"},"sequence_number":1}`), probe: Preamble},
		{name: "responses queued", g: responses, ev: ev(`{"type":"response.queued","response":{"id":"resp_1","status":"queued"}}`), probe: Preamble},
		{name: "responses item added", g: responses, ev: ev(`{"type":"response.output_item.added","output_index":0,"item":{"type":"message","content":[]}}`), probe: Preamble},
		{name: "responses a call's item added", g: responses, ev: ev(`{"type":"response.output_item.added","output_index":0,"item":{"type":"function_call","name":"f","arguments":""}}`), probe: Preamble},
		{name: "responses part added", g: responses, ev: ev(`{"type":"response.content_part.added","output_index":0,"content_index":0,"part":{"type":"output_text","text":""}}`), probe: Preamble},
		{name: "responses summary part added", g: responses, ev: ev(`{"type":"response.reasoning_summary_part.added","output_index":0,"summary_index":0,"part":{"type":"summary_text","text":""}}`), probe: Preamble},
		{name: "responses arguments", g: responses, ev: ev(`{"type":"response.function_call_arguments.delta","output_index":0,"delta":"{\"a\""}`), probe: Content},
		{name: "responses reasoning", g: responses, ev: ev(`{"type":"response.reasoning_summary_text.delta","output_index":0,"delta":"hm"}`), probe: Content},
		{name: "responses an item done", g: responses, ev: ev(`{"type":"response.output_item.done","output_index":0,"item":{"type":"function_call","name":"f","arguments":"{}"}}`), probe: Content},
		{name: "responses error", g: responses, ev: []byte("event: error\ndata: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"overloaded\",\"sequence_number\":2}\n\n"), probe: ErrorEvent},
		{name: "responses a type named in the text", g: responses, ev: ev(`{"type":"response.output_text.delta","delta":"response.created"}`), probe: Content},
		{name: "passthrough responses created", g: Grammar{API: api.Other}, ev: ev(`{"type":"response.created","response":{"id":"resp_1"}}`), probe: Preamble},
		{name: "responses usage", g: responses, ev: ev(`{"type":"response.done","usage":{"input_tokens":3,"output_tokens":4}}`), probe: Content, usage: api.Usage{Input: 3, Output: 4}, hasUsage: true},
		{name: "message_start", g: anthropic, ev: []byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"m\",\"usage\":{\"input_tokens\":25,\"output_tokens\":1}}}\n\n"),
			probe: Preamble, usage: api.Usage{Input: 25, Output: 1}, hasUsage: true},
		{name: "ping", g: anthropic, ev: ev(`{"type":"ping"}`), probe: Preamble},
		{name: "block start", g: anthropic, ev: ev(`{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}`), probe: Preamble},
		{name: "block delta", g: anthropic, ev: ev(`{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"message_stop"}}`), probe: Content},
		{name: "message_delta", g: anthropic, ev: ev(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":15}}`), probe: Content,
			usage: api.Usage{Input: 0, Output: 15}, hasUsage: true},
		{name: "message_stop", g: anthropic, ev: ev(`{"type":"message_stop"}`), probe: Content, whole: true},
		{name: "anthropic error", g: anthropic, ev: ev(`{"type":"error","error":{"type":"overloaded_error"}}`), probe: ErrorEvent},
	} {
		t.Run(c.name, func(t *testing.T) {
			got := c.g.Scan(c.ev, true)
			if got.Kind != c.probe || got.Whole != c.whole || got.Usage != c.usage || got.HasUsage != c.hasUsage || got.NoChoices != c.noChoices {
				t.Fatalf("probe: %+v", got)
			}
			after := c.g.Scan(c.ev, false)
			want := c.probe
			if want == Preamble || want == ErrorEvent {
				want = Content // after the commit every valid data event is content
			}
			if after.Kind != want || after.Whole != c.whole || after.Usage != c.usage {
				t.Fatalf("committed: %+v", after)
			}
		})
	}
}

// FuzzScanAgreesWithTheClassifiers: after the commit, Scan's kind, usage
// and finish are what the classifiers it replaced (oracle_test.go) said,
// and before it, on events that name each member once, exactly, the kind
// is theirs; for Anthropic's grammar, the kind and message_start's usage.
func FuzzScanAgreesWithTheClassifiers(f *testing.F) {
	for _, s := range []string{
		`{"choices":[{"delta":{"role":"assistant","content":""}}]}`, `{"choices":[{"delta":{"content":"x"},"finish_reason":"stop"}]}`,
		`{"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2}}`, `{"error":{"message":"x"}}`, `[DONE]`, `hi`, `[1]`, `{"choices":null}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if bytes.ContainsAny(data, "\r\n") {
			return
		}
		e := ev(string(data))
		got := openAI.Scan(e, false)
		if want := classify(e, false); got.Kind != want {
			t.Fatalf("%q: kind %v, Classify %v", data, got.Kind, want)
		}
		info, _ := inspect(e)
		if got.Kind != info.Kind || got.Usage != info.Usage || got.HasUsage != info.HasUsage || got.Whole != info.Finished {
			t.Fatalf("%q: %+v, Inspect %+v", data, got, info)
		}
		if got.Kind == Content && got.NoChoices != emptyChoices(e) && !bytes.Contains(data, []byte(`\`)) &&
			bytes.Count(data, []byte(`"choices"`)) == 1 && bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
			t.Fatalf("%q: no choices %v, EmptyChoices %v", data, got.NoChoices, emptyChoices(e))
		}
		lower := bytes.ToLower(data)
		for _, n := range []string{`"role"`, `"error"`, `"choices"`, `"delta"`, `"content"`, `"text"`, `"finish_reason"`,
			`"reasoning"`, `"reasoning_content"`, `"refusal"`, `"tool_calls"`, `"function_call"`} {
			if bytes.Count(lower, []byte(n)) > 1 || bytes.Count(lower, []byte(n)) != bytes.Count(data, []byte(n)) {
				return
			}
		}
		// a role outside a delta is no chunk's; Classify's substring search saw one anywhere
		if bytes.Contains(data, []byte(`\`)) || bytes.Contains(data, []byte(`"role"`)) && !bytes.Contains(data, []byte(`"delta":{"role"`)) {
			return
		}
		if got, want := openAI.Scan(e, true).Kind, classify(e, true); got != want {
			t.Fatalf("%q: probe %v, classify %v", data, got, want)
		}
		a := anthropic.Scan(e, true)
		if want := classifyAnthropic(e); a.Kind != want && bytes.Count(lower, []byte(`"type"`)) == 1 && bytes.Count(data, []byte(`"type"`)) == 1 {
			t.Fatalf("%q: anthropic probe %v, classifyAnthropic %v", data, a.Kind, want)
		}
		if u, ok := messageStartUsage(e); ok && bytes.Count(data, []byte(`"usage"`)) == 1 && (a.Usage != u || !a.HasUsage) {
			t.Fatalf("%q: message_start usage %+v, messageStartUsage %+v", data, a.Usage, u)
		}
	})
}

// BenchmarkScanEvent is the per-event work of relaying a committed stream:
// one pass, no allocation.
func BenchmarkScanEvent(b *testing.B) {
	chunk := ev(`{"id":"chatcmpl-AbCdEf0123456789","object":"chat.completion.chunk","created":1732000000,"model":"gpt-4o-mini-2024-07-18","system_fingerprint":"fp_0123456789","choices":[{"index":0,"delta":{"content":" the quick"},"logprobs":null,"finish_reason":null}]}`)
	b.ReportAllocs()
	b.SetBytes(int64(len(chunk)))
	for b.Loop() {
		if e := openAI.Scan(chunk, false); e.Kind != Content {
			b.Fatal("not content")
		}
	}
}

// FuzzClassifyAnthropic: whatever an Anthropic event holds, a scan that
// finds no data calls it a comment, and an error event says so in its data.
func FuzzClassifyAnthropic(f *testing.F) {
	for _, s := range []string{
		"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{}}\n\n",
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hi\"}}\n\n",
		"event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"x\"}}\n\n",
		": comment\n\n", "data: {not json\n\n", "event: ping\ndata: {\"type\": \"ping\"}\n\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, ev []byte) {
		k := anthropic.Scan(ev, true).Kind
		data, ok := sse.Data(ev)
		if !ok && k != Comment {
			t.Fatalf("no data, kind %d", k)
		}
		if k == ErrorEvent && !strings.Contains(string(data), "error") {
			t.Fatalf("an error without the word: %q", data)
		}
	})
}

// A Responses stream reports its usage once, in the response its last event
// carries: a budget is charged from it.
func TestScanReadsTheUsageOfAResponsesStreamsLastEvent(t *testing.T) {
	g := Grammar{API: api.Responses}
	ev := []byte("event: response.completed\ndata: {\"type\":\"response.completed\",\"sequence_number\":9,\"response\":{\"id\":\"resp_1\",\"status\":\"completed\",\"output\":[],\"usage\":{\"input_tokens\":11,\"input_tokens_details\":{\"cached_tokens\":0},\"output_tokens\":7,\"total_tokens\":18}}}\n\n")
	e := g.Scan(ev, false)
	if !e.Whole || !e.HasUsage || e.Usage != (api.Usage{Input: 11, Output: 7}) {
		t.Fatalf("whole %v, usage %v %+v", e.Whole, e.HasUsage, e.Usage)
	}
	delta := []byte("event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"delta\":\"hi\",\"sequence_number\":3}\n\n")
	if e := g.Scan(delta, false); e.Whole || e.HasUsage {
		t.Fatalf("a delta: whole %v, usage %v", e.Whole, e.HasUsage)
	}
}
