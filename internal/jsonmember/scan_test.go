package jsonmember

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

// chatBody is a realistic chat completion request of at least size bytes, in
// the member order the OpenAI Python SDK sends: the transcript first, the
// model after it. Messages, tool calls and tool schemas carry "model" keys and
// "model" strings of their own, none of which is the top-level one.
func chatBody(size int) []byte {
	const head = `{"messages":[{"role":"system","content":"You are a careful assistant. Answer in the user's language; put code in \"fences\".\nNever invent a \"model\" name."}`
	const tail = `],"model":"llama-3.1-8b-instruct",` +
		`"tools":[{"type":"function","function":{"name":"lookup_model","description":"Facts about a model: context window, price.",` +
		`"parameters":{"type":"object","properties":{"model":{"type":"string","description":"the model's id"},"task":{"type":"string"}},"required":["model"]}}}],` +
		`"tool_choice":"auto","temperature":0.7,"top_p":1,"max_tokens":1024,"stream":true,"stream_options":{"include_usage":true},` +
		`"user":"user-8842","prompt_cache_key":"session-5b1e"}`
	turns := []string{
		`{"role":"user","content":"Which model should I use to summarise a 40-page PDF? Keep it short.\nThanks! 🙏"}`,
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_7f3a","type":"function","function":{"name":"lookup_model","arguments":"{\"model\":\"gpt-4o\",\"task\":\"summarise\"}"}}]}`,
		`{"role":"tool","tool_call_id":"call_7f3a","content":"{\"model\":\"gpt-4o\",\"context_window\":128000,\"price\":2.5e-6}"}`,
		`{"role":"assistant","content":"A 128k-token context is plenty: \u201cgpt-4o\u201d or a local llama-3.1-8b will do.\n\nSplit by chapter if you want citations — caf\u00e9-style footnotes work well.","model":"gpt-4o"}`,
	}
	b := []byte(head)
	for i := 0; len(b)+len(tail) < size; i++ {
		b = append(b, ',')
		b = append(b, turns[i%len(turns)]...)
	}
	return append(b, tail...)
}

// raw returns the bytes of a member's value, "" when it is absent.
func raw(b []byte, m Member) string {
	if !m.OK() {
		return ""
	}
	return string(b[m.Value.Start:m.Value.End])
}

// jsonMember is one top-level member as encoding/json reads it: the decoded
// name and the value's exact bytes.
type jsonMember struct{ name, value string }

// topLevelMembers lists b's top-level members in order, repeated names
// included, using encoding/json as the oracle.
func topLevelMembers(t testing.TB, b []byte) []jsonMember {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object (%v, %v): %q", tok, err, b)
	}
	var ms []jsonMember
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reading a member name: %v: %q", err, b)
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("reading member %q: %v: %q", tok, err, b)
		}
		ms = append(ms, jsonMember{tok.(string), string(v)})
	}
	return ms
}

// lastNamed is the index of the last member called name, -1 if none: the one
// encoding/json (and so the scanner) takes.
func lastNamed(ms []jsonMember, name string) int {
	for i := len(ms) - 1; i >= 0; i-- {
		if ms[i].name == name {
			return i
		}
	}
	return -1
}

// asDecoded is s as encoding/json decodes it: each byte of invalid UTF-8
// becomes U+FFFD, which is what converting through []rune does.
func asDecoded(s string) string { return string([]rune(s)) }

func TestScanBodyFindsTopLevelMembersOnly(t *testing.T) {
	type want struct{ model, stream, fallbacks, user, cacheKey string }
	for _, tc := range []struct {
		name string
		body string
		want want
	}{
		{"empty object", `{}`, want{}},
		{"all five", `{"model":"m","stream":true,"fallbacks":["a","b"],"user":"u","prompt_cache_key":"k"}`,
			want{`"m"`, `true`, `["a","b"]`, `"u"`, `"k"`}},
		{"model nested in messages before the top-level one",
			`{"messages":[{"role":"user","content":"hi","model":"nested"}],"model":"top"}`, want{model: `"top"`}},
		{"model nested in tools after the top-level one",
			`{"model":"top","tools":[{"type":"function","function":{"parameters":{"properties":{"model":{"type":"string"}}}}}]}`,
			want{model: `"top"`}},
		{"model only nested",
			`{"messages":[{"model":"a","stream":true}],"metadata":{"model":"b","user":"c","fallbacks":[]}}`, want{}},
		{"model as a string value is no member name", `{"messages":["model",{"k":"model"}],"name":"model"}`, want{}},
		{"model inside a string that looks like JSON", `{"content":"{\"model\":\"x\"}","model":"top"}`, want{model: `"top"`}},
		{"names are case-sensitive", `{"Model":"a","MODEL":"b","stream ":true}`, want{}},
		{"escaped member name", `{"mod\u0065l":"esc"}`, want{model: `"esc"`}},
		{"fully escaped member name", `{"\u006D\u006f\u0064\u0065\u006c":"esc","stre\u0061m":true}`,
			want{model: `"esc"`, stream: `true`}},
		{"long escaped name", `{"prompt\u005fcache\u005fkey":"k","\u0075ser":"u","fall\/backs":[1]}`,
			want{cacheKey: `"k"`, user: `"u"`}},
		{"escaped name with a NUL is another name", `{"model\u0000":"x"}`, want{}},
		{"repeated member: the last wins", `{"model":"first","stream":true,"model":"last","stream":false}`,
			want{model: `"last"`, stream: `false`}},
		{"repeated member spelled differently", `{"model":"first","messages":[],"mod\u0065l":"last"}`, want{model: `"last"`}},
		{"whitespace everywhere",
			" \t\r\n{ \n\"model\" \t:\r\n \"m\" \n, \"stream\"\t:\ttrue\r,\"fallbacks\" : [ \"a\" , { } ] \n} \n",
			want{model: `"m"`, stream: `true`, fallbacks: `[ "a" , { } ]`}},
		{"values of every kind", `{"model":{"a":[1,-2.5e+3,null,false]},"stream":"true","user":0,"fallbacks":null}`,
			want{model: `{"a":[1,-2.5e+3,null,false]}`, stream: `"true"`, user: `0`, fallbacks: `null`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			f, err := ScanRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			got := want{raw(b, f.Model), raw(b, f.Stream), raw(b, f.Fallbacks), raw(b, f.User), raw(b, f.PromptCacheKey)}
			if got != tc.want {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestStreamIsTrueOnlyForTheLiteralTrue(t *testing.T) {
	for body, want := range map[string]bool{
		`{"model":"m","stream":true}`:                true,
		`{"stream" : true , "model":"m"}`:            true,
		`{"stream":false,"stream":true}`:             true,
		`{"stream":true,"stream":false}`:             false,
		`{"model":"m","stream":false}`:               false,
		`{"model":"m"}`:                              false,
		`{"model":"m","stream":"true"}`:              false,
		`{"model":"m","stream":1}`:                   false,
		`{"model":"m","stream":null}`:                false,
		`{"model":"m","stream":[true]}`:              false,
		`{"model":"m","options":{"stream":true}}`:    false,
		`{"model":"m","messages":[{"stream":true}]}`: false,
	} {
		b := []byte(body)
		f, err := ScanRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if got := IsTrue(b, f.Stream); got != want {
			t.Errorf("%s: stream %v, want %v", body, got, want)
		}
	}
}

func TestStringValueDecodesAsEncodingJSON(t *testing.T) {
	for _, tc := range []struct {
		value string // the model member's value
		want  string
		ok    bool
	}{
		{`"gpt-4o"`, "gpt-4o", true},
		{`""`, "", true},
		{`"gpt\u002d4o"`, "gpt-4o", true},
		{`"a\/b\\c\"d"`, `a/b\c"d`, true},
		{`"\b\f\n\r\t"`, "\b\f\n\r\t", true},
		{`"caf\u00e9 caf\u00C9"`, "café cafÉ", true},
		{`"\ud83d\ude00"`, "😀", true},
		{`"\ud800"`, "\ufffd", true},              // a lone high surrogate
		{`"\udc00x"`, "\ufffdx", true},            // a lone low surrogate
		{`"\ud800\u0041"`, "\ufffdA", true},       // high then no low: both kept apart
		{`"\ud83d\ud83d\ude00"`, "\ufffd😀", true}, // high, then a good pair
		{`"\ud83d\\ude00"`, "\ufffd\\ude00", true},
		{`"raw ünïcødé 🙏"`, "raw ünïcødé 🙏", true},
		{`null`, "", false},
		{`42`, "", false},
		{`["gpt-4o"]`, "", false},
		{`{"name":"gpt-4o"}`, "", false},
	} {
		b := []byte(`{"model":` + tc.value + `}`)
		f, err := ScanRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got, ok := StringValue(b, f.Model)
		if ok != tc.ok || string(got) != tc.want {
			t.Errorf("%s: got %q, %v; want %q, %v", tc.value, got, ok, tc.want, tc.ok)
		}
		var oracle string
		if tc.ok && (json.Unmarshal([]byte(tc.value), &oracle) != nil || oracle != tc.want) {
			t.Errorf("%s: encoding/json decodes %q, the test wants %q", tc.value, oracle, tc.want)
		}
	}
	if _, ok := StringValue([]byte(`{}`), Member{}); ok {
		t.Error("an absent member has a string value")
	}
}

