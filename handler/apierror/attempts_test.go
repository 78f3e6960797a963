package apierror

import (
	"encoding/json"
	"testing"
)

func TestWithAttemptsSplicesTheNoteIntoTheEnginesBody(t *testing.T) {
	const note = `e1: 503, "e2": 401`
	for _, tc := range []struct{ name, in, want string }{
		{"message", `{"error":{"type":"x","message":"busy","code":503},"z":1}`,
			`{"error":{"type":"x","message":"busy (attempts: e1: 503, \"e2\": 401)","code":503},"z":1}`},
		{"string error", `{"error":"busy"}`, `{"error":"busy (attempts: e1: 503, \"e2\": 401)"}`},
		{"no message", `{"error":{"code":1}}`, `{"error":{"message":" (attempts: e1: 503, \"e2\": 401)","code":1}}`},
		{"empty error", `{"error":{ }}`, `{"error":{"message":" (attempts: e1: 503, \"e2\": 401)" }}`},
		{"message not a string", `{"error":{"message":7}}`, `{"error":{"message":" (attempts: e1: 503, \"e2\": 401)"}}`},
		{"escapes kept", `{"error":{"message":"a\"b\u00e9"}}`, `{"error":{"message":"a\"b\u00e9 (attempts: e1: 503, \"e2\": 401)"}}`},
		{"error of another shape", `{"error":null}`, `{"error":null}`},
		{"no error", `{"detail":"busy"}`, `{"detail":"busy"}`},
		{"not JSON", `busy`, `busy`},
		{"an array", `[{"error":"x"}]`, `[{"error":"x"}]`},
	} {
		got := string(WithAttempts([]byte(tc.in), note))
		if got != tc.want {
			t.Errorf("%s: WithAttempts(%s) = %s, want %s", tc.name, tc.in, got, tc.want)
		}
	}
}

func TestUpstreamMessage(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`{"error":{"message":"model \"x\" not found","type":"invalid_request_error"}}`, `model "x" not found`},
		{`{"error":{"Message":"folded"}}`, `folded`},
		{`{"error":"plain"}`, `plain`},
		{`{"error":{"message":""}}`, `{"error":{"message":""}}`},
		{`{"error":null}`, `{"error":null}`},
		{`  upstream down  `, `upstream down`},
	} {
		if got := UpstreamMessage([]byte(tc.in)); got != tc.want {
			t.Errorf("UpstreamMessage(%s) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// FuzzWithAttempts: what an engine sends, with the note added, is still
// JSON whenever it was.
func FuzzWithAttempts(f *testing.F) {
	for _, s := range []string{`{"error":{"message":"x"}}`, `{"error":"x"}`, `{"error":{}}`, `{"error":{"message":1,"message":"y"}}`, `{}`, `x`} {
		f.Add([]byte(s), "e1: 503")
	}
	f.Fuzz(func(t *testing.T, body []byte, attempts string) {
		out := WithAttempts(body, attempts)
		if json.Valid(body) && !json.Valid(out) {
			t.Fatalf("WithAttempts(%q, %q) = %q: not JSON", body, attempts, out)
		}
		_ = UpstreamMessage(body)
	})
}
