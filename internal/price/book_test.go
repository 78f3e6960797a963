package price

import "testing"

// A model's price: the most specific price line (ENGINE/MODEL, then the
// model it is sent or a name of the engine's models sent as it, then the
// engine), else the built-in table for a cloud engine (its provider, or
// its `to` on a provider's API host), else free for a local engine and
// unpriced for a cloud model the table lacks.
func TestAModelsPriceIsTheMostSpecificLineThenTheTable(t *testing.T) {
	engines := []Engine{
		{Name: "local", To: "http://127.0.0.1:9", Models: []string{"qwen", "qwen-alias"}, ModelName: "Qwen2.5-7B"},
		{Name: "free", To: "http://127.0.0.1:9", Models: []string{"tiny"}},
		{Name: "openai", To: "https://api.openai.com", Models: []string{"gpt-4o-mini", "gpt-4o", "gpt-9"}},
		{Name: "claude", Provider: "anthropic", Models: []string{"claude-3-5-sonnet-20241022"}},
		{Name: "a", To: "http://127.0.0.1:9", Models: []string{"a"}},
		{Name: "b", To: "http://127.0.0.1:9", Models: []string{"b"}},
	}
	lines := map[string]Price{
		"qwen":          {Input: 100_000, Output: 200_000},
		"openai/gpt-4o": {Input: 2_000_000},
		"openai":        {Input: 1_000_000},
		"a":             {Input: 9_000_000},
	}
	b := NewBook(lines, engines)
	for _, tc := range []struct {
		engine, model, origin, input string
	}{
		{"local", "Qwen2.5-7B", OriginLine, "0.1"}, // the line names a models name sent as Qwen2.5-7B
		{"free", "tiny", OriginLocal, "0"},
		{"openai", "gpt-4o", OriginLine, "2"},      // ENGINE/MODEL beats the engine's line
		{"openai", "gpt-4o-mini", OriginLine, "1"}, // the engine's line beats the table
		{"claude", "claude-3-5-sonnet-20241022", OriginBuiltin, "3"},
		{"claude", "claude-9", OriginUnpriced, "0"},
		{"b", "a", OriginLocal, "0"},            // b, the fallback of a, sent a's model: b's price, not a's
		{"a@10.0.0.1:80", "a", OriginLine, "9"}, // a dynamic member is priced as its template
	} {
		got := b.Of(tc.engine, tc.model)
		if got.Origin != tc.origin || got.Price.Input.String() != tc.input {
			t.Errorf("%s/%s: %s input %s, want %s %s", tc.engine, tc.model, got.Origin, got.Price.Input, tc.origin, tc.input)
		}
	}
	// without the engine's line, the openai engine is priced from the
	// table by its host
	b = NewBook(nil, engines)
	if got := b.Of("openai", "gpt-4o-mini"); got.Origin != OriginBuiltin || got.Price.Output.String() != "0.6" || got.Source == "" || got.Date == "" {
		t.Errorf("%+v", got)
	}
	if got := b.Of("openai", "gpt-9"); got.Origin != OriginUnpriced {
		t.Errorf("%+v", got)
	}
	if p := b.Provider("openai"); p != "openai" {
		t.Errorf("provider %q", p)
	}
	var none *Book
	if got := none.Of("x", "y"); got.Origin != OriginLocal {
		t.Errorf("%+v", got)
	}
}

// What a request that may reach an engine reserves: the dearest price,
// part by part, of any model the engine is known to be sent, and of the
// models the request names.
func TestMostIsTheDearestPriceOfAnEnginesModels(t *testing.T) {
	engines := []Engine{{Name: "local", To: "http://127.0.0.1:9", Models: []string{"small", "big"}}}
	b := NewBook(map[string]Price{
		"small":       {Input: 1_000_000, Output: 8_000_000},
		"big":         {Input: 3_000_000, Output: 4_000_000},
		"local/asked": {Input: 5_000_000},
	}, engines)
	got := b.Most("local")
	if got.Input.String() != "3" || got.Output.String() != "8" {
		t.Fatalf("%+v", got)
	}
	if got := b.Most("local", "asked"); got.Input.String() != "5" || got.Output.String() != "8" {
		t.Fatalf("with the model asked: %+v", got)
	}
	if got := (*Book)(nil).Most("local", "big"); !got.Free() {
		t.Fatalf("a nil book: %+v", got)
	}
}

// BenchmarkOf prices an answer, as every request does: a local engine's
// (no line, no table), a line's and a cloud model's from the table.
func BenchmarkOf(b *testing.B) {
	engines := []Engine{
		{Name: "local", To: "http://127.0.0.1:9", Models: []string{"qwen"}},
		{Name: "claude", Provider: "anthropic", Models: []string{"claude-3-5-sonnet-20241022"}},
	}
	book := NewBook(map[string]Price{"local/qwen": {Input: 1}}, engines)
	for _, tc := range [][2]string{{"local", "tiny"}, {"local", "qwen"}, {"claude", "claude-3-5-sonnet-20241022"}} {
		b.Run(tc[0]+"/"+tc[1], func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				book.Of(tc[0], tc[1])
			}
		})
	}
}