func TestStringValueWithoutEscapesIsASubsliceOfTheBody(t *testing.T) {
	b := []byte(`{"model":"llama-3.1-8b"}`)
	f, err := ScanRequest(b)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := StringValue(b, f.Model)
	if &got[0] != &b[10] {
		t.Error("stringValue copied a string that has no escapes")
	}
}

func TestScanBodyRejectsMalformedInput(t *testing.T) {
	nested := func(levels int, opener, closer string) string {
		// levels counts the top-level object, as encoding/json's limit does
		return `{"a":` + strings.Repeat(opener, levels-1) + "0" + strings.Repeat(closer, levels-1) + `}`
	}
	for _, tc := range []struct {
		name string
		body string
		off  int
		msg  string
	}{
		{"empty", ``, 0, "must be a JSON object"},
		{"only whitespace", " \n\t", 3, "must be a JSON object"},
		{"array at the top", `[{"model":"m"}]`, 0, "must be a JSON object"},
		{"string at the top", ` "model"`, 1, "must be a JSON object"},
		{"null at the top", `null`, 0, "must be a JSON object"},
		{"byte order mark", "\xef\xbb\xbf{}", 0, "must be a JSON object"},

		{"truncated after the brace", `{`, 1, "expected a member name"},
		{"truncated after a name", `{"model"`, 8, "expected ':'"},
		{"truncated after the colon", `{"model":`, 9, "expected a value"},
		{"truncated in a string value", `{"model":"gpt`, 9, "unterminated string"},
		{"truncated in a name", `{"mod`, 1, "unterminated string"},
		{"truncated after a value", `{"model":"m"`, 12, "unexpected end of input in an object"},
		{"truncated after a comma", `{"model":"m",`, 13, "expected a member name"},
		{"truncated in a nested array", `{"messages":[{"role":"user"}`, 28, "unexpected end of input"},
		{"truncated in a nested object", `{"messages":[{"role"`, 20, "expected ':'"},
		{"truncated in an escape", `{"model":"m\`, 11, "unterminated string"},
		{"truncated in a \\u escape", `{"model":"\u00`, 10, `bad \u escape`},
		{"truncated in a literal", `{"stream":tru`, 10, "bad literal"},

		{"trailing garbage", `{"model":"m"}x`, 13, "unexpected data after the top-level object"},
		{"a second object", `{"model":"m"} {}`, 14, "unexpected data after the top-level object"},
		{"an extra brace", `{"model":"m"}}`, 13, "unexpected data after the top-level object"},
		{"trailing comma", `{"model":"m",}`, 13, "expected a member name"},
		{"trailing comma in an array", `{"fallbacks":["a",]}`, 18, "expected a value"},
		{"missing comma", `{"model":"m" "stream":true}`, 13, "expected ',' or '}'"},
		{"missing comma in an array", `{"fallbacks":["a" "b"]}`, 18, "expected ',' or a closing bracket"},
		{"missing colon", `{"model" "m"}`, 9, "expected ':'"},
		{"unquoted name", `{model:"m"}`, 1, "expected a member name"},
		{"single-quoted string", `{"model":'m'}`, 9, "expected a value"},
		{"mismatched bracket", `{"fallbacks":["a"}`, 17, "expected ',' or a closing bracket"},
		{"nested name not a string", `{"metadata":{1:2}}`, 13, "expected a member name"},

		{"bad escape", `{"model":"a\x"}`, 11, "bad escape"},
		{"bad escape in a name", `{"mod\el":"m"}`, 5, "bad escape"},
		{"escaped single quote", `{"model":"it\'s"}`, 12, "bad escape"},
		{"short \\u escape", `{"model":"\u12"}`, 10, `bad \u escape`},
		{"non-hex \\u escape", `{"model":"\u12g4"}`, 10, `bad \u escape`},
		{"uppercase \\U escape", `{"model":"\U0041"}`, 10, "bad escape"},

		{"leading zero", `{"n":01}`, 6, "expected ',' or '}'"},
		{"lone minus", `{"n":-}`, 5, "bad number"},
		{"plus sign", `{"n":+1}`, 5, "expected a value"},
		{"leading dot", `{"n":.5}`, 5, "expected a value"},
		{"trailing dot", `{"n":1.}`, 5, "bad number"},
		{"empty exponent", `{"n":1e}`, 5, "bad number"},
		{"signed empty exponent", `{"n":1E+}`, 5, "bad number"},
		{"hex number", `{"n":0x1F}`, 6, "expected ',' or '}'"},
		{"NaN", `{"n":NaN}`, 5, "expected a value"},
		{"Infinity", `{"n":-Infinity}`, 5, "bad number"},
		{"capitalised literal", `{"stream":True}`, 10, "expected a value"},
		{"misspelt literal", `{"stream":ture}`, 10, "bad literal"},
		{"literal run on", `{"stream":truex}`, 14, "expected ',' or '}'"},

		{"tab in a string", "{\"model\":\"a\tb\"}", 11, "control character in a string"},
		{"newline in a string", "{\"content\":\"line\nline\"}", 16, "control character in a string"},
		{"NUL in a name", "{\"mo\x00del\":\"m\"}", 4, "control character in a string"},
		{"control character deep inside", "{\"messages\":[{\"content\":\"\x1f\"}]}", 25, "control character in a string"},

		{"arrays nested too deeply", nested(maxNesting+1, "[", "]"), 5 + maxNesting - 1, "nested too deeply"},
		{"objects nested too deeply", nested(maxNesting+1, `{"a":`, "}"), 5 + 5*(maxNesting-1), "nested too deeply"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			_, err := ScanRequest(b)
			if !errors.Is(err, errBadJSON) {
				t.Fatalf("got %v, want an error wrapping errBadJSON", err)
			}
			if at := fmt.Sprintf("at byte %d:", tc.off); !strings.Contains(err.Error(), at) || !strings.Contains(err.Error(), tc.msg) {
				t.Errorf("got %q, want it to say %q and %q", err, at, tc.msg)
			}
			if startsWithObject(b) && json.Valid(b) {
				t.Errorf("encoding/json takes %q for valid: the case is wrong", tc.body)
			}
		})
	}
}

// startsWithObject reports whether the first non-space byte of b is '{'.
func startsWithObject(b []byte) bool {
	b = bytes.TrimLeft(b, " \t\r\n")
	return len(b) > 0 && b[0] == '{'
}

func TestNestingLimitIsEncodingJSONs(t *testing.T) {
	for _, levels := range []int{maxNesting - 1, maxNesting, maxNesting + 1} {
		for opener, closer := range map[string]string{"[": "]", `{"a":`: "}"} {
			b := []byte(`{"model":"m","deep":` + strings.Repeat(opener, levels-1) + "0" + strings.Repeat(closer, levels-1) + `}`)
			_, err := ScanRequest(b)
			if valid := json.Valid(b); (err == nil) != valid {
				t.Errorf("%d levels of %s: scanBody says %v, encoding/json valid=%v", levels, opener, err, valid)
			}
		}
	}
}

func TestReplaceModelKeepsEveryOtherByte(t *testing.T) {
	bodies := map[string][]byte{
		"chat":              chatBody(4096),
		"model first":       []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi","model":"x"}]}`),
		"model only":        []byte(`{"model":"gpt-4o"}`),
		"spaced":            []byte(" {\n  \"model\" :\t\"gpt-4o\" ,\n  \"stream\": true\n}\n"),
		"escaped":           []byte(`{"mod\u0065l":"gpt\u002d4o","n":1}`),
		"repeated":          []byte(`{"model":"first","n":1,"model":"second","m":2}`),
		"not a string":      []byte(`{"n":1,"model":{"id":"gpt-4o"},"m":2}`),
		"nested model last": []byte(`{"model":"gpt-4o","tools":[{"model":"tool"}]}`),
	}
	models := []string{"llama-3.1-8b-instruct", "", `quo"te\back/slash`, "tab\tnew\nline\x00\x1f\x7f", "ünï 🙏 \u2028", "bad \xff utf-8"}
	for name, b := range bodies {
		for _, model := range models {
			f, err := ScanRequest(b)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			e := ReplaceValue(f.Model, model)
			out := ApplyEdits(b, e)

			start, end := f.Model.Value.Start, f.Model.Value.End
			tailLen := len(b) - end
			if !bytes.Equal(out[:start], b[:start]) || !bytes.Equal(out[len(out)-tailLen:], b[end:]) {
				t.Fatalf("%s, model %q: bytes outside the model's value changed:\n%s\n%s", name, model, b, out)
			}
			var got string
			if err := json.Unmarshal(out[start:len(out)-tailLen], &got); err != nil || got != asDecoded(model) {
				t.Errorf("%s: the new value decodes to %q (%v), want %q", name, got, err, asDecoded(model))
			}
			if _, err := ScanRequest(out); err != nil || !json.Valid(out) {
				t.Errorf("%s, model %q: the result is no longer valid: %v\n%s", name, model, err, out)
			}
		}
	}
}

func TestRemoveFallbacksInEveryPosition(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		want       string // exact result, when it is worth spelling out
	}{
		{"first", `{"fallbacks":["b","c"],"model":"a","stream":true}`, `{"model":"a","stream":true}`},
		{"middle", `{"model":"a","fallbacks":["b","c"],"stream":true}`, `{"model":"a","stream":true}`},
		{"last", `{"model":"a","stream":true,"fallbacks":["b","c"]}`, `{"model":"a","stream":true}`},
		{"only", `{"fallbacks":["b","c"]}`, `{}`},
		{"first, spaced", "{ \"fallbacks\" : [ \"b\" ] ,\n \"model\" : \"a\" }", ""},
		{"middle, spaced", "{ \"model\" : \"a\" ,\n\t\"fallbacks\" : [ ] ,\n\"stream\" : true }", ""},
		{"last, spaced", "{\n\"model\":\"a\" ,\r\n \"fallbacks\" : null \n}", ""},
		{"only, spaced", " {\n  \"fallbacks\" : {\"a\":[1,2]}\n} ", ""},
		{"escaped name", `{"model":"a","f\u0061llbacks":["b"]}`, `{"model":"a"}`},
		{"nested fallbacks stay", `{"fallbacks":["b"],"metadata":{"fallbacks":["c"]}}`, `{"metadata":{"fallbacks":["c"]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := []byte(tc.body)
			f, err := ScanRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			out := ApplyEdits(b, RemoveMember(f.Fallbacks))
			if !json.Valid(out) {
				t.Fatalf("not valid JSON: %q", out)
			}
			if tc.want != "" && string(out) != tc.want {
				t.Errorf("got %s, want %s", out, tc.want)
			}
			want := topLevelMembers(t, b)
			want = slices.Delete(want, lastNamed(want, "fallbacks"), lastNamed(want, "fallbacks")+1)
			if got := topLevelMembers(t, out); !slices.Equal(got, want) {
				t.Errorf("members %q, want %q", got, want)
			}
		})
	}
}

func TestReplaceModelAndRemoveFallbacksTogether(t *testing.T) {
	chat := chatBody(2048)
	for _, body := range []string{
		`{"model":"a","fallbacks":["b"]}`,
		`{"fallbacks":["b"],"model":"a"}`,
		`{"fallbacks":["b"],"model":"a","stream":true}`,
		`{"stream":true,"model":"a","fallbacks":["b"]}`,
		`{"model":"a","stream":true,"fallbacks":["b"],"user":"u"}`,
		" { \"fallbacks\" : [ ] , \"model\" : \"a\" } ",
		string(chat[:len(chat)-1]) + `,"fallbacks":["gpt-4o","claude"]}`,
	} {
		b := []byte(body)
		f, err := ScanRequest(b)
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		want := topLevelMembers(t, b)
		want[lastNamed(want, "model")].value = `"engine-model"`
		want = slices.Delete(want, lastNamed(want, "fallbacks"), lastNamed(want, "fallbacks")+1)

		// edits may come in either order
		for _, edits := range [][]Edit{
			{ReplaceValue(f.Model, "engine-model"), RemoveMember(f.Fallbacks)},
			{RemoveMember(f.Fallbacks), ReplaceValue(f.Model, "engine-model")},
		} {
			out := ApplyEdits(b, edits...)
			if !json.Valid(out) {
				t.Fatalf("not valid JSON: %q", out)
			}
			if got := topLevelMembers(t, out); !slices.Equal(got, want) {
				t.Errorf("%s: members %q, want %q", body, got, want)
			}
		}
	}
}

func TestApplyEditsWithoutEditsReturnsTheBody(t *testing.T) {
	b := []byte(`{"model":"m"}`)
	if out := ApplyEdits(b); &out[0] != &b[0] || len(out) != len(b) {
		t.Error("applyEdits without edits copied the body")
	}
}

func TestAppendJSONStringRoundTrips(t *testing.T) {
	for _, s := range []string{
		"", "gpt-4o", `"`, `\`, `\"`, "/", "</script>&", "\x00\x01\x1f \x7f",
		"\b\f\n\r\t", "ünïcødé", "🙏", "\u2028\u2029", "\ufffd", "\xff", "a\xc3", "\xed\xa0\x80", // a UTF-8-encoded surrogate
	} {
		b := AppendString([]byte("prefix:"), s)
		if !bytes.HasPrefix(b, []byte("prefix:")) {
			t.Fatalf("%q: the prefix was lost: %q", s, b)
		}
		var got string
		if err := json.Unmarshal(b[len("prefix:"):], &got); err != nil || got != asDecoded(s) {
			t.Errorf("%q: encoded as %s, which decodes to %q (%v)", s, b, got, err)
		}
	}
}

