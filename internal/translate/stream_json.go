package translate

import (
	"unicode/utf8"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// The decoders walk an event's JSON, already validated whole by
// stValidObject, with these: no decoding, no allocation, every string kept
// as the bytes between its quotes.

// stIter walks the members of an object or the items of an array.
type stIter struct {
	b   []byte
	i   int
	obj bool
}

// stObject walks the object whose '{' is at b[v]; nothing if it is not
// one.
func stObject(b []byte, v int) stIter {
	if v < 0 || v >= len(b) || b[v] != '{' {
		return stIter{b: b, i: len(b)}
	}
	return stIter{b: b, i: v + 1, obj: true}
}

// stArray walks the array whose '[' is at b[v]; nothing if it is not one.
func stArray(b []byte, v int) stIter {
	if v < 0 || v >= len(b) || b[v] != '[' {
		return stIter{b: b, i: len(b)}
	}
	return stIter{b: b, i: v + 1}
}

// next returns the next member's raw name (or nil, for an array's item)
// and its value's span.
func (it *stIter) next() (key []byte, v, end int, ok bool) {
	b := it.b
	i := jsonmember.SkipSpace(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = jsonmember.SkipSpace(b, i+1)
	}
	if i >= len(b) || b[i] == '}' || b[i] == ']' {
		it.i = len(b)
		return nil, 0, 0, false
	}
	if it.obj {
		ke, err := jsonmember.SkipValue(b, i, 2)
		if err != nil || b[i] != '"' {
			it.i = len(b)
			return nil, 0, 0, false
		}
		key = b[i+1 : ke-1]
		i = jsonmember.SkipSpace(b, ke)
		i = jsonmember.SkipSpace(b, i+1) // past ':'
	}
	end, err := jsonmember.SkipValue(b, i, 2)
	if err != nil {
		it.i = len(b)
		return nil, 0, 0, false
	}
	it.i = end
	return key, i, end, true
}

// stStr is the string at b[v:end] as escaped, without its quotes, and
// whether it is a string.
func stStr(b []byte, v, end int) ([]byte, bool) {
	if v < end && b[v] == '"' {
		return b[v+1 : end-1], true
	}
	return nil, false
}

// stInt is the non-negative integer at b[v:end]; 0 for anything else. A
// fraction is cut, an absurd count capped.
func stInt(b []byte, v, end int) int {
	n := 0
	for i := v; i < end && '0' <= b[i] && b[i] <= '9'; i++ {
		if n < 1<<40 {
			n = n*10 + int(b[i]-'0')
		}
	}
	return n
}

// stIndex is stInt for an index, -1 when it is not a number.
func stIndex(b []byte, v, end int) int {
	if v >= end || b[v] < '0' || b[v] > '9' {
		return -1
	}
	return stInt(b, v, end)
}

// stUnescape appends the decoded form of a string's escaped bytes, which
// a validating scan accepted.
func stUnescape(dst, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' || i+1 >= len(raw) {
			dst = append(dst, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if i+4 >= len(raw) {
				return dst
			}
			r := stHex4(raw[i+1 : i+5])
			i += 4
			if 0xD800 <= r && r < 0xDC00 && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := stHex4(raw[i+3 : i+7]); 0xDC00 <= lo && lo < 0xE000 {
					r = (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r) // a lone surrogate becomes U+FFFD
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
	}
	return dst
}

func stHex4(b []byte) rune {
	var r rune
	for _, c := range b {
		r <<= 4
		switch {
		case '0' <= c && c <= '9':
			r |= rune(c - '0')
		case 'a' <= c && c <= 'f':
			r |= rune(c-'a') + 10
		case 'A' <= c && c <= 'F':
			r |= rune(c-'A') + 10
		}
	}
	return r
}
