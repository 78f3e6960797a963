package quota

import (
	"fmt"
	"time"
)

// Rules are the limits of one named key. Every limit must pass for a
// request to be admitted. The zero Rules limit nothing.
type Rules struct {
	// Rate limits requests per window ("60/m"). Default: none.
	Rate []Limit `json:"rate,omitempty"`
	// Tokens limits prompt + completion tokens per window ("200k/d").
	// Default: none.
	Tokens []Limit `json:"tokens,omitempty"`
	// Spend limits money per window, its counts in nano-dollars (a
	// SpendLimit's: "1/d" is 1,000,000,000 a day; spend.go). Default: none.
	Spend []Limit `json:"spend,omitempty"`
}

// Empty reports whether the rules limit nothing (Admit is then free).
func (r Rules) Empty() bool { return len(r.Rate) == 0 && len(r.Tokens) == 0 && len(r.Spend) == 0 }

// Validate refuses limits that ParseLimit would not have produced (a zero
// count, an unknown window): rules built in code rather than parsed.
func (r Rules) Validate() error {
	for _, set := range [...][]Limit{r.Rate, r.Tokens, r.Spend} {
		for _, l := range set {
			if l.N <= 0 || l.Window >= numWindows {
				return fmt.Errorf("invalid limit %d per %v", l.N, l.Window)
			}
		}
	}
	return nil
}

// Kind is what a limit counts.
type Kind string

// The kinds: requests (rate limits), tokens (token budgets) and spend
// (money budgets, in nano-dollars).
const (
	Requests Kind = "requests"
	Tokens   Kind = "tokens"
	Spend    Kind = "spend"
)

// kindIndex is a kind's row in a key's counters.
const (
	requestsRow = 0
	tokensRow   = 1
	spendRow    = 2
	numRows     = 3
)

// Reason says which limit refused a request.
type Reason string

// The reasons: a rate limit (OpenAI's rate_limit_exceeded), a token
// budget or a money budget (insufficient_quota, or the key's over_budget
// fallback).
const (
	ReasonRate   Reason = "rate"
	ReasonTokens Reason = "tokens"
	ReasonSpend  Reason = "spend"
)

// Decision is Admit's answer.
type Decision struct {
	// OK: the request may go ahead as asked.
	OK bool
	// Reason is why not, when !OK.
	Reason Reason
	// RetryAfter, when !OK, is how long until every window that refused the
	// request has reset, rounded up to a whole second (Retry-After's unit):
	// a client that waits this long finds those windows fresh.
	RetryAfter time.Duration
	// Requests and Tokens are the numbers for OpenAI's x-ratelimit-*
	// headers, each from the key's tightest limit of that kind (the one with
	// the least remaining). A zero Headroom (Limit 0) means the key has no
	// limit of that kind and the headers are left out.
	Requests Headroom
	Tokens   Headroom
	Spend    Headroom // in nano-dollars
	// Held, for a refusal by a budget: every budget that refused the request
	// would take it but for the tokens requests in flight reserve; it may
	// pass when they end, before any window renews.
	Held bool
}

// Headroom is what is left of one limit.
type Headroom struct {
	// Limit is the limit's count per window (x-ratelimit-limit-*).
	Limit int64
	// Remaining is what is left in the current window after this request
	// (x-ratelimit-remaining-*); for tokens, in-flight reservations are
	// taken off it.
	Remaining int64
	// Reset is the time until the window resets (x-ratelimit-reset-*).
	Reset time.Duration
}

// KeyUsage is one key's counters, for the admin API.
type KeyUsage struct {
	Key    string       `json:"key"`
	Limits []LimitUsage `json:"limits"`
}

// LimitUsage is one limit of a key in its current window. A money
// budget's (Kind Spend) counts are nano-dollars, which its JSON writes as
// dollars (spend.go).
type LimitUsage struct {
	Kind      Kind      `json:"kind"`
	Limit     Limit     `json:"limit"`
	Used      int64     `json:"used"`
	Reserved  int64     `json:"reserved,omitempty"` // tokens of requests in flight
	Remaining int64     `json:"remaining"`
	Reset     time.Time `json:"reset"`
}