func TestScanBodyAndStringValueDoNotAllocate(t *testing.T) {
	for _, size := range []int{256, 4 << 10, 64 << 10} {
		b := chatBody(size)
		allocs := testing.AllocsPerRun(50, func() {
			f, err := ScanRequest(b)
			if err != nil {
				t.Fatal(err)
			}
			if m, ok := StringValue(b, f.Model); !ok || len(m) == 0 || !IsTrue(b, f.Stream) {
				t.Fatal("the chat body lost its model or stream")
			}
		})
		if allocs != 0 {
			t.Errorf("%d-byte body: %v allocs per scan, want 0", len(b), allocs)
		}
	}
}

func FuzzScanBody(f *testing.F) {
	// small bodies: the fuzzer minimises every new input it finds, which
	// takes long on a transcript of several kilobytes
	f.Add(chatBody(0), "llama-3.1-8b-instruct")
	for _, body := range []string{
		`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}],"stream":true}`,
		`{"messages":[{"role":"user","content":"hi","model":"nested"}],"model":"top","fallbacks":["a","b"]}`,
		`{"fallbacks":["a"],"model":"m","fallbacks":[],"user":"u","prompt_cache_key":"k"}`,
		`{"mod\u0065l":"esc\u00e9\ud83d\ude00","f\u0061llbacks":null}`,
		" {\n \"model\" : \"m\" ,\n \"fallbacks\" : [ ] \n} ",
		"{\"model\":\"bad \xff utf-8\",\"\xfe\":1}",
		`{"model":42,"n":-0.5e-10,"t":[true,false,null,{}]}`,
		`{"model":"m"}x`, `{"model":"m\x"}`, `[{"model":"m"}]`, `{"n":01}`,
	} {
		f.Add([]byte(body), `quo"te`)
	}
	f.Fuzz(func(t *testing.T, body []byte, model string) {
		fields, err := ScanRequest(body)
		if want := startsWithObject(body) && json.Valid(body); (err == nil) != want {
			t.Fatalf("scanBody says %v, encoding/json says valid object=%v: %q", err, want, body)
		}
		if err != nil {
			if !errors.Is(err, errBadJSON) {
				t.Fatalf("error %v does not wrap errBadJSON", err)
			}
			return
		}

		var top map[string]json.RawMessage
		if err := json.Unmarshal(body, &top); err != nil {
			t.Fatal(err)
		}
		for name, m := range map[string]Member{
			"model": fields.Model, "stream": fields.Stream, "fallbacks": fields.Fallbacks,
			"user": fields.User, "prompt_cache_key": fields.PromptCacheKey,
		} {
			if got := raw(body, m); got != string(top[name]) {
				t.Fatalf("%s: scanner found %q, encoding/json %q: %q", name, got, top[name], body)
			}
		}
		got, ok := StringValue(body, fields.Model)
		var want string
		isString := len(top["model"]) > 0 && top["model"][0] == '"'
		if isString && json.Unmarshal(top["model"], &want) != nil {
			t.Fatalf("encoding/json cannot decode its own model %s", top["model"])
		}
		if ok != isString || (ok && asDecoded(string(got)) != want) {
			t.Fatalf("model %q (%v), encoding/json decodes %q (%v): %q", got, ok, want, isString, body)
		}
		if IsTrue(body, fields.Stream) != (string(top["stream"]) == "true") {
			t.Fatalf("isTrue disagrees with stream %s", top["stream"])
		}

		members := topLevelMembers(t, body)
		if fields.Model.OK() {
			out := ApplyEdits(body, ReplaceValue(fields.Model, model))
			want := slices.Clone(members)
			want[lastNamed(want, "model")].value = string(AppendString(nil, model))
			if got := topLevelMembers(t, out); !slices.Equal(got, want) {
				t.Fatalf("after setting the model to %q: members %q, want %q", model, got, want)
			}
			var after map[string]json.RawMessage
			var decoded string
			if err := json.Unmarshal(out, &after); err != nil || json.Unmarshal(after["model"], &decoded) != nil || decoded != asDecoded(model) {
				t.Fatalf("after setting the model to %q it decodes as %q (%v)", model, decoded, err)
			}
		}
		if fields.Fallbacks.OK() {
			out := ApplyEdits(body, RemoveMember(fields.Fallbacks))
			if !json.Valid(out) {
				t.Fatalf("removing fallbacks broke the body: %q", out)
			}
			i := lastNamed(members, "fallbacks")
			want := slices.Delete(slices.Clone(members), i, i+1)
			if got := topLevelMembers(t, out); !slices.Equal(got, want) {
				t.Fatalf("after removing fallbacks: members %q, want %q", got, want)
			}
		}
	})
}

