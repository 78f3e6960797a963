package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// stTestEvent is one event of a translated stream: its name (event: line,
// "" for none) and its data.
type stTestEvent struct {
	name, data string
	comment    bool
}

// stSplit splits a client's stream into events, failing on anything that
// is not a complete event whose data is JSON or [DONE].
func stSplit(t testing.TB, out []byte) []stTestEvent {
	t.Helper()
	var evs []stTestEvent
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
		var e stTestEvent
		for _, line := range strings.Split(strings.TrimRight(string(ev), "\n"), "\n") {
			switch {
			case strings.HasPrefix(line, ":"):
				e.comment = true
			case strings.HasPrefix(line, "event: "):
				e.name = line[len("event: "):]
			case strings.HasPrefix(line, "data: "):
				e.data = line[len("data: "):]
			default:
				t.Fatalf("unexpected line %q in event %q", line, ev)
			}
		}
		if e.comment && (e.data != "" || e.name != "") {
			t.Fatalf("a comment event with fields: %q", ev)
		}
		if !e.comment && e.data != "[DONE]" && !json.Valid([]byte(e.data)) {
			t.Fatalf("event data is not JSON: %q", e.data)
		}
		evs = append(evs, e)
	}
}

// stRun feeds an upstream capture to a Stream, event by event as the
// gateway does, and returns what the client gets.
func stRun(t testing.TB, from, to api.API, o StreamOptions, upstream []byte) []byte {
	t.Helper()
	s := NewStream(from, to, o)
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

func stCapture(t testing.TB, from api.API, scenario string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", "streams", from.String()+"_"+scenario+".sse"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// stAnswer is what a client's stream says, reassembled as its SDK would.
type stAnswer struct {
	Text, Thinking, Signature string
	Tools                     []stCall
	Stop                      Stop
	Usage                     api.Usage
	Err                       string
}

type stCall struct{ ID, Name, Args string }

var stScenarios = map[string]stAnswer{
	"text": {Text: "Hello, world!\nLine \"two\".", Stop: StopEnd,
		Usage: api.Usage{Input: 1200, CacheRead: 1000, Output: 12}},
	"tools": {Text: "Let me check.", Stop: StopTool, Usage: api.Usage{Input: 300, Output: 40},
		Tools: []stCall{{"call_abc1", "get_weather", `{"city":"Paris"}`}, {"functions.get_time:1", "get_time", `{"tz":"CET"}`}}},
	"thinking": {Thinking: "I should greet.", Signature: "EqQBCgIYAhIM1gbcDa9GJwZA2b3h", Text: "Hi!", Stop: StopEnd,
		Usage: api.Usage{Input: 20, Output: 9}},
	"length": {Text: "The answer is", Stop: StopLength, Usage: api.Usage{Input: 10, Output: 3}},
	"error":  {Text: "Partial", Err: "Overloaded"},
}

// stExpect is the scenario's answer as a client of to reading an upstream
// of from can get it.
func stExpect(scenario string, from, to api.API) stAnswer {
	want := stScenarios[scenario]
	want.Tools = append([]stCall(nil), want.Tools...)
	if from == api.Chat || to == api.Chat {
		want.Signature = "" // Chat has no field for it
	}
	for i := range want.Tools {
		if to == api.Messages {
			want.Tools[i].ID = string(appendSanitized(nil, []byte(want.Tools[i].ID)))
		}
	}
	return want
}

func TestStreamDirections(t *testing.T) {
	for _, from := range conversations {
		for _, to := range conversations {
			if from == to {
				continue
			}
			for scenario := range stScenarios {
				t.Run(fmt.Sprintf("%v-%v/%s", from, to, scenario), func(t *testing.T) {
					out := stRun(t, from, to, StreamOptions{IncludeUsage: true}, stCapture(t, from, scenario))
					evs := stSplit(t, out)
					got := stReassemble(t, to, evs)
					if want := stExpect(scenario, from, to); !reflect.DeepEqual(got, want) {
						t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
					}
				})
			}
		}
	}
}

func stReassemble(t *testing.T, to api.API, evs []stTestEvent) stAnswer {
	t.Helper()
	var data []stTestEvent
	for _, e := range evs {
		if !e.comment {
			data = append(data, e)
		}
	}
	switch to {
	case api.Chat:
		return stReassembleChat(t, data)
	case api.Messages:
		return stReassembleMessages(t, data)
	}
	return stReassembleResponses(t, data)
}

func stDecode(t *testing.T, data string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(data), &m); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	return m
}

func stNum(v any) int {
	f, _ := v.(float64)
	return int(f)
}

func stS(v any) string {
	s, _ := v.(string)
	return s
}

func stM(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}
