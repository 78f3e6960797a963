package jsonmember

import (
	"encoding/json"
	"testing"
)

// FuzzOneReading is the differential check of the spelling rule:
// for any body the gateway accepts, what it routes by (model), counts by
// (stream, max_tokens) and filters (a nested set) is what Go's
// encoding/json reads (names folded, the last one wins: ollama, LocalAI)
// and what an exact-match reader reads (Python's json: exact names, the
// last one wins). A body on which they could differ must be refused.
func FuzzOneReading(f *testing.F) {
	for _, s := range []string{
		`{"model":"a","Model":"b"}`,
		`{"model":"a","stream":true,"max_tokens":5}`,
		`{"mod\u0065l":"a","stream":false}`,
		`{"model":"a","ſtream":true}`,
		`{"model":"a","max_tokens":5,"MAX_TOKENS":9}`,
		`{"model":"a","Stream":true}`,
		`{"model":"a","chat_template_kwargs":{"enable_thinking":true}}`,
		`{"model":"a","chat_template_kwargs":{"Enable_Thinking":true}}`,
		`{"model":"a","Chat_Template_Kwargs":{"enable_thinking":true},"chat_template_kwargs":{}}`,
		`{"model":"a","chat_template_kwargs":{},"chat_template_kwargs":{"enable_thinking":1}}`,
		`{"model":"\u00e9","messages":[{"model":"x","Stream":true}]}`,
	} {
		f.Add([]byte(s))
	}
	path := []string{"chat_template_kwargs", "enable_thinking"}
	set := Filter{Path: path, Value: []byte("false")}
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := ScanRequest(b)
		if err != nil || fields.Ambiguous != "" {
			return // refused
		}
		if _, bad := Misspelled(b, path); bad {
			return // refused
		}
		type read struct {
			Model     *string `json:"model"`
			Stream    *bool   `json:"stream"`
			MaxTokens *int64  `json:"max_tokens"`
			Kwargs    *struct {
				Thinking json.RawMessage `json:"enable_thinking"`
			} `json:"chat_template_kwargs"`
		}
		var folded read
		if json.Unmarshal(b, &folded) != nil {
			return // not a request of these types: engines refuse it as well
		}
		var exact map[string]json.RawMessage
		if err := json.Unmarshal(b, &exact); err != nil {
			t.Fatalf("%q: encoding/json reads it as a struct, not as an object: %v", b, err)
		}

		// routing: the model
		model, hasModel := StringValue(b, fields.Model)
		_, exactModel := exact["model"]
		if hasModel != (folded.Model != nil) || hasModel != exactModel {
			t.Fatalf("%q: the gateway sees a model %v, encoding/json %v, an exact reader %v", b, hasModel, folded.Model != nil, exactModel)
		}
		if hasModel {
			var m string
			if json.Unmarshal(exact["model"], &m) != nil || string(model) != m || m != *folded.Model {
				t.Fatalf("%q: model %q, encoding/json %q, exact %s", b, model, *folded.Model, exact["model"])
			}
		}
		// counting: a stream, and the most tokens it may use
		stream := IsTrue(b, fields.Stream)
		if stream != (folded.Stream != nil && *folded.Stream) || stream != (string(exact["stream"]) == "true") {
			t.Fatalf("%q: stream %v, encoding/json %v, exact %s", b, stream, folded.Stream, exact["stream"])
		}
		if m, ok := LastMember(b, SkipSpace(b, 0), "max_tokens"); ok && folded.MaxTokens != nil {
			if string(b[m.Value.Start:m.Value.End]) != string(exact["max_tokens"]) {
				t.Fatalf("%q: max_tokens %s, exact %s", b, b[m.Value.Start:m.Value.End], exact["max_tokens"])
			}
		}
		// filtering: after the set, both readers see the operator's value
		out := ApplyFilters(b, []Filter{set})
		var after read
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("%q: filtered into invalid JSON %q: %v", b, out, err)
		}
		var afterExact struct {
			Kwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
		}
		if err := json.Unmarshal(out, &afterExact); err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if after.Kwargs == nil || string(after.Kwargs.Thinking) != "false" || string(afterExact.Kwargs["enable_thinking"]) != "false" {
			t.Fatalf("%q filtered to %q: encoding/json reads %v, an exact reader %s", b, out, after.Kwargs, afterExact.Kwargs["enable_thinking"])
		}
	})
}
