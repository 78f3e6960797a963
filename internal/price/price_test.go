package price

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

func rate(t *testing.T, s string) Rate {
	t.Helper()
	r, err := ParseRate(s)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestParseRateReadsDollarsPerMillionExactly(t *testing.T) {
	for s, want := range map[string]Rate{"3": 3_000_000, "0.30": 300_000, "0.075": 75_000, "0.000001": 1, "18.75": 18_750_000, "0": 0} {
		if got := rate(t, s); got != want {
			t.Errorf("%s: %d, want %d", s, got, want)
		}
		if back := rate(t, want.String()); back != want {
			t.Errorf("%s: String %q reads back as %d", s, want.String(), back)
		}
	}
	for _, bad := range []string{"", "0.0000001", "-3", "3k", "1e2", "100001"} {
		if r, err := ParseRate(bad); err == nil {
			t.Errorf("ParseRate(%q) = %d, want an error", bad, r)
		}
	}
}

// Claude Sonnet's published prices ($3 in, $15 out, $0.30 a cached token
// read, $3.75 a token written to the cache): an answer of 100,000 prompt
// tokens, 60,000 of them read from the cache and 10,000 written to it, and
// 2,000 out costs 30,000 × 3 + 60,000 × 0.30 + 10,000 × 3.75 + 2,000 × 15
// per million: $0.09 + $0.018 + $0.0375 + $0.03 = $0.1755.
func TestCostPricesCachedTokensAtTheirPrice(t *testing.T) {
	sonnet := Parts{Input: rate(t, "3"), Output: rate(t, "15"), CacheRead: ptr(rate(t, "0.30")), CacheWrite: ptr(rate(t, "3.75"))}.Complete()
	u := api.Usage{Input: 100_000, CacheRead: 60_000, CacheWrite: 10_000, Output: 2_000}
	if got := sonnet.Cost(u); got != 175_500_000 || got.String() != "0.1755" {
		t.Fatalf("%d (%s), want $0.1755", got, got)
	}
	// without a cache price, cached tokens cost the input price
	plain := Parts{Input: rate(t, "3"), Output: rate(t, "15")}.Complete()
	if got := plain.Cost(u); got.String() != "0.33" {
		t.Fatalf("%s, want 0.33 (100,000 × $3 + 2,000 × $15 per million)", got)
	}
}

func TestCostPricesReasoningApartOnlyWhenPriced(t *testing.T) {
	u := api.Usage{Input: 1_000_000, Output: 1_000_000, Reasoning: 400_000}
	flat := Parts{Input: rate(t, "1"), Output: rate(t, "2")}.Complete()
	if got := flat.Cost(u); got != 3*Dollar {
		t.Fatalf("%s", got)
	}
	thinking := Parts{Input: rate(t, "1"), Output: rate(t, "2"), Reasoning: ptr(rate(t, "3.5"))}.Complete()
	if got := thinking.Cost(u); got.String() != "3.60" { // 1 + 0.6 × 2 + 0.4 × 3.5
		t.Fatalf("%s", got)
	}
}

// A cost is summed in pico-dollars and rounded once, half up: one token at
// $0.0005 per million is half a nano-dollar and rounds up; a token at
// $0.0004 rounds to nothing. A million answers of 8 tokens at $0.075 add up
// to exactly what 8 million tokens cost.
func TestCostRoundsOnceToTheNanoDollar(t *testing.T) {
	if got := (Price{Input: rate(t, "0.0005")}).Cost(api.Usage{Input: 1}); got != 1 {
		t.Fatalf("%d", got)
	}
	if got := (Price{Input: rate(t, "0.0004")}).Cost(api.Usage{Input: 1}); got != 0 {
		t.Fatalf("%d", got)
	}
	p := Price{Input: rate(t, "0.075")}
	var sum Amount
	for range 1_000_000 {
		sum = Add(sum, p.Cost(api.Usage{Input: 8}))
	}
	if want := p.Cost(api.Usage{Input: 8_000_000}); sum != want || sum.String() != "0.60" {
		t.Fatalf("sum %s, want %s", sum, want)
	}
}

func TestCostNeverNegativeNorOverflows(t *testing.T) {
	p := Price{Input: MaxRate, Output: MaxRate, CacheRead: MaxRate, CacheWrite: MaxRate, Reasoning: MaxRate}
	if got := p.Cost(api.Usage{Input: 1 << 62, Output: 1 << 62}); got <= 0 {
		t.Fatalf("%d", got)
	}
	if got := p.Cost(api.Usage{Input: -5, CacheRead: 10, Output: -1, Reasoning: 7}); got != Tokens(10, MaxRate) {
		t.Fatalf("%d", got)
	}
}

func TestMaxIsTheDearerPartByPart(t *testing.T) {
	a := Price{Input: 3, Output: 1}
	b := Price{Input: 1, Output: 15, CacheRead: 2}
	if got := Max(a, b); got != (Price{Input: 3, Output: 15, CacheRead: 2}) {
		t.Fatalf("%+v", got)
	}
}

func ptr[T any](v T) *T { return &v }

// FuzzParseRate: whatever ParseRate accepts is within bounds and reads
// back from its String.
func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"3", "0.30", "0.075", "0.000001", "100000", "1e2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err != nil {
			return
		}
		if r < 0 || r > MaxRate {
			t.Fatalf("%q: %d", s, r)
		}
		if back, err := ParseRate(r.String()); err != nil || back != r {
			t.Fatalf("%q → %d → %q → %d, %v", s, r, r.String(), back, err)
		}
	})
}
