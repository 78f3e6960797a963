package apierror

import (
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// WithAttempts adds the attempt list to an OpenAI-shaped error's message.
// A body of another shape is left alone (the X-LLM-Attempts header has it).
// The note is spliced into the body as the engine wrote it: the body is
// scanned, not decoded and encoded again, because a failing engine's
// error body can be large and a hostile caller can make many of them
// (the hostile mix the bench runs beside the streams).
func WithAttempts(body []byte, attempts string) []byte {
	f, err := jsonmember.ScanAnswer(body)
	if err != nil || !f.Error.OK() {
		return body
	}
	note := " (attempts: " + attempts + ")"
	v := f.Error.Value
	switch body[v.Start] {
	case '"': // "error": "text"
		return jsonmember.ApplyEdits(body, appendToString(v.End, note))
	case '{':
		m, ok := jsonmember.LastMember(body, v.Start, "message")
		switch {
		case ok && body[m.Value.Start] == '"':
			return jsonmember.ApplyEdits(body, appendToString(m.Value.End, note))
		case ok: // a message that is not a string becomes the note
			return jsonmember.ApplyEdits(body, jsonmember.ReplaceValue(m, note))
		}
		// no message: the error object gets one, first
		at := jsonmember.SkipSpace(body, v.Start+1)
		member := jsonmember.AppendString([]byte(`"message":`), note)
		if body[at] != '}' {
			member = append(member, ',')
		}
		return jsonmember.ApplyEdits(body, jsonmember.Edit{Start: v.Start + 1, End: v.Start + 1, Repl: member})
	}
	return body
}

// appendToString is the edit that adds s at the end of the JSON string
// whose closing quote is at end-1.
func appendToString(end int, s string) jsonmember.Edit {
	q := jsonmember.AppendString(nil, s)
	return jsonmember.Edit{Start: end - 1, End: end - 1, Repl: q[1 : len(q)-1]}
}

// UpstreamMessage is the message of an upstream's error body, or the body.
func UpstreamMessage(body []byte) string {
	if f, err := jsonmember.ScanAnswer(body); err == nil && f.Error.OK() {
		v := f.Error.Value
		if body[v.Start] == '{' {
			if m, ok := jsonmember.LastMember(body, v.Start, "message"); ok {
				if s, ok := jsonmember.StringValue(body, m); ok && len(s) > 0 {
					return string(s)
				}
			}
		}
		if s, ok := jsonmember.StringValue(body, f.Error); ok {
			return string(s)
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}
