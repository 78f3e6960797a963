package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
)

// The plumbing every request reader and writer shares: the options a
// writer reads, a body's top-level members, the list of what was dropped.

// object reads body's top-level members; a body that is not a JSON object
// is a plain error (the gateway's reader has refused most of those already).
func object(body []byte) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("request body is not a JSON object: %v", err)
	}
	return top, nil
}

// field decodes top[key] into dst, if present and not null; a value of the
// wrong type is a *Error naming the member, since guessing what the client
// meant would send the engine something the client did not ask for.
func field(top map[string]json.RawMessage, key string, dst any) (bool, error) {
	raw, ok := top[key]
	if !ok || IsNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, &Error{Member: key, Reason: "not a valid value: " + err.Error()}
	}
	return true, nil
}

// IsNull reports whether raw says nothing, absent, blank or null, which the
// readers take as a member left out.
func IsNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// JSONString reads raw as a JSON string; ok is false for anything else.
func JSONString(raw json.RawMessage) (string, bool) {
	var s string
	if len(raw) == 0 || raw[0] != '"' {
		if t := bytes.TrimSpace(raw); len(t) == 0 || t[0] != '"' {
			return "", false
		}
	}
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// Marshal encodes v without HTML escaping: a prompt's "<" and "&" reach the
// engine as the client wrote them, not as \u003c.
func Marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// Compact is raw JSON without insignificant white space, or nil when raw
// is not valid JSON.
func Compact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// unknownMembers lists the top-level members of top that the reader did not
// know: a vendor extension the target's engine would not read either.
func unknownMembers(r *Request, top map[string]json.RawMessage, known map[string]bool) {
	keys := make([]string, 0, len(top))
	for k := range top {
		if !known[k] {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		r.drops.add(k, k)
	}
}

// set is keys as a set: the members a reader knows.
func set(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

// argsText is a tool call's arguments as a JSON text: Chat sends a string,
// a few clients an object.
func argsText(raw json.RawMessage) string {
	if s, ok := JSONString(raw); ok {
		return s
	}
	if IsNull(raw) {
		return ""
	}
	return string(Compact(raw))
}

// nonNull is raw, or nil for null, so that a writer's omitempty leaves the
// member out rather than write null where the API wants an object.
func nonNull(raw json.RawMessage) json.RawMessage {
	if IsNull(raw) {
		return nil
	}
	return raw
}
