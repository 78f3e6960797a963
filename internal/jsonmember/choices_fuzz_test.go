package jsonmember

import (
	"bytes"
	"encoding/json"
	"testing"
)

// FuzzSkipChoices: the scan of an answer's "choices" validates exactly as
// skipValue does, and finds a finish_reason exactly when encoding/json
// sees a choice whose finish_reason is a string.
func FuzzSkipChoices(f *testing.F) {
	for _, s := range []string{
		`[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]`,
		`[{"index":0,"delta":{},"finish_reason":"stop"}]`,
		`[ { "finish_reason" : "length" } , {"index":1} ]`,
		`[1,"x",{"finish_reason":{"a":"b"}},[]]`, `[]`, `[{"a":1,}]`, `[{"finish_reason":"st`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if len(b) == 0 || b[0] != '[' {
			return
		}
		end, finished, err := skipChoices(b, 0)
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
	})
}