var benchBodies = []struct {
	name string
	body []byte
}{
	{"4KiB", chatBody(4 << 10)},
	{"1MiB", chatBody(1 << 20)},
}

func BenchmarkScanBody(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				f, err := ScanRequest(bb.body)
				if err != nil {
					b.Fatal(err)
				}
				if _, ok := StringValue(bb.body, f.Model); !ok {
					b.Fatal("no model")
				}
			}
		})
	}
}

// BenchmarkSpliceModel is the body rewrite for an engine's model_name: the
// scan is the request's, done once; each attempt pays for the splice.
func BenchmarkSpliceModel(b *testing.B) {
	for _, bb := range benchBodies {
		b.Run(bb.name, func(b *testing.B) {
			f, err := ScanRequest(bb.body)
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(bb.body)))
			for b.Loop() {
				out := ApplyEdits(bb.body, ReplaceValue(f.Model, "Meta-Llama-3.1-8B-Instruct-Q4_K_M.gguf"))
				if len(out) < len(bb.body) {
					b.Fatal("the body shrank")
				}
			}
		})
	}
}

func TestArrayItems(t *testing.T) {
	for _, tc := range []struct {
		in   string
		max  int
		want []string
		more bool
		bad  bool
	}{
		{in: `[]`, max: 3},
		{in: ` [ "a" , {"b":[1]} ,null]`, max: 3, want: []string{`"a"`, `{"b":[1]}`, `null`}},
		{in: `["a","b","c","d"]`, max: 3, want: []string{`"a"`, `"b"`, `"c"`}, more: true},
		{in: `["a","b","c"]`, max: 3, want: []string{`"a"`, `"b"`, `"c"`}},
		{in: `{"a":1}`, max: 3, bad: true},
		{in: `["a",]`, max: 3, bad: true},
		{in: `["a"`, max: 3, bad: true},
		{in: `["a" "b"]`, max: 3, bad: true},
	} {
		items, more, err := ArrayItems([]byte(tc.in), 0, tc.max)
		if (err != nil) != tc.bad {
			t.Errorf("ArrayItems(%s): error %v, want an error: %v", tc.in, err, tc.bad)
			continue
		}
		var got []string
		for _, s := range items {
			got = append(got, tc.in[s.Start:s.End])
		}
		if !tc.bad && (!slices.Equal(got, tc.want) || more != tc.more) {
			t.Errorf("ArrayItems(%s, %d) = %q, more %v; want %q, more %v", tc.in, tc.max, got, more, tc.want, tc.more)
		}
	}
}

