package jsonmember

import "bytes"

// What a stream's memo needs to take an event as the last one with one
// string value changed (grammar.Memo): a chunk of a chat stream is the
// last chunk but for its delta's text, byte for byte, in every engine
// seen (OpenAI, vLLM, llama.cpp, ollama; Anthropic's text_delta events
// too), so the scan of such an event is a check of that one string and a
// comparison of the bytes around it.

// SkipString returns the offset just past the JSON string whose opening
// quote is at b[i], validating it as a scan does.
func SkipString(b []byte, i int) (int, error) { return skipString(b, i) }

// StringAt returns the offset of the opening quote of the string that holds
// offset p of b, which must be valid JSON (a scan said so), or -1 when p is
// in no string. A string holds its contents and its closing quote, not its
// opening one. The search starts at from, which must be outside every
// string (0, or a string's opening quote). A backslash is only ever inside
// a string in valid JSON, so the quotes are told apart by counting, one
// IndexByte per quote.
func StringAt(b []byte, from, p int) int {
	for i := from; i < p; {
		q := bytes.IndexByte(b[i:p], '"')
		if q < 0 {
			return -1
		}
		open := i + q
		end := closingQuote(b, open)
		if end < 0 {
			return -1
		}
		if p <= end {
			return open
		}
		i = end + 1
	}
	return -1
}

// closingQuote is the offset of the quote that ends the string opened at
// b[open], or -1: the first quote after it not escaped, which is one with an
// even run of backslashes before it.
func closingQuote(b []byte, open int) int {
	for j := open + 1; j < len(b); j++ {
		c := bytes.IndexByte(b[j:], '"')
		if c < 0 {
			return -1
		}
		j += c
		k := j
		for k > open+1 && b[k-1] == '\\' {
			k--
		}
		if (j-k)%2 == 0 {
			return j
		}
	}
	return -1
}

// members is every member a scan notes.
func (f *Fields) members() [14]*Member {
	return [...]*Member{&f.Model, &f.Stream, &f.Fallbacks, &f.User, &f.PromptCacheKey, &f.Usage, &f.Messages,
		&f.ID, &f.Created, &f.Choices, &f.Type, &f.Message, &f.Error, &f.Seq}
}

// Shift moves every offset at or past at by d: what the scan of an object
// would note after a value before at grew by d bytes.
func (f *Fields) Shift(at, d int) {
	for _, m := range f.members() { // an absent member's zeros stay (at > 0)
		if m.Key >= at {
			m.Key += d
		}
		if m.Value.Start >= at {
			m.Value.Start += d
		}
		if m.Value.End >= at {
			m.Value.End += d
		}
		if m.PrevComma >= at {
			m.PrevComma += d
		}
		if m.NextComma >= at {
			m.NextComma += d
		}
	}
}

// NotesAt reports whether offset o is inside the value of a member the
// scan reads for more than where it is: every member but "choices", whose
// strings say nothing to an answer's scan but whether a finish_reason is
// one (Answer mode).
func (f *Fields) NotesAt(o int) bool {
	for _, m := range f.members() {
		if m != &f.Choices && m.Value.Start <= o && o < m.Value.End {
			return true
		}
	}
	return false
}
