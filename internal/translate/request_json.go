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

// RequestOptions are what the gateway knows that a request does not say.
type RequestOptions struct {
	// MaxTokens is max_tokens of a request translated to Messages (which
	// requires it) that sets no limit; 0 means DefaultMaxTokens.
	MaxTokens int
	// Model is the model the engine is sent, for APIs whose body does not
	// name it (Converse: the path does); it decides a model family's own
	// fields, such as Claude's thinking. "" means the client's model.
	Model string
}

// rqObject reads body's top-level members; a body that is not a JSON object
// is a plain error (the gateway's reader has refused most of those already).
func rqObject(body []byte) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(body, &top); err != nil || top == nil {
		if err == nil {
			err = errors.New("null")
		}
		return nil, fmt.Errorf("request body is not a JSON object: %v", err)
	}
	return top, nil
}

// rqField decodes top[key] into dst, if present and not null; a value of the
// wrong type is a *Error naming the member, since guessing what the client
// meant would send the engine something the client did not ask for.
func rqField(top map[string]json.RawMessage, key string, dst any) (bool, error) {
	raw, ok := top[key]
	if !ok || rqIsNull(raw) {
		return false, nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return false, &Error{Member: key, Reason: "not a valid value: " + err.Error()}
	}
	return true, nil
}

func rqIsNull(raw json.RawMessage) bool {
	return len(bytes.TrimSpace(raw)) == 0 || string(bytes.TrimSpace(raw)) == "null"
}

// rqString reads raw as a JSON string; ok is false for anything else.
func rqString(raw json.RawMessage) (string, bool) {
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

// rqDrops lists the client's members a translation drops, one entry per kind
// of member: a transcript with forty thinking blocks logs one line, not
// forty, and the first one's path is enough to find them.
type rqDrops struct {
	list []string
	seen map[string]bool
}

// add records member, of kind (a short name such as "thinking" or the
// member's own name), unless a member of that kind was recorded already.
func (d *rqDrops) add(kind, member string) {
	if d.seen[kind] {
		return
	}
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[kind] = true
	d.list = append(d.list, member)
}

// rqMarshal encodes v without HTML escaping: a prompt's "<" and "&" reach the
// engine as the client wrote them, not as \u003c.
func rqMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimRight(b.Bytes(), "\n"), nil
}

// rqCompact is raw JSON without insignificant white space, or nil when raw
// is not valid JSON.
func rqCompact(raw []byte) json.RawMessage {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return nil
	}
	return b.Bytes()
}

// rqUnknown lists the top-level members of top that the reader did not
// know: a vendor extension the target's engine would not read either.
func rqUnknown(r *rqRequest, top map[string]json.RawMessage, known map[string]bool) {
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
