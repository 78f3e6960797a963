package jsonmember

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSkipChoices: the scan of an answer's "choices" validates exactly as
// skipValue does, finds a finish_reason exactly when encoding/json sees a
// choice whose finish_reason is a string, and finds that a choice says
// something exactly when a decoding of the choices does (the role-only
// probe it replaces).
func FuzzSkipChoices(f *testing.F) {
	for _, s := range []string{
		`[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]`,
		`[{"index":0,"delta":{},"finish_reason":"stop"}]`,
		`[ { "finish_reason" : "length" } , {"index":1} ]`,
		`[1,"x",{"finish_reason":{"a":"b"}},[]]`, `[]`, `[{"a":1,}]`, `[{"finish_reason":"st`,
		`[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]`,
		`[{"delta":{"role":"assistant"}},{"text":"x"}]`, `[{"delta":{"tool_calls":[{"id":"a"}]}}]`,
		`[{"delta":{"tool_calls":null,"reasoning":"hm"}}]`, `[{"delta":{"refusal":""},"text":""}]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '[' {
			return
		}
		end, c, err := skipChoices(b, 0, true)
		finished := c.finished
		wantEnd, wantErr := SkipValue(b, 0, 3)
		if (err == nil) != (wantErr == nil) || (err == nil && end != wantEnd) {
			t.Fatalf("%q: skipChoices %d %v, skipValue %d %v", b, end, err, wantEnd, wantErr)
		}
		if err != nil || !json.Valid(b[:end]) {
			return
		}
		// one finish_reason, written plainly: encoding/json must agree
		if bytes.Count(b[:end], []byte(`"finish_reason"`)) > 1 || bytes.Contains(b[:end], []byte(`\\`)) {
			return
		}
		var choices []json.RawMessage
		if json.Unmarshal(b[:end], &choices) != nil {
			return
		}
		want := false
		for _, c := range choices {
			var m map[string]json.RawMessage
			if json.Unmarshal(c, &m) == nil {
				if v, ok := m["finish_reason"]; ok && len(v) > 0 && v[0] == '"' {
					want = true
				}
			}
		}
		if finished != want {
			t.Fatalf("%q: finished %v, encoding/json %v", b, finished, want)
		}
		if c.none != (len(choices) == 0) {
			t.Fatalf("%q: none %v, %d choices", b, c.none, len(choices))
		}
		if said, ok := saidByDecoding(b[:end]); ok && plainNames(b[:end]) && c.said != said {
			t.Fatalf("%q: said %v, encoding/json %v", b, c.said, said)
		}
	})
}

// saidByDecoding is whether a choice says something, decoded as the
// gateway's role-only probe did before the scan knew it; ok is false when
// the choices do not decode into its shape (strings that are not strings).
func saidByDecoding(b []byte) (said, ok bool) {
	var cs []struct {
		Delta *struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			Refusal          *string         `json:"refusal"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
			FunctionCall     json.RawMessage `json:"function_call"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	}
	if json.Unmarshal(b, &cs) != nil {
		return false, false
	}
	set := func(r json.RawMessage) bool { return len(r) > 0 && string(r) != "null" }
	full := func(s *string) bool { return s != nil && *s != "" }
	for _, c := range cs {
		if c.FinishReason != nil || full(c.Text) {
			return true, true
		}
		if d := c.Delta; d != nil && (full(d.Content) || full(d.ReasoningContent) || full(d.Reasoning) ||
			full(d.Refusal) || set(d.ToolCalls) || set(d.FunctionCall)) {
			return true, true
		}
	}
	return false, true
}

// plainNames reports whether each name the probe reads is written at most
// once and only exactly: encoding/json matches names ignoring case and takes
// the last of two, an engine's answer never needs either.
func plainNames(b []byte) bool {
	lower := bytes.ToLower(b)
	for _, n := range []string{"content", "reasoning_content", "reasoning", "refusal", "tool_calls",
		"function_call", "text", "finish_reason", "delta"} {
		q := []byte(`"` + n + `"`)
		if bytes.Count(lower, q) != bytes.Count(b, q) || bytes.Count(b, q) > 1 {
			return false
		}
	}
	return true
}
