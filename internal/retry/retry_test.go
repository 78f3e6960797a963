package retry

import (
	"net/http"
	"testing"
	"time"
)

// Backoff doubles from 250ms up to 5s, with full jitter in [d/2, d): the
// n-th retry waits at least half its step and less than the whole.
func TestBackoffStaysWithinItsStep(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		n    int
		step time.Duration
	}{
		{0, 250 * time.Millisecond}, {1, 500 * time.Millisecond}, {2, time.Second},
		{3, 2 * time.Second}, {4, 4 * time.Second}, {5, 5 * time.Second},
		{10, 5 * time.Second}, {11, 5 * time.Second}, {63, 5 * time.Second}, {1 << 30, 5 * time.Second},
	} {
		for range 200 {
			if d := Backoff(tc.n); d < tc.step/2 || d >= tc.step {
				t.Fatalf("Backoff(%d) = %v, want in [%v, %v)", tc.n, d, tc.step/2, tc.step)
			}
		}
	}
}

// The jitter is real: retries of two gateways (or two requests) that
// failed together do not come back together.
func TestBackoffIsJittered(t *testing.T) {
	t.Parallel()
	seen := map[time.Duration]bool{}
	for range 100 {
		seen[Backoff(4)] = true
	}
	if len(seen) < 50 {
		t.Fatalf("100 back-offs took %d values", len(seen))
	}
}

func TestAfterReadsRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name  string
		value []string // nil: no header
		want  time.Duration
	}{
		{"no header", nil, 0},
		{"empty", []string{""}, 0},
		{"seconds", []string{"7"}, 7 * time.Second},
		{"zero seconds", []string{"0"}, 0},
		{"a day of seconds", []string{"86400"}, 24 * time.Hour},
		{"negative seconds", []string{"-5"}, 0},
		{"fractional seconds", []string{"1.5"}, 0},
		{"seconds with a unit", []string{"10s"}, 0},
		{"an HTTP date ahead", []string{"Thu, 01 Jan 2026 12:00:30 GMT"}, 30 * time.Second},
		{"an HTTP date passed", []string{"Thu, 01 Jan 2026 11:59:00 GMT"}, 0},
		{"an RFC 850 date", []string{"Thursday, 01-Jan-26 12:02:00 GMT"}, 2 * time.Minute},
		{"an asctime date", []string{"Thu Jan  1 12:00:05 2026"}, 5 * time.Second},
		{"an unreadable date", []string{"tomorrow"}, 0},
		{"the first of two values", []string{"3", "9"}, 3 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			if tc.value != nil {
				h["Retry-After"] = tc.value
			}
			if got := After(h, now); got != tc.want {
				t.Fatalf("After(%q) = %v, want %v", tc.value, got, tc.want)
			}
		})
	}
}

func TestAfterReadsAnthropicsLimitResets(t *testing.T) {
	now := time.Date(2026, 12, 3, 10, 0, 0, 0, time.UTC)
	h := http.Header{}
	h.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(5*time.Second).Format(time.RFC3339))
	h.Set("Anthropic-Ratelimit-Tokens-Reset", now.Add(20*time.Second).Format(time.RFC3339))
	h.Set("Anthropic-Ratelimit-Input-Tokens-Reset", "not a time")
	if got := After(h, now); got != 20*time.Second {
		t.Fatalf("the latest reset: %v, want 20s", got)
	}
	h.Set("Retry-After", "3")
	if got := After(h, now); got != 3*time.Second {
		t.Fatalf("Retry-After wins: %v", got)
	}
	past := http.Header{}
	past.Set("Anthropic-Ratelimit-Requests-Reset", now.Add(-time.Minute).Format(time.RFC3339))
	if got := After(past, now); got != 0 {
		t.Fatalf("a reset in the past: %v", got)
	}
}
