package price

import (
	"strings"
	"testing"
	"time"
)

// The built-in table's shape: every entry of a known provider, with a
// date (not in the future) and an https source, and positive prices, every
// part of it; no model priced twice by one provider. parseTable refuses
// the rest; this reads the file the binary embeds.
func TestBuiltinTableHasADateASourceAndPositivePrices(t *testing.T) {
	tb, err := parseTable(builtinJSON)
	if err != nil {
		t.Fatal(err)
	}
	if len(tb.Entries) < 20 {
		t.Fatalf("%d entries", len(tb.Entries))
	}
	providers := map[string]bool{}
	for _, e := range tb.Entries {
		providers[e.Provider] = true
		d, _ := time.Parse(time.DateOnly, e.Date)
		if d.After(time.Now()) {
			t.Errorf("%s %v: dated %s, in the future", e.Provider, e.Models, e.Date)
		}
		p := e.Price
		for name, r := range map[string]Rate{"input": p.Input, "output": p.Output, "cache_read": p.CacheRead, "cache_write": p.CacheWrite, "reasoning": p.Reasoning} {
			if r <= 0 {
				t.Errorf("%s %v: %s is %s", e.Provider, e.Models, name, r)
			}
		}
		if p.CacheRead > p.Input {
			t.Errorf("%s %v: a cached token costs more than a fresh one", e.Provider, e.Models)
		}
	}
	// the providers the gateway speaks to, and OpenAI's API (Azure's prices)
	for _, want := range []string{"anthropic", "bedrock", "gemini", "openai"} {
		if !providers[want] {
			t.Errorf("no prices of %s", want)
		}
	}
}

func TestParseTableRefusesAnEntryWithoutDateOrSource(t *testing.T) {
	const head = `{"about":"","providers":[{"name":"p","hosts":["p.example"]}],"prices":[`
	for what, row := range map[string]string{
		"no date":         `{"provider":"p","models":["m"],"input":"1","output":"2","source":"https://p.example/prices"}`,
		"no source":       `{"provider":"p","models":["m"],"input":"1","output":"2","date":"2026-12-07"}`,
		"http source":     `{"provider":"p","models":["m"],"input":"1","output":"2","date":"2026-12-07","source":"http://p.example"}`,
		"free":            `{"provider":"p","models":["m"],"input":"0","output":"2","date":"2026-12-07","source":"https://p.example"}`,
		"zero cache read": `{"provider":"p","models":["m"],"input":"1","output":"2","cache_read":"0","date":"2026-12-07","source":"https://p.example"}`,
		"no models":       `{"provider":"p","models":[],"input":"1","output":"2","date":"2026-12-07","source":"https://p.example"}`,
		"unknown":         `{"provider":"q","models":["m"],"input":"1","output":"2","date":"2026-12-07","source":"https://p.example"}`,
		"not canonical":   `{"provider":"p","models":["M-20240101"],"input":"1","output":"2","date":"2026-12-07","source":"https://p.example"}`,
		"a typo":          `{"provider":"p","models":["m"],"inptu":"1","output":"2","date":"2026-12-07","source":"https://p.example"}`,
	} {
		if _, err := parseTable([]byte(head + row + `]}`)); err == nil {
			t.Errorf("%s: accepted", what)
		}
	}
	twice := `{"provider":"p","models":["m"],"input":"1","output":"2","date":"2026-12-07","source":"https://p.example"}`
	if _, err := parseTable([]byte(head + twice + "," + twice + `]}`)); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("a model priced twice: %v", err)
	}
}

func TestCanonicalNamesOnePricedModelHoweverAProviderSpellsIt(t *testing.T) {
	for in, want := range map[string]string{
		"us.anthropic.claude-3-5-sonnet-20241022-v2:0":     "claude-3-5-sonnet",
		"anthropic.claude-3-sonnet-20240229-v1:0":          "claude-3-sonnet",
		"claude-3-5-sonnet-v2@20241022":                    "claude-3-5-sonnet",
		"claude-3-5-sonnet-latest":                         "claude-3-5-sonnet",
		"claude-sonnet-4-5-20250929":                       "claude-sonnet-4-5",
		"Claude-Sonnet-4-5":                                "claude-sonnet-4-5",
		"gpt-4o-2024-08-06":                                "gpt-4o",
		"gpt-4.1-mini":                                     "gpt-4.1-mini",
		"gemini-2.5-flash":                                 "gemini-2.5-flash",
		"gemini-1.5-pro-002":                               "gemini-1.5-pro",
		"amazon.nova-pro-v1:0":                             "nova-pro",
		"global.anthropic.claude-sonnet-4-5-20250929-v1:0": "claude-sonnet-4-5",
	} {
		if got := Canonical(in); got != want {
			t.Errorf("Canonical(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestLookupFindsAProvidersModelAndTheProvidersItServesAt(t *testing.T) {
	tb := Builtin()
	for _, tc := range []struct{ provider, model, input string }{
		{"anthropic", "claude-3-5-sonnet-20241022", "3"},
		{"anthropic", "claude-sonnet-4-5", "3"},
		{"bedrock", "us.anthropic.claude-3-5-sonnet-20241022-v2:0", "6"},
		{"bedrock", "anthropic.claude-3-sonnet-20240229-v1:0", "3"},
		{"gemini", "gemini-2.5-flash", "0.3"},
		{"vertex", "gemini-2.5-pro", "1.25"},
		{"vertex", "claude-3-5-haiku@20241022", "0.8"},
		{"azure", "gpt-4o", "2.5"},
		{"openai", "gpt-4o-mini-2024-07-18", "0.15"},
	} {
		e, ok := tb.Lookup(tc.provider, tc.model)
		if !ok || e.Price.Input.String() != tc.input {
			t.Errorf("%s %s: %v %s, want input %s", tc.provider, tc.model, ok, e.Price.Input, tc.input)
		}
	}
	if _, ok := tb.Lookup("anthropic", "gpt-4o"); ok {
		t.Error("anthropic prices gpt-4o")
	}
	if _, ok := tb.Lookup("gemini", "claude-3-haiku"); ok {
		t.Error("gemini prices a Claude model: only vertex serves both")
	}
}

func TestProviderOfHostKnowsTheCloudAPIs(t *testing.T) {
	tb := Builtin()
	for host, want := range map[string]string{
		"api.openai.com":                          "openai",
		"API.Anthropic.com":                       "anthropic",
		"my-resource.openai.azure.com":            "azure",
		"bedrock-runtime.us-east-1.amazonaws.com": "bedrock",
		"us-central1-aiplatform.googleapis.com":   "vertex",
		"generativelanguage.googleapis.com":       "gemini",
		"127.0.0.1":                               "",
		"gpu-1.internal":                          "",
		"openai.azure.com":                        "",
	} {
		if got := tb.ProviderOfHost(host); got != want {
			t.Errorf("%s: %q, want %q", host, got, want)
		}
	}
}
