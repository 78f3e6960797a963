package grammar

import "github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

// AppendChoiceText appends to text the delta content of a chat chunk's
// first choice, read where choices (the chunk's "choices" member in data)
// is: no decoding, no allocation but text's growth. It reports false for a
// chunk a transcript cannot follow: a second choice, or tool calls.
func AppendChoiceText(text, data []byte, choices jsonmember.Member) ([]byte, bool) {
	if !choices.OK() || data[choices.Value.Start] != '[' {
		return text, true
	}
	for i := choices.Value.Start + 1; ; {
		i = jsonmember.SkipSpace(data, i)
		if i >= len(data) || data[i] == ']' {
			return text, true
		}
		end, err := jsonmember.SkipValue(data, i, 3)
		if err != nil {
			return text, true
		}
		if data[i] == '{' {
			var ok bool
			if text, ok = appendChoice(text, data, i); !ok {
				return text, false
			}
		}
		if i = jsonmember.SkipSpace(data, end); i < len(data) && data[i] == ',' {
			i++
		}
	}
}

// appendChoice appends the delta content of the choice at data[obj].
func appendChoice(text, data []byte, obj int) ([]byte, bool) {
	if m, ok := jsonmember.LastMember(data, obj, "index"); ok && string(m.Raw(data)) != "0" {
		return text, false
	}
	d, ok := jsonmember.LastMember(data, obj, "delta")
	if !ok || data[d.Value.Start] != '{' {
		return text, true
	}
	for _, name := range [...]string{"tool_calls", "function_call"} {
		if m, ok := jsonmember.LastMember(data, d.Value.Start, name); ok && string(m.Raw(data)) != "null" {
			return text, false
		}
	}
	if m, ok := jsonmember.LastMember(data, d.Value.Start, "content"); ok {
		text, _ = jsonmember.AppendStringValue(text, data, m)
	}
	return text, true
}
