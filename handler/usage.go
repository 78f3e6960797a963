package handler

import (
	"bytes"
	"strconv"
)

// Usage is the token count an answer reports, when it reports one.
type Usage struct {
	Prompt, Completion int
}

// usageOf reads "usage" from a JSON answer or a stream's data payload:
// OpenAI's prompt_tokens/completion_tokens, or the Responses API's
// input_tokens/output_tokens. It does not decode anything else.
func usageOf(doc []byte) (Usage, bool) {
	f, err := scanAnswer(doc)
	if err != nil {
		return Usage{}, false
	}
	return usageIn(doc, f)
}

// usageIn reads the usage member a scan of doc found.
func usageIn(doc []byte, f bodyFields) (Usage, bool) {
	if !f.usage.ok() || doc[f.usage.value.start] != '{' {
		return Usage{}, false
	}
	u := doc[f.usage.value.start:f.usage.value.end]
	p, okP := intMember(u, "prompt_tokens")
	if !okP {
		p, okP = intMember(u, "input_tokens")
	}
	c, okC := intMember(u, "completion_tokens")
	if !okC {
		c, okC = intMember(u, "output_tokens")
	}
	return Usage{p, c}, okP || okC
}

// intMember finds "name": <integer> in a small flat object. Nested objects
// (prompt_tokens_details) hold other names, so a plain search is exact
// enough for counting.
func intMember(obj []byte, name string) (int, bool) {
	i := bytes.Index(obj, []byte(`"`+name+`"`))
	if i < 0 {
		return 0, false
	}
	j := skipSpace(obj, i+len(name)+2)
	if j >= len(obj) || obj[j] != ':' {
		return 0, false
	}
	j = skipSpace(obj, j+1)
	k := skipDigits(obj, j)
	n, err := strconv.Atoi(string(obj[j:k]))
	return n, err == nil
}
