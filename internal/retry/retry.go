// Package retry paces attempts on one upstream: the back-off between them
// and the upstream's own Retry-After.
package retry

import (
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"
)

// Back-off between attempts on the same engine: exponential from
// retryBase, with full jitter in [d/2, d), capped at retryCap. One attempt
// per step: a failing upstream is never hammered in a tight loop.
const (
	retryBase = 250 * time.Millisecond
	retryCap  = 5 * time.Second
)

// Backoff is the wait before retry number n (0 for the first retry).
func Backoff(n int) time.Duration {
	d := retryBase << min(n, 10)
	if d > retryCap || d <= 0 {
		d = retryCap
	}
	return d/2 + rand.N(d/2)
}

// After parses a Retry-After header: delay-seconds or an HTTP date
// (RFC 9110 §10.2.3). Without one, Anthropic's anthropic-ratelimit-*-reset
// headers (RFC 3339 times, one per limit) say when the limit that ran out
// resets: the latest of them. It returns 0 when there is none or it is
// unreadable.
func After(h http.Header, now time.Time) time.Duration {
	v := h.Get("Retry-After")
	if v == "" {
		return anthropicReset(h, now)
	}
	if secs, err := strconv.Atoi(v); err == nil {
		if secs < 0 {
			return 0
		}
		return time.Duration(secs) * time.Second
	}
	if t, err := http.ParseTime(v); err == nil {
		return max(0, t.Sub(now))
	}
	return 0
}

// anthropicResets are the reset headers of Anthropic's rate limits.
var anthropicResets = []string{
	"Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset",
	"Anthropic-Ratelimit-Input-Tokens-Reset", "Anthropic-Ratelimit-Output-Tokens-Reset",
}

// anthropicReset is the wait until the latest of Anthropic's limit resets
// in h, or 0.
func anthropicReset(h http.Header, now time.Time) time.Duration {
	var d time.Duration
	for _, name := range anthropicResets {
		if t, err := time.Parse(time.RFC3339, h.Get(name)); err == nil {
			d = max(d, t.Sub(now))
		}
	}
	return d
}
