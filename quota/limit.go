package quota

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
)

// Window is the length of a fixed counting window. Every window is aligned
// to UTC: seconds, minutes, hours and days start at multiples of their
// length since the Unix epoch, months on the first of the calendar month in
// UTC. Several gateways (and a gateway after a restart) therefore agree on
// where a window begins and ends, and a reset time is the same everywhere.
type Window uint8

// The windows, shortest first. The order is the index of a window's counter.
const (
	Second Window = iota
	Minute
	Hour
	Day
	Month
	numWindows
)

var windowNames = [numWindows]string{"s", "m", "h", "d", "mo"}

// String is the window's short name, as written in a limit: s, m, h, d, mo.
func (w Window) String() string {
	if w < numWindows {
		return windowNames[w]
	}
	return "window(" + strconv.Itoa(int(w)) + ")"
}

// fixedSeconds is the length of the windows that have one; a month has none.
var fixedSeconds = [numWindows]int64{1, 60, 3600, 86400, 0}

// bounds is the window that holds the instant t (unix seconds): its start
// and its end (exclusive), in unix seconds.
func (w Window) bounds(t int64) (start, end int64) {
	if n := fixedSeconds[w]; n > 0 {
		start = t - mod(t, n)
		return start, start + n
	}
	if m := thisMonth.Load(); m != nil && t >= m.start && t < m.end {
		return m.start, m.end
	}
	y, m, _ := time.Unix(t, 0).UTC().Date()
	first := time.Date(y, m, 1, 0, 0, 0, 0, time.UTC)
	span := &monthSpan{first.Unix(), first.AddDate(0, 1, 0).Unix()}
	thisMonth.Store(span)
	return span.start, span.end
}

// thisMonth caches the month last asked for: calendar arithmetic costs
// more than the rest of an Admit, and nearly every call asks for the same
// month.
var thisMonth atomic.Pointer[monthSpan]

type monthSpan struct{ start, end int64 }

// mod is a modulo that stays non-negative before the epoch too.
func mod(a, n int64) int64 {
	r := a % n
	if r < 0 {
		r += n
	}
	return r
}

// parseWindow reads a window's name: the short ones and the spelled-out ones.
func parseWindow(s string) (Window, bool) {
	switch s {
	case "s", "sec", "second":
		return Second, true
	case "m", "min", "minute":
		return Minute, true
	case "h", "hr", "hour":
		return Hour, true
	case "d", "day":
		return Day, true
	case "mo", "month":
		return Month, true
	}
	return 0, false
}

// Limit is at most N per window: "60/m" is 60 requests (or tokens) per
// minute. The zero Limit is no limit and is never configured.
type Limit struct {
	N      int64
	Window Window
}

// ParseLimit reads a limit spec: a whole number, optionally with a k (×1000),
// M (×1,000,000) or G (×1,000,000,000) suffix and then allowed a decimal
// fraction as long as the result is whole ("1.5M"), a slash, and a window:
// s, m, h, d or mo (or second, minute, hour, day, month). Examples: "60/m",
// "200k/d", "1.5M/mo", "10/s", "1000/h". Errors name the spec and what is
// wrong with it; the Caddyfile layer adds file:line.
func ParseLimit(spec string) (Limit, error) {
	num, win, ok := strings.Cut(spec, "/")
	if !ok {
		return Limit{}, fmt.Errorf("limit %q: want COUNT/WINDOW, as in 60/m or 200k/d", spec)
	}
	w, ok := parseWindow(win)
	if !ok {
		return Limit{}, fmt.Errorf("limit %q: unknown window %q (use s, m, h, d or mo)", spec, win)
	}
	n, err := parseCount(num)
	if err != nil {
		return Limit{}, fmt.Errorf("limit %q: %v", spec, err)
	}
	return Limit{N: n, Window: w}, nil
}

// parseCount reads "60", "200k", "1.5M": exact integer arithmetic, so that
// 1.1M is 1100000 and not a float's neighbour of it.
func parseCount(s string) (int64, error) {
	if s == "" {
		return 0, fmt.Errorf("no count before the slash")
	}
	mult := int64(1)
	switch s[len(s)-1] {
	case 'k', 'K':
		mult = 1_000
	case 'M':
		mult = 1_000_000
	case 'G':
		mult = 1_000_000_000
	case 'm':
		return 0, fmt.Errorf("suffix m is ambiguous: use M for a million")
	}
	if mult > 1 {
		s = s[:len(s)-1]
	}
	whole, frac, hasFrac := strings.Cut(s, ".")
	if !digits(whole) || (hasFrac && !digits(frac)) {
		return 0, fmt.Errorf("count %q is not a number (digits, then optionally k, M or G)", s)
	}
	if hasFrac && mult == 1 {
		return 0, fmt.Errorf("count %q is not a whole number", s)
	}
	w, err := strconv.ParseInt(whole, 10, 64)
	if err != nil || w > math.MaxInt64/mult {
		return 0, fmt.Errorf("count %q is too large", s)
	}
	n := w * mult
	if hasFrac {
		// frac has at most as many significant digits as mult has zeros,
		// or the count is not whole
		scale := mult
		var f int64
		for i := 0; i < len(frac); i++ {
			if scale%10 != 0 {
				if frac[i] != '0' {
					return 0, fmt.Errorf("count %s is not a whole number", s)
				}
				continue
			}
			scale /= 10
			f += int64(frac[i]-'0') * scale
		}
		if n > math.MaxInt64-f {
			return 0, fmt.Errorf("count %q is too large", s)
		}
		n += f
	}
	if n <= 0 {
		return 0, fmt.Errorf("count must be at least 1")
	}
	return n, nil
}

func digits(s string) bool {
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

// String is the limit's canonical spec, which ParseLimit reads back to the
// same Limit: the largest of G, M and k that divides N, then the window
// ("1500k/mo" for 1.5M/mo).
func (l Limit) String() string {
	n, suffix := l.N, ""
	switch {
	case n == 0:
	case n%1_000_000_000 == 0:
		n, suffix = n/1_000_000_000, "G"
	case n%1_000_000 == 0:
		n, suffix = n/1_000_000, "M"
	case n%1_000 == 0:
		n, suffix = n/1_000, "k"
	}
	return strconv.FormatInt(n, 10) + suffix + "/" + l.Window.String()
}

// MarshalText writes the spec, so JSON config holds "60/m".
func (l Limit) MarshalText() ([]byte, error) {
	if l.N <= 0 || l.Window >= numWindows {
		return nil, fmt.Errorf("invalid limit %d per window %d", l.N, l.Window)
	}
	return []byte(l.String()), nil
}

// UnmarshalText reads a spec with ParseLimit.
func (l *Limit) UnmarshalText(b []byte) error {
	v, err := ParseLimit(string(b))
	if err != nil {
		return err
	}
	*l = v
	return nil
}
