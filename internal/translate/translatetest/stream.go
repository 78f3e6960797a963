package translatetest

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Event is one event of a translated stream: its name (event: line,
// "" for none) and its data.
type Event struct {
	Name, Data string
	Comment    bool
}

// Split splits a client's stream into events, failing on anything that
// is not a complete event whose data is JSON or [DONE].
func Split(t testing.TB, out []byte) []Event {
	t.Helper()
	var evs []Event
	r := sse.NewReader(bytes.NewReader(out))
	defer r.Release()
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return evs
		}
		if err != nil {
			t.Fatalf("client stream: %v in %q", err, out)
		}
		var e Event
		for _, line := range strings.Split(strings.TrimRight(string(ev), "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
				e.Comment = true
			case strings.HasPrefix(line, "event: "):
				e.Name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				e.Data = line[len("data: "):]
			default:
				t.Fatalf("unexpected line %q in event %q", line, ev)
			}
		}
		if e.Comment && (e.Data != "" || e.Name != "") {
			t.Fatalf("a comment event with fields: %q", ev)
		}
		if !e.Comment && e.Data != "[DONE]" && !json.Valid([]byte(e.Data)) {
			t.Fatalf("event data is not JSON: %q", e.Data)
		}
		evs = append(evs, e)
	}
}

// Run feeds an upstream capture to a Stream, event by event as the
// gateway does, and returns what the client gets.
func Run(t testing.TB, from, to api.API, o translate.StreamOptions, upstream []byte) []byte {
	t.Helper()
	s := translate.NewStream(from, to, o)
	r := sse.NewReader(bytes.NewReader(upstream))
	defer r.Release()
	var out []byte
	for {
		ev, err := r.Next()
		if errors.Is(err, io.EOF) {
			return s.End(out)
		}
		if err != nil {
			t.Fatalf("upstream capture: %v", err)
		}
		out = s.Event(out, ev)
	}
}

// Capture is an upstream stream of API from telling scenario, in the
// calling package's testdata/streams/<api>_<scenario>.sse (that folder's
// README.md says where each came from).
func Capture(t testing.TB, from api.API, scenario string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", from.String()+"_"+scenario+".sse"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Answer is what a client's stream says, reassembled as its SDK would.
type Answer struct {
	Text, Thinking, Signature string
	Tools                     []Call
	Stop                      translate.Stop
	Usage                     api.Usage
	Err                       string
}

// Call is one tool call a client's stream said.
type Call struct{ ID, Name, Args string }

// Scenarios are what each capture tells, by name: every API's capture of
// a scenario tells the same answer.
var Scenarios = map[string]Answer{
	"text": {Text: "Hello, world!\nLine \"two\".", Stop: translate.StopEnd,
		Usage: api.Usage{Input: 1200, CacheRead: 1000, Output: 12}},
	"tools": {Text: "Let me check.", Stop: translate.StopTool, Usage: api.Usage{Input: 300, Output: 40},
		Tools: []Call{{"call_abc1", "get_weather", `{"city":"Paris"}`}, {"functions.get_time:1", "get_time", `{"tz":"CET"}`}}},
	"thinking": {Thinking: "I should greet.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h", Text: "Hi!", Stop: translate.StopEnd,
		Usage: api.Usage{Input: 20, Output: 9}},
	"length": {Text: "The answer is", Stop: translate.StopLength, Usage: api.Usage{Input: 10, Output: 3}},
	"error":  {Text: "Partial", Err: "Overloaded"},
}

// Expect is the scenario's answer as a client of to reading an upstream
// of from can get it.
func Expect(scenario string, from, to api.API) Answer {
	want := Scenarios[scenario]
	want.Tools = append([]Call(nil), want.Tools...)
	if from == api.Chat || to == api.Chat {
		want.Signature = "" // Chat has no field for it
	}
	for i := range want.Tools {
		if to == api.Messages {
			want.Tools[i].ID = translate.SanitizeID(want.Tools[i].ID)
		}
	}
	return want
}

// Reassemble reads a client of to's stream as its SDK's accumulator does
// (the comments dropped).
func Reassemble(t *testing.T, to api.API, evs []Event) Answer {
	t.Helper()
	var data []Event
	for _, e := range evs {
		if !e.Comment {
			data = append(data, e)
		}
	}
	switch to {
	case api.Chat:
		return reassembleChat(t, data)
	case api.Messages:
		return reassembleMessages(t, data)
	}
	return reassembleResponses(t, data)
}

// Decode reads an event's data as a JSON object.
func Decode(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return m
}

// Num is v as a JSON number's int, 0 when it is none.
func Num(v any) int {
	f, _ := v.(float64)
	return int(f)
}

// Str is v as a JSON string, "" when it is none.
func Str(v any) string {
	s, _ := v.(string)
	return s
}

// Obj is v as a JSON object, nil when it is none.
func Obj(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// Feed runs upstream events (each a complete SSE event) through a
// Stream and returns what the client got, End included.
func Feed(s *translate.Stream, evs ...string) string {
	var out []byte
	for _, ev := range evs {
		out = s.Event(out, []byte(ev))
	}
	return string(s.End(out))
}

// Clients are the three APIs a client speaks a conversation in.
var Clients = [...]api.API{api.Chat, api.Messages, api.Responses}
