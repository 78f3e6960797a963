package price

import (
	"encoding/json"
	"math"
	"strings"
	"testing"
)

func TestParseAmountReadsDollarsExactly(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Amount
	}{
		{"1", Dollar},
		{"0.50", Dollar / 2},
		{"$5", 5 * Dollar},
		{"0.000000001", 1},
		{"12.345", 12_345_000_000},
		{"1.5k", 1500 * Dollar},
		{"2M", 2_000_000 * Dollar},
		{"0", 0},
		{"0.10000000000", Dollar / 10}, // trailing zeros past a nano-dollar are no precision
	} {
		got, err := ParseAmount(tc.in)
		if err != nil || got != tc.want {
			t.Errorf("ParseAmount(%q) = %d, %v; want %d", tc.in, got, err, tc.want)
		}
	}
	for _, bad := range []string{"", "-1", "1e3", "0.0000000001", "1.2.3", "1m", "abc", ".5", "5.", "99999999999999999999", "2000000000"} {
		if got, err := ParseAmount(bad); err == nil {
			t.Errorf("ParseAmount(%q) = %d, want an error", bad, got)
		}
	}
}

func TestAmountStringIsExactAndReadsBack(t *testing.T) {
	for _, tc := range []struct {
		a    Amount
		want string
	}{
		{0, "0.00"},
		{Dollar, "1.00"},
		{10_500_000, "0.0105"},
		{425, "0.000000425"},
		{-Dollar / 4, "-0.25"},
		{math.MaxInt64, "9223372036.854775807"},
	} {
		if got := tc.a.String(); got != tc.want {
			t.Errorf("%d: %q, want %q", tc.a, got, tc.want)
		}
		var back Amount
		if err := back.UnmarshalText([]byte(tc.a.String())); tc.a >= 0 && tc.a < MaxAmount && (err != nil || back != tc.a) {
			t.Errorf("%q reads back as %d, %v", tc.a.String(), back, err)
		}
	}
}

func TestAmountJSONIsANumberOfDollars(t *testing.T) {
	b, err := json.Marshal(struct {
		Cost Amount `json:"cost"`
	}{10_500_000})
	if err != nil || string(b) != `{"cost":0.0105}` {
		t.Fatalf("%s %v", b, err)
	}
	var v struct {
		Cost Amount `json:"cost"`
	}
	if err := json.Unmarshal([]byte(`{"cost":0.0105}`), &v); err != nil || v.Cost != 10_500_000 {
		t.Fatalf("%d %v", v.Cost, err)
	}
}

func TestAddHoldsAtTheBounds(t *testing.T) {
	if got := Add(math.MaxInt64-1, 5); got != math.MaxInt64 {
		t.Fatalf("%d", got)
	}
	if got := Add(3, 4); got != 7 {
		t.Fatalf("%d", got)
	}
}

// FuzzParseAmount: whatever ParseAmount accepts, String writes back to
// the same amount, and nothing it accepts is negative or past MaxAmount.
func FuzzParseAmount(f *testing.F) {
	for _, s := range []string{"1", "0.50", "1.5k", "2M", "$3", "0.000000001", "1e3", "-1", "9.999999999M"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAmount(s)
		if err != nil {
			return
		}
		if a < 0 || a > MaxAmount {
			t.Fatalf("%q: %d", s, a)
		}
		back, err := ParseAmount(a.String())
		if err != nil || back != a {
			t.Fatalf("%q → %d → %q → %d, %v", s, a, a.String(), back, err)
		}
		if strings.ContainsAny(s, "eE-+") {
			t.Fatalf("%q accepted", s)
		}
	})
}
