package jsonmember

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Numbers as the laxest engines read them. vLLM and SGLang
// validate requests with pydantic in lax mode: a token limit or a choice
// count may come as 5000, 5e3, 5000.0 or "5000", and every one of them is
// the engine's 5000. The gateway reserves tokens by the same reading, or
// refuses what it cannot read, so that a spelling never buys more than it
// pays for.

// ErrNotWhole is a value that is no whole number in any reading.
var ErrNotWhole = errors.New("not a whole number")

// maxLax bounds a lax number: far above any token limit, far below an
// int64's overflow when multiplied by a choice count.
const maxLax = 1 << 40

// LaxInt reads a member's value as pydantic's lax int does: a JSON number
// or a string holding one (spaces around it and digit-separating
// underscores, as Python's int() takes them), whose value is whole. null
// is absent (ok false, no error). Booleans, fractions and other values are
// ErrNotWhole. Values beyond 2^40 read as 2^40.
func LaxInt(b []byte, m Member) (n int64, ok bool, err error) {
	if !m.OK() {
		return 0, false, nil
	}
	raw := string(b[m.Value.Start:m.Value.End])
	switch {
	case raw == "null":
		return 0, false, nil
	case raw[0] == '"':
		s, ok := StringValue(b, m)
		if !ok {
			return 0, false, ErrNotWhole
		}
		raw = strings.ReplaceAll(strings.TrimSpace(string(s)), "_", "")
	case raw[0] != '-' && (raw[0] < '0' || raw[0] > '9'):
		return 0, false, ErrNotWhole
	}
	if n, err := strconv.ParseInt(raw, 10, 64); err == nil {
		return min(max(n, -maxLax), maxLax), true, nil
	}
	f, err := strconv.ParseFloat(raw, 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) || f != math.Trunc(f) {
		return 0, false, ErrNotWhole
	}
	return int64(min(max(f, -maxLax), maxLax)), true, nil
}

// IsBool reports whether a member's value is a JSON boolean.
func IsBool(b []byte, m Member) bool {
	v := string(b[m.Value.Start:m.Value.End])
	return v == "true" || v == "false"
}
