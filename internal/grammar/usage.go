package grammar

import (
	"bytes"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Usage is the token count an answer reports, when it reports one.
type Usage struct {
	Prompt, Completion int
}

// UsageOf reads "usage" from a JSON answer or a stream's data payload:
// OpenAI's prompt_tokens/completion_tokens, or the Responses API's
// input_tokens/output_tokens. It does not decode anything else.
func UsageOf(doc []byte) (Usage, bool) {
	f, err := jsonmember.ScanAnswer(doc)
	if err != nil {
		return Usage{}, false
	}
	return UsageIn(doc, f)
}

// UsageIn reads the usage member a scan of doc found.
func UsageIn(doc []byte, f jsonmember.Fields) (Usage, bool) { return usageAt(doc, f.Usage) }

// usageAt reads the usage member m of doc.
func usageAt(doc []byte, m jsonmember.Member) (Usage, bool) {
	if !m.OK() || doc[m.Value.Start] != '{' {
		return Usage{}, false
	}
	u := doc[m.Value.Start:m.Value.End]
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
	j := jsonmember.SkipSpace(obj, i+len(name)+2)
	if j >= len(obj) || obj[j] != ':' {
		return 0, false
	}
	j = jsonmember.SkipSpace(obj, j+1)
	k := jsonmember.SkipDigits(obj, j)
	n, err := strconv.Atoi(string(obj[j:k]))
	return n, err == nil
}

// update is u with the counts a later report has: a stream may report its
// prompt and its completion in different events (Anthropic's message_start
// and message_delta), or cumulative counts in every chunk (vLLM).
func (u Usage) Update(later Usage) Usage {
	if later.Prompt > 0 {
		u.Prompt = later.Prompt
	}
	if later.Completion > 0 {
		u.Completion = later.Completion
	}
	return u
}
