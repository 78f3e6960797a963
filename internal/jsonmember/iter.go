package jsonmember

// Walking a document that a validating scan (or SkipValue over the whole
// of it) has already accepted: no decoding and no allocation, every string
// kept as the bytes between its quotes, every value as its span. The
// readers of usage objects (package api) and the stream decoders of
// internal/translate read members with these, so that one set of rules
// says what a member, a string and a count are.

// Iter walks the members of an object or the items of an array.
type Iter struct {
	b   []byte
	i   int
	obj bool
}

// Object walks the object whose '{' is at b[v]; nothing if it is not one.
func Object(b []byte, v int) Iter {
	if v < 0 || v >= len(b) || b[v] != '{' {
		return Iter{b: b, i: len(b)}
	}
	return Iter{b: b, i: v + 1, obj: true}
}

// Array walks the array whose '[' is at b[v]; nothing if it is not one.
func Array(b []byte, v int) Iter {
	if v < 0 || v >= len(b) || b[v] != '[' {
		return Iter{b: b, i: len(b)}
	}
	return Iter{b: b, i: v + 1}
}

// Next returns the next member's raw name (nil for an array's item: the
// name as escaped, without its quotes) and its value's span b[v:end]; ok
// is false past the last one, or at the first byte that does not parse.
func (it *Iter) Next() (key []byte, v, end int, ok bool) {
	b := it.b
	i := SkipSpace(b, it.i)
	if i < len(b) && b[i] == ',' {
		i = SkipSpace(b, i+1)
	}
	if i >= len(b) || b[i] == '}' || b[i] == ']' {
		it.i = len(b)
		return nil, 0, 0, false
	}
	if it.obj {
		ke, err := SkipValue(b, i, 2)
		if err != nil || b[i] != '"' {
			it.i = len(b)
			return nil, 0, 0, false
		}
		key = b[i+1 : ke-1]
		i = SkipSpace(b, ke)
		i = SkipSpace(b, i+1) // past ':'
	}
	end, err := SkipValue(b, i, 2)
	if err != nil {
		it.i = len(b)
		return nil, 0, 0, false
	}
	it.i = end
	return key, i, end, true
}

// Find is the span of the member name of the object at b[v], the last
// one when a name repeats (as encoding/json reads a repeated name); ok is
// false when it is absent or b[v] is not an object.
func Find(b []byte, v int, name string) (start, end int, ok bool) {
	for it := Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			return start, end, ok
		}
		if string(key) == name {
			start, end, ok = s, e, true
		}
	}
}

// FindValue is where the value of the member name of the object at b[v]
// starts (the last one, as Find), or -1.
func FindValue(b []byte, v int, name string) int {
	if s, _, ok := Find(b, v, name); ok {
		return s
	}
	return -1
}

// FindRaw is the value of the member name of the object at b[v] (the
// last one, as Find), or nil.
func FindRaw(b []byte, v int, name string) []byte {
	if s, e, ok := Find(b, v, name); ok {
		return b[s:e]
	}
	return nil
}

// FindStr is the string member name of the object at b[v], as escaped
// (the bytes between its quotes); ok is false when it is absent or not a
// string.
func FindStr(b []byte, v int, name string) ([]byte, bool) {
	if s, e, ok := Find(b, v, name); ok {
		return Str(b, s, e)
	}
	return nil, false
}

// FindInt is the count member name of the object at b[v] (Count), and
// whether it is there.
func FindInt(b []byte, v int, name string) (int, bool) {
	if s, e, ok := Find(b, v, name); ok {
		return Count(b, s, e), true
	}
	return 0, false
}

// Str is the string at b[v:end] as escaped, without its quotes, and
// whether it is a string.
func Str(b []byte, v, end int) ([]byte, bool) {
	if v < end && b[v] == '"' {
		return b[v+1 : end-1], true
	}
	return nil, false
}

// Index is Count for an index: -1 when b[v:end] is not a number.
func Index(b []byte, v, end int) int {
	if v >= end || b[v] < '0' || b[v] > '9' {
		return -1
	}
	return Count(b, v, end)
}

// Count is the non-negative integer at b[v:end], as a token count is
// read: 0 for anything else (a negative number, a string, null), a
// fraction cut at its point, an absurd count capped at 2^40.
func Count(b []byte, v, end int) int {
	n := 0
	for i := v; i < end && '0' <= b[i] && b[i] <= '9'; i++ {
		if n < 1<<40 {
			n = n*10 + int(b[i]-'0')
		}
	}
	return n
}
