package quota

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Money budgets: `spend 1/d`, a limit whose count is money (nano-dollars,
// internal/price), counted beside the token budgets in a row of their own,
// reserved and settled as they are. What a request costs in money is the
// handler's to say (its price); here it is one more count.

// Cost is what a request costs a key's budgets: tokens, and money in
// nano-dollars.
type Cost struct {
	Tokens int64
	Money  int64
}

// budgetRow is one kind of budget: its row of counters, its limits in the
// rules, its part of a Cost, its kind and the reason it refuses with.
type budgetRow struct {
	row    int
	kind   Kind
	reason Reason
	limits func(Rules) []Limit
	of     func(Cost) int64
}

// budgetRows are the budgets, in the order they are checked: a request
// over both is refused for its tokens.
var budgetRows = [...]budgetRow{
	{tokensRow, Tokens, ReasonTokens, func(r Rules) []Limit { return r.Tokens }, func(c Cost) int64 { return c.Tokens }},
	{spendRow, Spend, ReasonSpend, func(r Rules) []Limit { return r.Spend }, func(c Cost) int64 { return c.Money }},
}

// SpendLimit is a money budget as it is written: at most an amount of US
// dollars per window, "1/d", "0.50/h", "1.5k/mo". Its Limit counts
// nano-dollars.
type SpendLimit Limit

// ParseSpend reads a money budget: an amount of dollars as
// price.ParseAmount reads it ("1", "0.50", "1.5k"), a slash, and a window.
func ParseSpend(spec string) (SpendLimit, error) {
	amount, win, ok := strings.Cut(spec, "/")
	if !ok {
		return SpendLimit{}, fmt.Errorf("spend %q: want DOLLARS/WINDOW, as in 1/d or 50/mo", spec)
	}
	w, ok := parseWindow(win)
	if !ok {
		return SpendLimit{}, fmt.Errorf("spend %q: unknown window %q (use s, m, h, d or mo)", spec, win)
	}
	a, err := price.ParseAmount(amount)
	if err != nil {
		return SpendLimit{}, fmt.Errorf("spend %q: %v", spec, err)
	}
	if a <= 0 {
		return SpendLimit{}, fmt.Errorf("spend %q: a budget must be more than nothing", spec)
	}
	return SpendLimit{N: int64(a), Window: w}, nil
}

// String is the budget as ParseSpend reads it: "1/d", "0.50/d".
func (s SpendLimit) String() string { return dollars(s.N) + "/" + s.Window.String() }

// dollars is an amount without a whole dollar's ".00".
func dollars(n int64) string { return strings.TrimSuffix(price.Amount(n).String(), ".00") }

// Limit is the budget as the counters count it.
func (s SpendLimit) Limit() Limit { return Limit(s) }

// MarshalText writes the spec.
func (s SpendLimit) MarshalText() ([]byte, error) {
	if s.N <= 0 || s.Window >= numWindows {
		return nil, fmt.Errorf("invalid spend %d per window %d", s.N, s.Window)
	}
	return []byte(s.String()), nil
}

// UnmarshalText reads a spec with ParseSpend.
func (s *SpendLimit) UnmarshalText(b []byte) error {
	v, err := ParseSpend(string(b))
	if err != nil {
		return err
	}
	*s = v
	return nil
}

// SpendLimits are the counters' limits of budgets.
func SpendLimits(ss []SpendLimit) []Limit {
	out := make([]Limit, len(ss))
	for i, s := range ss {
		out[i] = s.Limit()
	}
	return out
}

// limitUsageJSON is LimitUsage's JSON; a money budget writes its limit as
// its spec and its counts in dollars (exact decimals).
type limitUsageJSON struct {
	Kind      Kind            `json:"kind"`
	Limit     string          `json:"limit"`
	Used      json.RawMessage `json:"used"`
	Reserved  json.RawMessage `json:"reserved,omitempty"`
	Remaining json.RawMessage `json:"remaining"`
	Reset     time.Time       `json:"reset"`
}

// MarshalJSON writes a limit's usage; a money budget's counts are dollars.
func (u LimitUsage) MarshalJSON() ([]byte, error) {
	num := func(n int64) json.RawMessage {
		if u.Kind == Spend {
			return json.RawMessage(price.Amount(n).String())
		}
		return json.RawMessage(fmt.Sprint(n))
	}
	j := limitUsageJSON{Kind: u.Kind, Limit: u.Spec(), Used: num(u.Used), Remaining: num(u.Remaining), Reset: u.Reset}
	if u.Reserved != 0 {
		j.Reserved = num(u.Reserved)
	}
	return json.Marshal(j)
}

// Spec is the limit as it is configured: "200k/d", a money budget's "1/d".
func (u LimitUsage) Spec() string {
	if u.Kind == Spend {
		return SpendLimit(u.Limit).String()
	}
	return u.Limit.String()
}

// UnmarshalJSON reads what MarshalJSON writes.
func (u *LimitUsage) UnmarshalJSON(b []byte) error {
	var j limitUsageJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return err
	}
	u.Kind, u.Reset = j.Kind, j.Reset
	count := func(raw json.RawMessage) (int64, error) {
		if len(raw) == 0 {
			return 0, nil
		}
		if j.Kind == Spend {
			var a price.Amount
			err := a.UnmarshalJSON(raw)
			return int64(a), err
		}
		var n int64
		err := json.Unmarshal(raw, &n)
		return n, err
	}
	var err error
	if j.Kind == Spend {
		var s SpendLimit
		if err = s.UnmarshalText([]byte(j.Limit)); err != nil {
			return err
		}
		u.Limit = s.Limit()
	} else if err = u.Limit.UnmarshalText([]byte(j.Limit)); err != nil {
		return err
	}
	if u.Used, err = count(j.Used); err != nil {
		return err
	}
	if u.Reserved, err = count(j.Reserved); err != nil {
		return err
	}
	u.Remaining, err = count(j.Remaining)
	return err
}

// Join ties other's end to t's: Done and Cancel of t end other too (a key's
// ticket and its team's). Either may be nil; the result is the one to end.
func Join(t, other *Ticket) *Ticket {
	switch {
	case t == nil:
		return other
	case other == nil:
		return t
	}
	last := t
	for last.also != nil {
		last = last.also
	}
	last.also = other
	return t
}
