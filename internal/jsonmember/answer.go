package jsonmember

import (
	"fmt"
	"strconv"
)

// Annotate adds "extra_fields" to a non-streaming JSON answer (opt-in with
// annotate_response): which engine answered, with which model, how long it
// took, which candidate of the plan it was (0: the primary), and, when
// costUSD is a JSON number, what the answer cost in US dollars.
func Annotate(body []byte, provider, model string, latencyMS int64, index int, costUSD []byte) []byte {
	if _, err := ScanRequest(body); err != nil {
		return body // not a JSON object: leave it as it is
	}
	end := len(body) - 1
	for body[end] != '}' {
		end--
	}
	b := make([]byte, 0, len(body)+128)
	b = append(b, body[:end]...)
	// a comma unless the object is empty
	i := end - 1
	for i > 0 && (body[i] == ' ' || body[i] == '\n' || body[i] == '\r' || body[i] == '\t') {
		i--
	}
	if body[i] != '{' {
		b = append(b, ',')
	}
	b = append(b, `"extra_fields":{"provider":`...)
	b = AppendString(b, provider)
	b = append(b, `,"model":`...)
	b = AppendString(b, model)
	b = append(b, fmt.Sprintf(`,"latency_ms":%d,"fallback_index":%d`, latencyMS, index)...)
	if costUSD != nil {
		b = append(b, `,"cost_usd":`...)
		b = append(b, costUSD...)
	}
	b = append(b, '}')
	return append(b, body[end:]...)
}

// WithMaxTokensLeft asks a continuation only for what is left of the
// request's maximum answer, once spent tokens were sent.
func WithMaxTokensLeft(body []byte, spent int) []byte {
	if spent <= 0 {
		return body
	}
	var edits []Edit
	for _, name := range [...]string{"max_tokens", "max_completion_tokens", "max_output_tokens"} {
		m, ok := LastMember(body, SkipSpace(body, 0), name)
		if !ok {
			continue
		}
		n, err := strconv.Atoi(string(body[m.Value.Start:m.Value.End]))
		if err != nil {
			continue
		}
		left := strconv.AppendInt(nil, int64(max(1, n-spent)), 10)
		edits = append(edits, Edit{Start: m.Value.Start, End: m.Value.End, Repl: left})
	}
	return ApplyEdits(body, edits...)
}