// FuzzArrayItems: on a valid JSON array, ArrayItems finds encoding/json's
// items; on anything else it never panics.
func FuzzArrayItems(f *testing.F) {
	for _, s := range []string{`[]`, `["a",1,{"b":[2]}]`, `[`, `{"a":1}`, `[1,,2]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		items, more, err := ArrayItems(b, 0, 8)
		var want []json.RawMessage
		if json.Unmarshal(b, &want) != nil {
			return
		}
		if err != nil {
			t.Fatalf("ArrayItems(%q): %v; encoding/json reads %d items", b, err, len(want))
		}
		if n := min(len(want), 8); len(items) != n || more != (len(want) > 8) {
			t.Fatalf("ArrayItems(%q) = %d items (more %v); encoding/json reads %d", b, len(items), more, len(want))
		}
	})
}

// plainWord answers for eight bytes what plainStringByte answers for each:
// every byte value at every place, among bytes that are plain (ASCII,
// 0x80 and up, the space) or not.
func TestPlainWord(t *testing.T) {
	for _, filler := range []byte{'a', ' ', 0x7f, 0x80, 0xff, '"', '\\', 0x1f, 0} {
		for pos := range 8 {
			for c := range 256 {
				var w [8]byte
				for i := range w {
					w[i] = filler
				}
				w[pos] = byte(c)
				want := plainStringByte[filler] && plainStringByte[c]
				if got := plainWord(binary.LittleEndian.Uint64(w[:])); got != want {
					t.Fatalf("% x: plainWord %v, want %v", w, got, want)
				}
			}
		}
	}
}
