package history

import (
	"encoding/binary"
	"math"
	"strconv"
	"unicode/utf8"
)

// A record is written by hand, not by encoding/json: the writer encodes
// every request the gateway serves, and reflection made that the larger
// part of the history's cost (1 % of Caddy's CPU on 50-chunk
// streams). The bytes are encoding/json's own, member for member and
// escape for escape (FuzzEncode), so files written before and after read
// alike; records are still read with encoding/json.

// appendValue appends a stored value: the arrival (8 bytes, big endian),
// then the record as JSON with seq 0 (the key holds it).
func appendValue(b []byte, r *Record) []byte {
	b = binary.BigEndian.AppendUint64(b, uint64(r.Time))
	b = append(b, `{"seq":0,"time":`...)
	b = strconv.AppendInt(b, r.Time, 10)
	b = appendField(b, "path", r.Path, false)
	b = appendField(b, "key", r.Key, true)
	b = appendField(b, "client", r.Client, true)
	b = appendField(b, "user_agent", r.UserAgent, true)
	b = appendField(b, "session", r.Session, true)
	b = appendField(b, "model", r.Model, false)
	b = appendField(b, "engine", r.Engine, true)
	b = appendField(b, "fallback", r.Fallback, true)
	b = appendField(b, "api", r.API, true)
	b = appendField(b, "engine_api", r.EngineAPI, true)
	b = append(b, `,"status":`...)
	b = strconv.AppendInt(b, int64(r.Status), 10)
	b = appendField(b, "reason", r.Reason, true)
	b = append(b, `,"ttfb_ms":`...)
	b = appendFloat(b, r.TTFBMs)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, r.DurationMs)
	b = append(b, `,"tokens_in":`...)
	b = strconv.AppendInt(b, r.TokensIn, 10)
	b = append(b, `,"tokens_out":`...)
	b = strconv.AppendInt(b, r.TokensOut, 10)
	if r.CacheRead != 0 {
		b = append(b, `,"tokens_cache_read":`...)
		b = strconv.AppendInt(b, r.CacheRead, 10)
	}
	if r.CacheWrite != 0 {
		b = append(b, `,"tokens_cache_write":`...)
		b = strconv.AppendInt(b, r.CacheWrite, 10)
	}
	if r.Cost != 0 {
		b = append(b, `,"cost_usd":`...)
		b = r.Cost.Append(b)
	}
	if r.Stream {
		b = append(b, `,"stream":true`...)
	}
	b = appendField(b, "cut", r.Cut, true)
	if r.RelayedBytes != 0 {
		b = append(b, `,"relayed_bytes":`...)
		b = strconv.AppendInt(b, r.RelayedBytes, 10)
	}
	if len(r.Tries) > 0 {
		b = append(b, `,"tries":[`...)
		for i := range r.Tries {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendTry(b, &r.Tries[i])
		}
		b = append(b, ']')
	}
	b = appendField(b, "trace_id", r.TraceID, true)
	return append(b, '}')
}

func appendTry(b []byte, t *Try) []byte {
	b = append(b, `{"engine":`...)
	b = appendString(b, t.Engine)
	b = appendField(b, "model", t.Model, true)
	b = appendField(b, "address", t.Address, true)
	b = append(b, `,"start_ms":`...)
	b = appendFloat(b, t.StartMs)
	b = append(b, `,"duration_ms":`...)
	b = appendFloat(b, t.DurationMs)
	if t.WaitedMs != 0 {
		b = append(b, `,"waited_ms":`...)
		b = appendFloat(b, t.WaitedMs)
	}
	if t.Status != 0 {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(t.Status), 10)
	}
	b = appendField(b, "reason", t.Reason, false)
	b = appendField(b, "scope", t.Scope, true)
	if t.Resume {
		b = append(b, `,"resume":true`...)
	}
	if t.Hedge {
		b = append(b, `,"hedge":true`...)
	}
	if t.LostForMs != 0 {
		b = append(b, `,"lost_for_ms":`...)
		b = appendFloat(b, t.LostForMs)
	}
	return append(b, '}')
}

// appendField appends ,"name":"v" (nothing for an empty v with omitEmpty).
func appendField(b []byte, name, v string, omitEmpty bool) []byte {
	if omitEmpty && v == "" {
		return b
	}
	b = append(b, ',', '"')
	b = append(b, name...)
	b = append(b, '"', ':')
	return appendString(b, v)
}

// appendFloat formats f as encoding/json does: the shortest form, with an
// exponent only below 1e-6 or from 1e21 on. NaN and infinities, which
// encoding/json refuses, are written as 0: a duration is never one.
func appendFloat(b []byte, f float64) []byte {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return append(b, '0')
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		// e-09 → e-9, as encoding/json writes it
		if n := len(b); n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

const hex = "0123456789abcdef"

// appendString quotes s as encoding/json does: '"' and '\\' escaped, the
// control characters as \n, \r, \t, \b, \f or \u00XX, <, > and & as
// \u003c, \u003e and \u0026, U+2028 and U+2029 as \u2028 and \u2029, and
// invalid UTF-8 as \ufffd.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		if c := s[i]; c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
