package price

import (
	"fmt"
	"math/bits"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Rate is a price per million tokens in micro-dollars: $3 per million
// tokens is 3,000,000; $0.075 is 75,000. One micro-dollar per million
// tokens is one pico-dollar per token, so a token count times a Rate is
// an exact number of pico-dollars.
type Rate int64

// MaxRate bounds what ParseRate reads: $100,000 per million tokens is a
// typo, not a price.
const MaxRate Rate = 100_000 * 1_000_000

// ParseRate reads a price in dollars per million tokens: "3", "0.30",
// "0.075", at most six decimals (a millionth of a dollar per million
// tokens).
func ParseRate(s string) (Rate, error) {
	v, err := parseDecimal(s, 6, false)
	if err != nil {
		return 0, fmt.Errorf("price %q: %v", s, err)
	}
	if Rate(v) > MaxRate {
		return 0, fmt.Errorf("price %q: more than $%s per million tokens", s, Rate(MaxRate))
	}
	return Rate(v), nil
}

// String is the rate in dollars per million tokens, exactly: "3", "0.3",
// "0.075". ParseRate reads it back.
func (r Rate) String() string {
	s := strconv.FormatInt(int64(r)/1_000_000, 10)
	frac := int64(r) % 1_000_000
	if frac == 0 {
		return s
	}
	f := strconv.FormatInt(1_000_000+frac, 10)[1:]
	for f[len(f)-1] == '0' {
		f = f[:len(f)-1]
	}
	return s + "." + f
}

// MarshalText writes String's text, so JSON config holds "0.3".
func (r Rate) MarshalText() ([]byte, error) { return []byte(r.String()), nil }

// UnmarshalText reads a rate with ParseRate.
func (r *Rate) UnmarshalText(b []byte) error {
	v, err := ParseRate(string(b))
	if err != nil {
		return err
	}
	*r = v
	return nil
}

// Price is a model's price per million tokens of each kind, each one set
// (Complete fills what a provider does not price apart). The zero Price is
// free: a local engine's.
type Price struct {
	Input      Rate `json:"input"`       // prompt tokens neither read from nor written to a cache
	Output     Rate `json:"output"`      // completion tokens, reasoning apart
	CacheRead  Rate `json:"cache_read"`  // prompt tokens read from the prompt cache
	CacheWrite Rate `json:"cache_write"` // prompt tokens written to it
	Reasoning  Rate `json:"reasoning"`   // completion tokens the model reasoned with
}

// Parts is a price as it is written, where a part a provider does not
// price apart may be missing (nil).
type Parts struct {
	Input, Output                    Rate
	CacheRead, CacheWrite, Reasoning *Rate
}

// Complete is the price of the parts: a cache read or write not priced
// apart costs the input price (a provider without a cache discount), and
// reasoning not priced apart costs the output price (as every provider the
// built-in table holds bills it today).
func (p Parts) Complete() Price {
	pr := Price{Input: p.Input, Output: p.Output, CacheRead: p.Input, CacheWrite: p.Input, Reasoning: p.Output}
	if p.CacheRead != nil {
		pr.CacheRead = *p.CacheRead
	}
	if p.CacheWrite != nil {
		pr.CacheWrite = *p.CacheWrite
	}
	if p.Reasoning != nil {
		pr.Reasoning = *p.Reasoning
	}
	return pr
}

// Free reports whether every part costs nothing.
func (p Price) Free() bool { return p == Price{} }

// Max is the dearer of two prices, part by part: what a request that may
// reach either reserves.
func Max(a, b Price) Price {
	return Price{
		Input: max(a.Input, b.Input), Output: max(a.Output, b.Output),
		CacheRead: max(a.CacheRead, b.CacheRead), CacheWrite: max(a.CacheWrite, b.CacheWrite),
		Reasoning: max(a.Reasoning, b.Reasoning),
	}
}

// Cost is what an answer's usage costs at p: the prompt tokens read from
// the cache at the cache read price, those written to it at the cache
// write price, the rest of the prompt at the input price; the reasoning
// tokens at the reasoning price, the rest of the output at the output
// price. Usage counts the cache's tokens and the reasoning inside Input
// and Output, whatever API reported them (package api), so one answer
// costs the same whatever API the client spoke. The sum is exact in
// pico-dollars and rounded once, half up, to the nano-dollar.
func (p Price) Cost(u api.Usage) Amount {
	read, write := clamp(u.CacheRead), clamp(u.CacheWrite)
	fresh := clamp(u.Input - u.CacheRead - u.CacheWrite)
	reasoning := min(clamp(u.Reasoning), clamp(u.Output))
	out := clamp(u.Output) - reasoning
	var pico acc
	pico.add(fresh, p.Input)
	pico.add(read, p.CacheRead)
	pico.add(write, p.CacheWrite)
	pico.add(out, p.Output)
	pico.add(reasoning, p.Reasoning)
	return pico.amount()
}

// Tokens is what n tokens cost at rate r: a reservation's prompt or answer.
func Tokens(n int64, r Rate) Amount {
	var pico acc
	pico.add(n, r)
	return pico.amount()
}

func clamp(n int) int64 { return max(int64(n), 0) }

// acc sums pico-dollars in 128 bits: a token count times a rate may pass
// an int64 (2⁴⁰ tokens at $100,000 a million), however unlikely.
type acc struct{ hi, lo uint64 }

func (a *acc) add(n int64, r Rate) {
	if n <= 0 || r <= 0 {
		return
	}
	hi, lo := bits.Mul64(uint64(n), uint64(r))
	var c uint64
	a.lo, c = bits.Add64(a.lo, lo, 0)
	a.hi += hi + c
}

// amount rounds the sum half up to the nano-dollar, held at the largest
// Amount.
func (a acc) amount() Amount {
	lo, c := bits.Add64(a.lo, 500, 0)
	hi := a.hi + c
	if hi >= 1000 {
		return Amount(1<<63 - 1)
	}
	q, _ := bits.Div64(hi, lo, 1000)
	if q > 1<<63-1 {
		return Amount(1<<63 - 1)
	}
	return Amount(q)
}
