// Package price is what the gateway knows of money: an amount in
// nano-dollars, a rate per million tokens, a model's price (input, output,
// cache read, cache write, reasoning) and what an answer's usage costs at
// it, and the built-in table of the cloud providers' published prices
// (builtin.json, with each entry's date and source). It knows nothing of
// requests: the handler prices an answer's api.Usage with it.
//
// Money is integers, never floats: an amount is a whole number of
// nano-dollars (10⁻⁹ USD) and a rate a whole number of micro-dollars per
// million tokens, which is exactly a pico-dollar per token. An answer's
// cost is summed in pico-dollars and rounded once, half up, to the
// nano-dollar; sums of costs (a key's spend, the metrics, the admin API's
// totals) add whole nano-dollars and are exact to the cent however many
// answers they hold. Floats appear only where a reader wants one (a span
// attribute, a Prometheus sample), converted from the integer once.
package price

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Currency is the one currency of every amount and price: the built-in
// table's prices are the providers' list prices in US dollars.
const Currency = "USD"

// Amount is an amount of money in nano-dollars (10⁻⁹ USD): $1 is
// 1,000,000,000. An int64 holds ±$9.2 billion.
type Amount int64

// Dollar is one dollar.
const Dollar Amount = 1_000_000_000

// MaxAmount bounds what ParseAmount reads: no budget is a billion dollars.
const MaxAmount = 1_000_000_000 * Dollar

// String is the amount in dollars, exactly, with at least two decimals and
// no trailing zeros beyond them: "1.00", "0.0105", "0.000000425",
// "-0.25". ParseAmount reads it back to the same Amount.
func (a Amount) String() string {
	return string(a.Append(nil))
}

// Append appends String's text.
func (a Amount) Append(b []byte) []byte {
	u := uint64(a)
	if a < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/uint64(Dollar), 10)
	frac := u % uint64(Dollar)
	var digits [9]byte
	for i := 8; i >= 0; i-- {
		digits[i] = byte('0' + frac%10)
		frac /= 10
	}
	n := 9
	for n > 2 && digits[n-1] == '0' {
		n--
	}
	b = append(b, '.')
	return append(b, digits[:n]...)
}

// Float is the amount in dollars as a float64, for a reader that wants one
// (a span attribute, a metric sample): converted once, never summed.
func (a Amount) Float() float64 { return float64(a) / float64(Dollar) }

// MarshalText writes String's text.
func (a Amount) MarshalText() ([]byte, error) { return a.Append(nil), nil }

// UnmarshalText reads an amount with ParseAmount; a negative one too,
// which only a stored record holds.
func (a *Amount) UnmarshalText(b []byte) error {
	s := string(b)
	neg := strings.HasPrefix(s, "-")
	v, err := ParseAmount(strings.TrimPrefix(s, "-"))
	if err != nil {
		return err
	}
	if neg {
		v = -v
	}
	*a = v
	return nil
}

// MarshalJSON writes the amount as a JSON number in dollars, exactly
// (0.0105, never 0.010499999999999999): a reader that parses it as a float
// gets the nearest float to the exact amount, a reader with decimals gets
// it exactly.
func (a Amount) MarshalJSON() ([]byte, error) { return a.Append(nil), nil }

// UnmarshalJSON reads a JSON number (or string) of dollars exactly, as
// MarshalJSON writes it.
func (a *Amount) UnmarshalJSON(b []byte) error {
	return a.UnmarshalText([]byte(strings.Trim(string(b), `"`)))
}

// ParseAmount reads an amount of dollars as the Caddyfile and the admin
// API write one: digits, an optional decimal fraction of at most nine
// digits (a nano-dollar), and an optional k (×1,000) or M (×1,000,000)
// suffix: "1", "0.50", "12.345", "1.5k", "2M". A leading "$" is allowed.
// No sign, no exponent: a budget is never negative, and 1e3 is not how
// anyone writes money.
func ParseAmount(s string) (Amount, error) {
	v, err := parseDecimal(strings.TrimPrefix(s, "$"), 9, true)
	if err != nil {
		return 0, fmt.Errorf("amount %q: %v", s, err)
	}
	if v > int64(MaxAmount) {
		return 0, fmt.Errorf("amount %q: more than %s", s, MaxAmount)
	}
	return Amount(v), nil
}

// parseDecimal reads digits[.digits][k|M] as an integer scaled by
// 10^places: "0.30" with 6 places is 300000. Every digit of the fraction
// must fit the places (no rounding), and the result an int64.
func parseDecimal(s string, places int, suffixes bool) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("no number")
	}
	mult := 0 // extra powers of ten from a suffix
	if suffixes {
		switch s[len(s)-1] {
		case 'k', 'K':
			mult = 3
		case 'M':
			mult = 6
		case 'm':
			return 0, fmt.Errorf("suffix m is ambiguous: use M for a million")
		}
		if mult > 0 {
			s = s[:len(s)-1]
		}
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if !allDigits(whole) || hasFrac && !allDigits(frac) {
		return 0, fmt.Errorf("not a number (digits, a point and digits%s)", map[bool]string{true: ", then optionally k or M", false: ""}[suffixes])
	}
	scale := places + mult
	if len(strings.TrimRight(frac, "0")) > scale {
		return 0, fmt.Errorf("finer than %s", finest(places))
	}
	if len(frac) > scale {
		frac = frac[:scale] // only zeros follow
	}
	digits := whole + frac + strings.Repeat("0", scale-len(frac))
	digits = strings.TrimLeft(digits, "0")
	if digits == "" {
		return 0, nil
	}
	if len(digits) > 18 {
		return 0, fmt.Errorf("too large")
	}
	v, err := strconv.ParseInt(digits, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("too large")
	}
	return v, nil
}

func finest(places int) string {
	switch places {
	case 9:
		return "a nano-dollar"
	case 6:
		return "a millionth of a dollar"
	}
	return "1e-" + strconv.Itoa(places)
}

func allDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// Add is a + b, held at the int64's bounds rather than wrapped: a sum of
// costs never turns negative.
func Add(a, b Amount) Amount {
	s := a + b
	switch {
	case a > 0 && b > 0 && s < 0:
		return math.MaxInt64
	case a < 0 && b < 0 && s >= 0:
		return math.MinInt64
	}
	return s
}
