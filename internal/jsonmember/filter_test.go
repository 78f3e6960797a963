package jsonmember

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestNestedFindsAMemberInsideObjectsOnly(t *testing.T) {
	for body, want := range map[string]string{
		`{"metadata":{"user_id":"u1"}}`:                           `"u1"`,
		` {"metadata" : { "a":1, "user_id" : "u2" },"x":[]}`:      `"u2"`,
		`{"metadata":{"user_id":"old"},"metadata":{"user_id":3}}`: `3`,
		`{"metadata":"user_id"}`:                                  ``,
		`{"metadata":["user_id"]}`:                                ``,
		`{"user_id":"u"}`:                                         ``,
		`{"metadata":{}}`:                                         ``,
	} {
		b := []byte(body)
		m := Nested(b, "metadata", "user_id")
		got := ""
		if m.OK() {
			got = string(b[m.Value.Start:m.Value.End])
		}
		if got != want {
			t.Errorf("%s: %q, want %q", body, got, want)
		}
	}
}

func TestFiltersEditOnlyTheNamedMembers(t *testing.T) {
	t.Parallel()
	set := func(path, value string) Filter {
		return Filter{Path: strings.Split(path, "."), Value: []byte(value)}
	}
	strip := func(path string) Filter { return Filter{Path: strings.Split(path, ".")} }
	for _, tc := range []struct {
		name    string
		body    string
		filters []Filter
		want    string
	}{
		{"replace a top-level value", `{"model":"m", "temperature": 0.9 ,"x":1}`,
			[]Filter{set("temperature", "0.6")}, `{"model":"m" ,"x":1,"temperature":0.6}`},
		{"add a missing member", `{"model":"m"}`, []Filter{set("n_probs", "5")}, `{"model":"m","n_probs":5}`},
		{"add to an empty object", `{}`, []Filter{set("a", "true")}, `{"a":true}`},
		{"create a nested path", `{"model":"m"}`, []Filter{set("chat_template_kwargs.enable_thinking", "false")},
			`{"model":"m","chat_template_kwargs":{"enable_thinking":false}}`},
		{"set inside an existing object", `{"kw":{"a":1,"b":2},"z":0}`, []Filter{set("kw.b", `"x"`)},
			`{"kw":{"a":1,"b":"x"},"z":0}`},
		{"a non-object on the path is replaced", `{"kw":7}`, []Filter{set("kw.a", "1")}, `{"kw":{"a":1}}`},
		{"strip a member, every case of it", `{"Temperature":1,"model":"m","temperature":2,"te\u006dperature":3}`,
			[]Filter{strip("temperature")}, `{"model":"m"}`},
		{"strip the first member", `{"top_p":1,"model":"m"}`, []Filter{strip("top_p")}, `{"model":"m"}`},
		{"strip a nested member", `{"kw":{"a":1,"b":2}}`, []Filter{strip("kw.a")}, `{"kw":{"b":2}}`},
		{"strip what is absent", `{"model":"m"}`, []Filter{strip("kw.a"), strip("x")}, `{"model":"m"}`},
		{"a member named in a nested value is not touched", `{"messages":[{"temperature":1}],"model":"m"}`,
			[]Filter{strip("temperature")}, `{"messages":[{"temperature":1}],"model":"m"}`},
		{"max_tokens capped", `{"max_tokens":100000,"model":"m"}`, []Filter{set("max_tokens", "4096")},
			`{"model":"m","max_tokens":4096}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := string(ApplyFilters([]byte(tc.body), tc.filters))
			if got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
			if !json.Valid([]byte(got)) {
				t.Fatalf("not JSON: %s", got)
			}
		})
	}
}

// filterable is what an engine's set or strip may name (engines'
// ValidateFilters): names joined by dots, none empty, and not a member
// the gateway reads to route (model, stream, fallbacks, in any case).
func filterable(path, value string) bool {
	segs := strings.Split(path, ".")
	for _, s := range segs {
		if s == "" {
			return false
		}
	}
	switch strings.ToLower(segs[0]) {
	case "model", "stream", "fallbacks":
		return false
	}
	return value == "" || json.Valid([]byte(value))
}

// FuzzFilters: a filter an engine may be given leaves a body the scan
// accepted valid JSON that the scan accepts again.
func FuzzFilters(f *testing.F) {
	f.Add([]byte(`{"model":"m","temperature":1,"kw":{"a":1}}`), "kw.a", "true")
	f.Add([]byte(`{ "a" : { } , "b":[1,{"c":2}] }`), "a.b", `"x"`)
	f.Add([]byte(`{}`), "temperature", "")
	f.Fuzz(func(t *testing.T, body []byte, path, value string) {
		if _, err := ScanRequest(body); err != nil {
			return
		}
		if !filterable(path, value) {
			return
		}
		fs := []Filter{{Path: strings.Split(path, ".")}} // strip
		if value != "" {
			fs[0].Value = []byte(value)
		}
		out := ApplyFilters(body, fs)
		if !json.Valid(out) {
			t.Fatalf("filter %q=%q made invalid JSON of %s: %s", path, value, body, out)
		}
		if _, err := ScanRequest(out); err != nil {
			t.Fatalf("scan: %v", err)
		}
	})
}
