package translate_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// rqSeeds are the realistic request bodies of testdata/requests, named
// <api>_<client>.json.
func rqSeeds(t testing.TB) map[string]struct {
	api  api.API
	body []byte
} {
	files, err := filepath.Glob("testdata/requests/*.json")
	if err != nil || len(files) == 0 {
		t.Fatalf("no seed bodies: %v", err)
	}
	seeds := map[string]struct {
		api  api.API
		body []byte
	}{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		name := filepath.Base(f)
		for _, a := range translatetest.Clients {
			if strings.HasPrefix(name, a.String()+"_") {
				seeds[name] = struct {
					api  api.API
					body []byte
				}{a, b}
			}
		}
	}
	return seeds
}

// rqEssence is what a round trip through any API keeps of a transcript:
// the system text, the user's and assistant's words (white space aside:
// Messages refuses blocks of nothing else) and the tool calls with their
// ids, names and arguments. ids are compared as Messages writes them when
// the trip passes through Messages.
type rqEssence struct {
	system string
	text   string
	calls  []string
}

func rqEssenceOf(t testing.TB, from api.API, body []byte, sanitize bool) rqEssence {
	r, err := translate.ReadRequest(from, body)
	if err != nil {
		t.Fatalf("reading %v: %v\n%s", from, err, body)
	}
	var e rqEssence
	var system, text []string
	for _, m := range r.Messages {
		if m.Role == translate.RoleSystem {
			if s := translate.Texts(m.Parts, "\n\n"); strings.TrimSpace(s) != "" {
				system = append(system, s)
			}
			continue
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case translate.PartText:
				text = append(text, p.Text)
			case translate.PartCall:
				id := p.ID
				if sanitize && id != "" {
					id = translate.SanitizeID(id)
				}
				args, _ := translate.ArgsObject(p.Args)
				e.calls = append(e.calls, id+" "+p.Name+" "+string(args))
			}
		}
	}
	e.system = strings.Join(strings.Fields(strings.Join(system, "\n\n")), "")
	e.text = strings.Join(strings.Fields(strings.Join(text, "")), "")
	return e
}

// rqSameCalls compares calls, an id that was empty in the original (the
// translation made one of its position) with any.
func rqSameCalls(want, got []string) bool {
	if len(want) != len(got) {
		return false
	}
	for i := range want {
		if want[i] != got[i] && !(strings.HasPrefix(want[i], " ") && strings.HasSuffix(got[i], want[i])) {
			return false
		}
	}
	return true
}

// rqRoundTrip translates body from a to b and back and compares what both
// APIs carry.
func rqRoundTrip(t testing.TB, a, b api.API, body []byte) {
	there, _, err := translate.RequestBody(a, b, body, translate.RequestOptions{})
	if err != nil {
		return // refused: nothing to compare
	}
	if !json.Valid(there) {
		t.Fatalf("%v->%v: output is not JSON: %s", a, b, there)
	}
	back, _, err := translate.RequestBody(b, a, there, translate.RequestOptions{})
	if err != nil {
		t.Fatalf("%v->%v->%v: the way back failed: %v\n%s", a, b, a, err, there)
	}
	sanitize := a == api.Messages || b == api.Messages
	want, got := rqEssenceOf(t, a, body, sanitize), rqEssenceOf(t, a, back, sanitize)
	if want.system != got.system || want.text != got.text || !rqSameCalls(want.calls, got.calls) {
		t.Fatalf("%v->%v->%v changed the transcript:\nwant %+v\ngot  %+v\nvia  %s\nback %s", a, b, a, want, got, there, back)
	}
}

func TestRequestRoundTrips(t *testing.T) {
	for name, s := range rqSeeds(t) {
		for _, b := range translatetest.Clients {
			if b == s.api {
				continue
			}
			t.Run(name+"->"+b.String(), func(t *testing.T) { rqRoundTrip(t, s.api, b, s.body) })
		}
	}
}

// TestRequestSeedsDropped pins what the coding agents' bodies lose, so a
// change to the rules shows here.
func TestRequestSeedsDropped(t *testing.T) {
	seeds := rqSeeds(t)
	cases := []struct {
		seed string
		to   api.API
		want []string
	}{
		{"messages_claude_code.json", api.Chat, []string{"messages[1].content[0] (thinking)", "tools[2] (web_search_20250305)", "context_management"}},
		{"responses_codex.json", api.Chat, []string{"input[3] (reasoning)", "tools[2] (web_search)"}},
		{"responses_codex.json", api.Messages, []string{"input[3] (reasoning)", "tools[2] (web_search)", "text.verbosity", "reasoning.effort"}},
		{"chat_openai_sdk.json", api.Messages, nil},
		{"chat_openai_sdk.json", api.Responses, []string{"stop"}},
	}
	for _, c := range cases {
		s := seeds[c.seed]
		_, dropped, err := translate.RequestBody(s.api, c.to, s.body, translate.RequestOptions{})
		if err != nil {
			t.Fatalf("%s -> %v: %v", c.seed, c.to, err)
		}
		slices.Sort(dropped)
		slices.Sort(c.want)
		if !slices.Equal(dropped, c.want) {
			t.Errorf("%s -> %v dropped %q, want %q", c.seed, c.to, dropped, c.want)
		}
	}
}

// FuzzRequest: no input panics; what translates is JSON; and a round trip
// keeps the transcript's words and tool calls.
func FuzzRequest(f *testing.F) {
	for _, s := range rqSeeds(f) {
		for _, b := range translatetest.Clients {
			f.Add(s.body, uint8(s.api), uint8(b))
		}
	}
	f.Add([]byte(`{"messages":[{"role":"tool","content":"x"},{"role":"assistant","tool_calls":[{"function":{"name":"a","arguments":"[1]"}}]}]}`), uint8(api.Chat), uint8(api.Messages))
	f.Add([]byte(`{"input":[{"type":"function_call_output","output":[{"type":"input_image","image_url":"data:x"}]}]}`), uint8(api.Responses), uint8(api.Messages))
	f.Fuzz(func(t *testing.T, body []byte, from, to uint8) {
		a, b := api.API(from%3+1), api.API(to%3+1)
		if a == b {
			return // the body itself, whatever it is
		}
		out, _, err := translate.RequestBody(a, b, body, translate.RequestOptions{})
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("%v->%v: output is not JSON: %s", a, b, out)
		}
		rqRoundTrip(t, a, b, body)
	})
}
