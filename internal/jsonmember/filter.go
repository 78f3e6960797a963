package jsonmember

import (
	"strings"
)

// An engine's body filters (llama-swap's setParams and stripParams): `set`
// gives a member a value, `strip` removes it, at the top level or at a dotted
// path of objects. They edit the body as sent to that engine, after the model
// rewrite, and leave every other byte as the caller sent it.
//
// Names are matched as upstreams match them: Go's encoding/json compares
// member names ignoring case and takes the last, so a filter removes every
// member whose name folds to the one it names ("Temperature" as well as
// "temperature"); otherwise a caller could keep a stripped field by changing
// its case.

// Filter is one parsed Filter.
type Filter struct {
	Path  []string
	Value []byte // nil: strip
}

// ApplyFilters returns body with the filters applied in order. body must be
// a JSON object that scanBody accepted.
func ApplyFilters(body []byte, fs []Filter) []byte {
	for _, f := range fs {
		body = f.apply(body)
	}
	return body
}

func (f Filter) apply(body []byte) []byte {
	obj := SkipSpace(body, 0) // the '{' of the object the path is in
	for i, seg := range f.Path {
		last := i == len(f.Path)-1
		if !last {
			if m, ok := LastMember(body, obj, seg); ok && body[m.Value.Start] == '{' {
				obj = m.Value.Start
				continue
			}
		}
		if f.Value == nil {
			if !last {
				return body // nothing at this path to strip
			}
			return removeAll(body, obj, seg)
		}
		// set: replace whatever holds this name with the rest of the
		// path, built as nested objects
		body = removeAll(body, obj, seg)
		return insertMember(body, obj, seg, nest(f.Path[i+1:], f.Value))
	}
	return body
}

// nest wraps value in objects, one per name: nest([b c], 1) is {"b":{"c":1}}.
func nest(names []string, value []byte) []byte {
	var out []byte
	for _, n := range names {
		out = AppendString(append(out, '{'), n)
		out = append(out, ':')
	}
	out = append(out, value...)
	for range names {
		out = append(out, '}')
	}
	return out
}

// eachMember calls fn for the members of the object whose '{' is at obj, in
// order, until fn returns false; it returns the offset of the object's '}'.
func eachMember(b []byte, obj int, fn func(name []byte, m Member) bool) int {
	i := SkipSpace(b, obj+1)
	if i < len(b) && b[i] == '}' {
		return i
	}
	prevComma := -1
	for i < len(b) && b[i] == '"' {
		keyStart := i
		keyEnd, _ := skipString(b, i)
		i = SkipSpace(b, keyEnd)
		i = SkipSpace(b, i+1) // past ':'
		valEnd, _ := SkipValue(b, i, 2)
		m := Member{Key: keyStart, Value: Span{i, valEnd}, PrevComma: prevComma, NextComma: -1}
		i = SkipSpace(b, valEnd)
		if i < len(b) && b[i] == ',' {
			m.NextComma = i
		}
		if fn != nil && !fn(b[keyStart+1:keyEnd-1], m) {
			fn = nil
		}
		if i >= len(b) || b[i] != ',' {
			return i
		}
		prevComma = i
		i = SkipSpace(b, i+1)
	}
	return i
}

// matches reports whether a raw member name is name, as a Go upstream reads
// it: escapes decoded, case folded.
func matches(rawName []byte, name string) bool {
	var buf [64]byte
	n, ok := decodedName(buf[:0], rawName)
	return ok && strings.EqualFold(string(n), name)
}

// LastMember finds the last member of the object at obj named name.
func LastMember(b []byte, obj int, name string) (Member, bool) {
	var found Member
	ok := false
	eachMember(b, obj, func(raw []byte, m Member) bool {
		if matches(raw, name) {
			found, ok = m, true
		}
		return true
	})
	return found, ok
}

// Named calls fn, in order, for each member of the object at obj whose name
// is one of names as LastMember matches them: one walk of the object for
// several names, where a LastMember per name walks it (and skips its
// largest values) once each.
func Named(b []byte, obj int, names []string, fn func(name string, m Member)) {
	eachMember(b, obj, func(raw []byte, m Member) bool {
		for _, name := range names {
			if matches(raw, name) {
				fn(name, m)
			}
		}
		return true
	})
}

// removeAll removes every member of the object at obj named name.
func removeAll(b []byte, obj int, name string) []byte {
	for {
		m, ok := LastMember(b, obj, name)
		if !ok {
			return b
		}
		b = ApplyEdits(b, RemoveMember(m))
	}
}

// insertMember adds "name": value as the last member of the object at obj.
func insertMember(b []byte, obj int, name string, value []byte) []byte {
	empty := true
	end := eachMember(b, obj, func([]byte, Member) bool { empty = false; return false })
	var m []byte
	if !empty {
		m = append(m, ',')
	}
	m = AppendString(m, name)
	m = append(append(m, ':'), value...)
	return ApplyEdits(b, Edit{end, end, m})
}

// Misspelled finds a member along path (a filter's dotted path) that a
// reader could take two ways: one whose name folds to the path's name
// without being it ("Chat_Template_Kwargs"), or the name given twice. A
// filter edits the exact name, an engine that folds names may read the
// other: such a body is refused rather than guessed.
func Misspelled(body []byte, path []string) (string, bool) {
	obj := SkipSpace(body, 0)
	for _, seg := range path {
		var exact Member
		n, bad := 0, ""
		eachMember(body, obj, func(raw []byte, m Member) bool {
			var buf [64]byte
			name, ok := decodedName(buf[:0], raw)
			if !ok || !strings.EqualFold(string(name), seg) {
				return true
			}
			n++
			if string(name) != seg {
				bad = string(name)
				return false
			}
			exact = m
			return true
		})
		switch {
		case bad != "":
			return bad, true
		case n > 1:
			return seg, true
		case n == 0 || body[exact.Value.Start] != '{':
			return "", false
		}
		obj = exact.Value.Start
	}
	return "", false
}

// Nested is the member at path inside a body's top-level object (as
// "metadata", "user_id"), whose parents are objects; not OK when there is
// none. The body was scanned: it is valid JSON.
func Nested(b []byte, path ...string) Member {
	obj := SkipSpace(b, 0)
	var m Member
	for _, name := range path {
		if obj >= len(b) || b[obj] != '{' {
			return Member{}
		}
		var ok bool
		if m, ok = LastMember(b, obj, name); !ok || !m.OK() {
			return Member{}
		}
		obj = m.Value.Start
	}
	return m
}
