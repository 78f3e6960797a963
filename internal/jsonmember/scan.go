// Package jsonmember reads and edits the top-level members of a JSON object
// in place: a validating scanner that records where members sit, byte edits
// that keep every other byte, and the set/strip filters over dotted paths.
// It knows nothing of requests.
package jsonmember

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// The gateway reads a handful of top-level members of a request body (model,
// stream, fallbacks, session keys) and edits one or two of them; the rest is
// forwarded byte for byte. Decoding a whole chat transcript to read one string
// would cost an allocation per JSON node, so the body is walked once by a small
// validating scanner that records where each interesting member sits.
//
// Only top-level members count: a "model" inside "messages" or "tools" is part
// of a nested value, which the scanner skips without looking at its keys.

// maxNesting bounds how deep the scanner follows nested arrays and objects,
// as encoding/json does, so a hostile body cannot exhaust the stack.
const maxNesting = 10000

// Span is a half-open byte range [start, end) of a body. The zero Span is
// "absent": no member ever starts at offset 0, where the '{' is.
type Span struct{ Start, End int }

func (s Span) OK() bool { return s.End > s.Start }

// Member records one top-level Member: the key's first byte (its opening
// quote), the value's span, and the commas around it, so that the Member can
// be removed while the object stays valid JSON.
type Member struct {
	Key       int
	Value     Span
	PrevComma int // offset of the ',' before the key, -1 if first
	NextComma int // offset of the ',' after the value, -1 if last
}

func (m Member) OK() bool { return m.Value.OK() }

// Raw is the member's value as it is in b, the body it was found in.
func (m Member) Raw(b []byte) []byte { return b[m.Value.Start:m.Value.End] }

// Fields are the top-level members the gateway looks at.
type Fields struct {
	Model          Member
	Stream         Member
	Fallbacks      Member
	User           Member
	PromptCacheKey Member
	Usage          Member // in answers: token counts
	Messages       Member // a chat request's messages
	ID             Member // in stream chunks
	Created        Member
	Choices        Member // an answer's choices
	Type           Member // an event's type (Responses, Anthropic)
	Message        Member // Anthropic's message_start: the message, with the prompt's usage
	Error          Member // an error event's error
	Seq            Member // a Responses event's sequence_number
	// Finished: in an answer, a choice has a finish_reason that is a
	// string (the chunk that says a chat or text completion is whole)
	Finished bool
	// Said: in an answer, a choice says something: a finish_reason, a
	// non-empty text, or a delta with non-empty content, reasoning or
	// refusal, or tool calls. A chunk whose choices all say nothing is
	// the role-only preamble of a stream.
	Said bool
	// NoChoices: in an answer, "choices" is an empty array (the usage
	// chunk of stream_options.include_usage)
	NoChoices bool
	// Role: in an answer, a choice's delta names a role (the first chunk
	// of a chat stream)
	Role bool
	// Ambiguous names a member of ReadNames that a request spells two
	// ways: given twice under Unicode case folding, or once under a
	// spelling that folds to the name without being it ("Stream",
	// "ſtream"). Engines that match names exactly and engines that fold
	// them (Go's encoding/json) would read two different requests.
	Ambiguous string
	// Spelled is how the body wrote Ambiguous when it was a variant; ""
	// when the member was given twice.
	Spelled string
	seen    uint32 // which of ReadNames were seen, as a bit each
}

// errBadJSON wraps every scanning failure so callers can answer 400.
var errBadJSON = errors.New("malformed JSON")

type syntaxError struct {
	off int
	msg string
}

func (e *syntaxError) Error() string {
	return fmt.Sprintf("malformed JSON at byte %d: %s", e.off, e.msg)
}

func (e *syntaxError) Unwrap() error { return errBadJSON }

// ScanRequest validates b as one JSON object and returns where its interesting
// top-level members are. It does not allocate on valid input.
func ScanRequest(b []byte) (Fields, error) {
	var f Fields
	err := f.Scan(b, Request)
	return f, err
}

// ScanAnswer is scanBody for what an engine sends (an answer, a stream's
// event): the same validation and members, without looking for members
// repeated under case folding, which only a request can use to mislead.
func ScanAnswer(b []byte) (Fields, error) {
	var f Fields
	err := f.Scan(b, Answer)
	return f, err
}

// ScanFirstAnswer is ScanAnswer for a stream's events before its first
// content: it also looks into each choice's delta, for Said and Role.
func ScanFirstAnswer(b []byte) (Fields, error) {
	var f Fields
	err := f.Scan(b, FirstAnswer)
	return f, err
}

// Mode is what a scan reads: a request, an answer, or an answer's first
// events.
type Mode uint8

const (
	Request Mode = iota
	Answer
	FirstAnswer
)

// Scan is ScanRequest, ScanAnswer or ScanFirstAnswer into f, which it
// overwrites. A request's path and a stream's events scan into what they
// keep: a Fields is over 500 bytes, and each copy returned by value takes
// room in one more stack frame. On HTTP/2, where every request has a
// goroutine of its own, those copies grew the handler's stack from 8 to
// 16 KiB per open stream.
func (f *Fields) Scan(b []byte, mode Mode) error { return f.scan(b, mode, nil) }

func (f *Fields) scan(b []byte, mode Mode, note *Resume) error {
	*f = Fields{}
	i := SkipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return &syntaxError{i, "the body must be a JSON object"}
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return expectEnd(b, i+1)
	}
	return f.scanMembers(b, i, -1, mode, note)
}

// scanMembers scans an object's members from the key at i (prevComma the
// comma before it, -1 for the first) to the end of b. With note, it notes
// where a later object that shares this one's bytes up to there can be
// taken up (resume.go).
func (f *Fields) scanMembers(b []byte, i, prevComma int, mode Mode, note *Resume) error {
	for {
		if i >= len(b) || b[i] != '"' {
			return &syntaxError{i, "expected a member name"}
		}
		keyStart := i
		keyEnd, err := skipString(b, i)
		if err != nil {
			return err
		}
		i = SkipSpace(b, keyEnd)
		if i >= len(b) || b[i] != ':' {
			return &syntaxError{i, "expected ':' after a member name"}
		}
		i = SkipSpace(b, i+1)
		valStart := i
		if note != nil && i < len(b) && (b[i] == '[' || b[i] == '{') {
			note.take(f, keyStart, prevComma)
			note = nil
		}
		// depth counts the top-level object as 1, as encoding/json's limit does
		var valEnd int
		if mode != Request && i < len(b) && b[i] == '[' && string(b[keyStart:keyEnd]) == `"choices"` {
			var c choices
			valEnd, c, err = skipChoices(b, i, mode == FirstAnswer)
			f.Finished, f.Said, f.NoChoices, f.Role = c.finished, c.said, c.none, c.role
		} else {
			valEnd, err = SkipValue(b, i, 2)
		}
		if err != nil {
			return err
		}
		m := Member{Key: keyStart, Value: Span{valStart, valEnd}, PrevComma: prevComma, NextComma: -1}
		i = SkipSpace(b, valEnd)
		if i < len(b) && b[i] == ',' {
			m.NextComma = i
		}
		if mode == Request {
			f.fold(b[keyStart+1 : keyEnd-1])
		}
		if slot := f.slot(b[keyStart+1 : keyEnd-1]); slot != nil {
			*slot = m // a repeated member: the last one wins, as in encoding/json
		}
		if i >= len(b) {
			return &syntaxError{i, "unexpected end of input in an object"}
		}
		switch b[i] {
		case ',':
			prevComma = i
			i = SkipSpace(b, i+1)
		case '}':
			return expectEnd(b, i+1)
		default:
			return &syntaxError{i, "expected ',' or '}'"}
		}
	}
}

// decodedName is a member name as upstreams read it: rawName itself, or,
// when it has escapes ("mod\u0065l"), decoded into buf.
func decodedName(buf, rawName []byte) ([]byte, bool) {
	for _, c := range rawName {
		if c == '\\' {
			return appendUnquoted(buf, rawName)
		}
	}
	return rawName, true
}

// slot returns where a member with this raw (still escaped) name is kept, or
// nil when the gateway does not care about it. A name written with escapes
// ("mod\u0065l") is compared decoded, because that is how upstreams read it.
func (f *Fields) slot(rawName []byte) *Member {
	var buf [32]byte
	name, ok := decodedName(buf[:0], rawName)
	if !ok {
		return nil
	}
	switch string(name) {
	case "model":
		return &f.Model
	case "sequence_number":
		return &f.Seq
	case "stream":
		return &f.Stream
	case "fallbacks":
		return &f.Fallbacks
	case "user":
		return &f.User
	case "prompt_cache_key":
		return &f.PromptCacheKey
	case "usage":
		return &f.Usage
	case "messages":
		return &f.Messages
	case "id":
		return &f.ID
	case "created":
		return &f.Created
	case "choices":
		return &f.Choices
	case "type":
		return &f.Type
	case "message":
		return &f.Message
	case "error":
		return &f.Error
	}
	return nil
}

// ReadNames are the members the gateway reads or writes in a request: the
// routing members, the token limits a reservation reads, the session keys
// and the messages a resume continues. A request may carry each once, and
// only spelled exactly: Go's encoding/json (ollama, LocalAI) matches names
// ignoring case and takes the last, Python's json takes the exact name, so a
// variant would be read one way by the gateway and another by an engine.
//
// n and best_of are read for the reservation: every engine
// answers n choices, each up to the token limit.
var ReadNames = [...]string{"model", "stream", "stream_options", "fallbacks", "max_tokens",
	"max_completion_tokens", "max_output_tokens", "user", "prompt_cache_key", "messages",
	"best_of", "n", "n_predict", "min_tokens", "ignore_eos"}

// fold records a member name against ReadNames.
func (f *Fields) fold(rawName []byte) {
	// a folded name is at most 3 bytes per letter (the Kelvin sign is 3),
	// an escaped one 6
	if len(rawName) > 21*6 || len(rawName) < 4 && !(len(rawName) == 1 && rawName[0]|0x20 == 'n') {
		return // "n" and "N" are the one short name (n folds to nothing else)
	}
	var buf [128]byte
	name, ok := decodedName(buf[:0], rawName)
	if !ok {
		return
	}
	for i, want := range ReadNames {
		if len(name) < len(want) || !equalFold(name, want) {
			continue
		}
		switch {
		case f.Ambiguous != "":
		case string(name) != want:
			f.Ambiguous, f.Spelled = want, string(name)
		case f.seen&(1<<i) != 0:
			f.Ambiguous = want
		}
		f.seen |= 1 << i
	}
}

// equalFold reports whether b equals s (lower-case ASCII) under Unicode
// case folding.
func equalFold(b []byte, s string) bool {
	ascii := true
	for _, c := range b {
		ascii = ascii && c < utf8.RuneSelf
	}
	if !ascii {
		// the Kelvin sign folds to k, the long s to s: Unicode's rules
		return strings.EqualFold(string(b), s)
	}
	// ASCII folds byte for byte, and only to ASCII
	if len(b) != len(s) {
		return false
	}
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != s[i] {
			return false
		}
	}
	return true
}

func expectEnd(b []byte, i int) error {
	if i = SkipSpace(b, i); i != len(b) {
		return &syntaxError{i, "unexpected data after the top-level object"}
	}
	return nil
}

func SkipSpace(b []byte, i int) int {
	for i < len(b) {
		switch b[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// choices is what skipChoices learns of an answer's choices on its way.
type choices struct {
	finished bool // a choice has a finish_reason that is a string
	said     bool // a choice says something (Fields.Said)
	none     bool // the array is empty
	role     bool // a choice's delta names a role
}

// skipChoices is skipValue for an answer's "choices" array, which also
// reports whether a choice has a finish_reason that is a string and, with
// deltas, whether one says anything: the scan that validates a stream's event finds the end
// of the answer and its first content on its way, where a second search or
// a decoding of every event cost as much as the scan.
func skipChoices(b []byte, i int, deltas bool) (int, choices, error) {
	var c choices
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		c.none = true
		return i + 1, c, nil
	}
	for {
		var err error
		if i < len(b) && b[i] == '{' {
			// a choice: its members, one level down
			i = SkipSpace(b, i+1)
			for i < len(b) && b[i] != '}' {
				if b[i] != '"' {
					return i, choices{}, &syntaxError{i, "expected a member name"}
				}
				keyStart := i
				if i, err = skipString(b, i); err != nil {
					return i, choices{}, err
				}
				key := b[keyStart:i]
				i = SkipSpace(b, i)
				if i >= len(b) || b[i] != ':' {
					return i, choices{}, &syntaxError{i, "expected ':' after a member name"}
				}
				i = SkipSpace(b, i+1)
				switch {
				case i >= len(b):
				case string(key) == `"finish_reason"` && b[i] == '"':
					c.finished, c.said = true, true
				case !deltas:
				case string(key) == `"text"` && b[i] == '"':
					c.said = c.said || nonEmptyString(b, i)
				case string(key) == `"delta"` && b[i] == '{':
					i, err = c.delta(b, i)
				}
				if err != nil {
					return i, choices{}, err
				}
				if i, err = SkipValue(b, i, 4); err != nil {
					return i, choices{}, err
				}
				i = SkipSpace(b, i)
				if i < len(b) && b[i] == ',' {
					i = SkipSpace(b, i+1)
					if i < len(b) && b[i] == '}' {
						return i, choices{}, &syntaxError{i, "expected a member name"}
					}
				} else if i >= len(b) || b[i] != '}' {
					return i, choices{}, &syntaxError{i, "expected ',' or '}'"}
				}
			}
			if i >= len(b) {
				return i, choices{}, &syntaxError{i, "unexpected end of input"}
			}
			i++
		} else if i, err = SkipValue(b, i, 3); err != nil {
			return i, choices{}, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, choices{}, &syntaxError{i, "unexpected end of input"}
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case ']':
			return i + 1, c, nil
		default:
			return i, choices{}, &syntaxError{i, "expected ',' or ']'"}
		}
	}
}

// delta reads a choice's delta at b[i] ('{') for what it says, validating
// it. It returns i itself: the caller skips the value again, which keeps one
// path for the choice's members (the delta is read only before a stream's
// first content, a handful of events).
func (c *choices) delta(b []byte, i int) (int, error) {
	_, err := walkMembers(b, i, 4, func(key []byte, v int) (int, error) {
		switch string(key) {
		case `"content"`, `"reasoning_content"`, `"reasoning"`, `"refusal"`:
			c.said = c.said || (b[v] == '"' && nonEmptyString(b, v))
		case `"tool_calls"`, `"function_call"`:
			c.said = c.said || !isNull(b, v)
		case `"role"`:
			c.role = true
		}
		return SkipValue(b, v, 5)
	})
	return i, err
}

// walkMembers walks the object at b[i] ('{'), whose members are at nesting
// depth, calling value with each member's raw key (quotes included) and its
// value's offset; value returns the offset past the value. It returns the
// offset past the object.
func walkMembers(b []byte, i, depth int, value func(key []byte, v int) (int, error)) (int, error) {
	if depth > maxNesting {
		return i, &syntaxError{i, "nested too deeply"}
	}
	var err error
	i = SkipSpace(b, i+1)
	for i < len(b) && b[i] != '}' {
		if b[i] != '"' {
			return i, &syntaxError{i, "expected a member name"}
		}
		keyStart := i
		if i, err = skipString(b, i); err != nil {
			return i, err
		}
		key := b[keyStart:i]
		i = SkipSpace(b, i)
		if i >= len(b) || b[i] != ':' {
			return i, &syntaxError{i, "expected ':' after a member name"}
		}
		i = SkipSpace(b, i+1)
		if i >= len(b) {
			return i, &syntaxError{i, "expected a value"}
		}
		if i, err = value(key, i); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i < len(b) && b[i] == ',' {
			i = SkipSpace(b, i+1)
			if i < len(b) && b[i] == '}' {
				return i, &syntaxError{i, "expected a member name"}
			}
		} else if i >= len(b) || b[i] != '}' {
			return i, &syntaxError{i, "expected ',' or '}'"}
		}
	}
	if i >= len(b) {
		return i, &syntaxError{i, "unexpected end of input"}
	}
	return i + 1, nil
}

// nonEmptyString reports whether the string at b[i] ('"') is not "".
func nonEmptyString(b []byte, i int) bool { return i+1 < len(b) && b[i+1] != '"' }

// isNull reports whether the value at b[i] is null.
func isNull(b []byte, i int) bool { return len(b) >= i+4 && string(b[i:i+4]) == "null" }

// SkipValue returns the offset just past the JSON value starting at i.
func SkipValue(b []byte, i, depth int) (int, error) {
	if i >= len(b) {
		return i, &syntaxError{i, "expected a value"}
	}
	switch c := b[i]; {
	case c == '"':
		return skipString(b, i)
	case c == '{' || c == '[':
		if depth > maxNesting {
			return i, &syntaxError{i, "nested too deeply"}
		}
		return skipComposite(b, i, depth)
	case c == 't':
		return skipLiteral(b, i, "true")
	case c == 'f':
		return skipLiteral(b, i, "false")
	case c == 'n':
		return skipLiteral(b, i, "null")
	case c == '-' || (c >= '0' && c <= '9'):
		return skipNumber(b, i)
	}
	return i, &syntaxError{i, "expected a value"}
}

func skipComposite(b []byte, i, depth int) (int, error) {
	isObject := b[i] == '{'
	closer := byte(']')
	if isObject {
		closer = '}'
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == closer {
		return i + 1, nil
	}
	for {
		var err error
		if isObject {
			if i >= len(b) || b[i] != '"' {
				return i, &syntaxError{i, "expected a member name"}
			}
			if i, err = skipString(b, i); err != nil {
				return i, err
			}
			i = SkipSpace(b, i)
			if i >= len(b) || b[i] != ':' {
				return i, &syntaxError{i, "expected ':' after a member name"}
			}
			i = SkipSpace(b, i+1)
		}
		if i, err = SkipValue(b, i, depth+1); err != nil {
			return i, err
		}
		i = SkipSpace(b, i)
		if i >= len(b) {
			return i, &syntaxError{i, "unexpected end of input"}
		}
		switch b[i] {
		case ',':
			i = SkipSpace(b, i+1)
		case closer:
			return i + 1, nil
		default:
			return i, &syntaxError{i, "expected ',' or a closing bracket"}
		}
	}
}

// skipString returns the offset just past the string whose quote is at i. It
// checks escapes and UTF-8 as encoding/json does (invalid UTF-8 is accepted by
// encoding/json and replaced; we accept it too and leave it to the upstream).
func skipString(b []byte, i int) (int, error) {
	start := i
	i++
	for i < len(b) {
		// the common bytes of a string: eight at a time while none of
		// them ends the string, then one at a time
		for i+8 <= len(b) && plainWord(binary.LittleEndian.Uint64(b[i:])) {
			i += 8
		}
		for i < len(b) && plainStringByte[b[i]] {
			i++
		}
		if i >= len(b) {
			break
		}
		switch c := b[i]; {
		case c == '"':
			return i + 1, nil
		case c == '\\':
			if i+1 >= len(b) {
				return i, &syntaxError{i, "unterminated string"}
			}
			switch b[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				if i+6 > len(b) || !isHex4(b[i+2:i+6]) {
					return i, &syntaxError{i, "bad \\u escape"}
				}
				i += 6
			default:
				return i, &syntaxError{i, "bad escape"}
			}
		default: // c < 0x20
			return i, &syntaxError{i, "control character in a string"}
		}
	}
	return start, &syntaxError{start, "unterminated string"}
}

// plainWord reports whether none of the eight bytes in w is '"', '\\' or a
// control character (below 0x20), without a branch per byte: x-0x01…
// &^ x has a byte's high bit set only if some byte of x is zero (a borrow
// needs a zero byte to start from), so each test is exact for the word.
func plainWord(w uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote := w ^ (ones * '"')
	slash := w ^ (ones * '\\')
	special := (quote-ones)&^quote | (slash-ones)&^slash | (w-ones*0x20)&^w
	return special&highs == 0
}

// plainStringByte marks the bytes that may stand in a JSON string as they
// are: everything but '"', '\\' and control characters.
var plainStringByte = func() (t [256]bool) {
	for c := 0x20; c < 256; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F') {
			return false
		}
	}
	return true
}

func skipLiteral(b []byte, i int, lit string) (int, error) {
	if len(b)-i < len(lit) || string(b[i:i+len(lit)]) != lit {
		return i, &syntaxError{i, "bad literal"}
	}
	return i + len(lit), nil
}

// skipNumber follows the JSON number grammar exactly.
func skipNumber(b []byte, i int) (int, error) {
	start := i
	if b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && b[i] >= '1' && b[i] <= '9':
		i = SkipDigits(b, i)
	default:
		return start, &syntaxError{start, "bad number"}
	}
	if i < len(b) && b[i] == '.' {
		j := SkipDigits(b, i+1)
		if j == i+1 {
			return start, &syntaxError{start, "bad number"}
		}
		i = j
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		j := SkipDigits(b, i)
		if j == i {
			return start, &syntaxError{start, "bad number"}
		}
		i = j
	}
	return i, nil
}

func SkipDigits(b []byte, i int) int {
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
	}
	return i
}

// StringValue returns the decoded value of a member that holds a JSON string,
// and false when the member is absent or not a string. The common case, a
// string without escapes, returns a sub-slice of b without copying.
func StringValue(b []byte, m Member) ([]byte, bool) {
	if !m.OK() || b[m.Value.Start] != '"' {
		return nil, false
	}
	raw := b[m.Value.Start+1 : m.Value.End-1]
	for _, c := range raw {
		if c == '\\' {
			return appendUnquoted(nil, raw)
		}
	}
	return raw, true
}

// AppendStringValue appends the string member m of b, decoded, to dst:
// StringValue into a buffer the caller keeps. It reports false when m is
// not a string.
func AppendStringValue(dst, b []byte, m Member) ([]byte, bool) {
	if !m.OK() || b[m.Value.Start] != '"' {
		return dst, false
	}
	return appendUnquoted(dst, b[m.Value.Start+1:m.Value.End-1])
}

// appendUnquoted decodes the inside of a JSON string that skipString accepted.
func appendUnquoted(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch raw[i+1] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := rune(hex4(raw[i+2 : i+6]))
			i += 6
			if utf16IsHighSurrogate(r) && i+6 <= len(raw) && raw[i] == '\\' && raw[i+1] == 'u' {
				if lo := rune(hex4(raw[i+2 : i+6])); lo >= 0xDC00 && lo < 0xE000 {
					r = (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000
					i += 6
				}
			}
			if r >= 0xD800 && r < 0xE000 {
				r = utf8.RuneError
			}
			dst = utf8.AppendRune(dst, r)
			continue
		default: // '"', '\\', '/'
			dst = append(dst, raw[i+1])
		}
		i += 2
	}
	return dst, true
}

func utf16IsHighSurrogate(r rune) bool { return r >= 0xD800 && r < 0xDC00 }

func hex4(b []byte) int {
	n := 0
	for _, c := range b {
		n <<= 4
		switch {
		case c >= '0' && c <= '9':
			n |= int(c - '0')
		case c >= 'a' && c <= 'f':
			n |= int(c-'a') + 10
		default:
			n |= int(c-'A') + 10
		}
	}
	return n
}

// IsTrue reports whether the member holds the literal true.
func IsTrue(b []byte, m Member) bool {
	return m.OK() && string(b[m.Value.Start:m.Value.End]) == "true"
}

// Edit replaces b[start:end] with repl.
type Edit struct {
	Start, End int
	Repl       []byte
}

// ReplaceValue is the edit that sets a member's value to a JSON string.
func ReplaceValue(m Member, s string) Edit {
	return Edit{m.Value.Start, m.Value.End, AppendString(make([]byte, 0, len(s)+2), s)}
}

// RemoveMember is the edit that deletes a member and one adjacent comma, so
// the object stays valid whichever position the member had.
func RemoveMember(m Member) Edit {
	switch {
	case m.PrevComma >= 0:
		return Edit{m.PrevComma, m.Value.End, nil}
	case m.NextComma >= 0:
		return Edit{m.Key, m.NextComma + 1, nil}
	default:
		return Edit{m.Key, m.Value.End, nil}
	}
}

// ApplyEdits returns b with the edits applied; edits must not overlap. With no
// edits it returns b itself.
func ApplyEdits(b []byte, edits ...Edit) []byte {
	if len(edits) == 0 {
		return b
	}
	n := len(b)
	for _, e := range edits {
		n += len(e.Repl) - (e.End - e.Start)
	}
	return AppendEdits(make([]byte, 0, n), b, edits...)
}

// AppendEdits appends b with edits applied to dst: ApplyEdits into a
// buffer the caller reuses.
func AppendEdits(dst, b []byte, edits ...Edit) []byte {
	// a handful of edits at most: insertion sort keeps this allocation-free
	for i := 1; i < len(edits); i++ {
		for j := i; j > 0 && edits[j].Start < edits[j-1].Start; j-- {
			edits[j], edits[j-1] = edits[j-1], edits[j]
		}
	}
	prev := 0
	for _, e := range edits {
		dst = append(dst, b[prev:e.Start]...)
		dst = append(dst, e.Repl...)
		prev = e.End
	}
	return append(dst, b[prev:]...)
}

// AppendString appends s as a JSON string literal. Invalid UTF-8 becomes
// U+FFFD, as encoding/json does.
func AppendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	return append(AppendEscaped(dst, s), '"')
}

// AppendUnescaped appends the decoded form of a string's escaped bytes (the
// bytes between its quotes, as Str and FindStr give them). It is safe on
// any bytes: an escape cut short at the end is dropped, a lone surrogate
// becomes U+FFFD.
func AppendUnescaped(dst, raw []byte) []byte {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		if i+1 >= len(raw) {
			return dst
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			if i+4 >= len(raw) {
				return dst
			}
			r := rune(hex4(raw[i+1 : i+5]))
			i += 4
			if utf16IsHighSurrogate(r) && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := rune(hex4(raw[i+3 : i+7])); lo >= 0xDC00 && lo < 0xE000 {
					r = (r-0xD800)<<10 + (lo - 0xDC00) + 0x10000
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r) // a lone surrogate becomes U+FFFD
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
	}
	return dst
}

// AppendEscaped appends s as the inside of a JSON string (without its
// quotes), escaped as AppendString escapes it: a decoded name or a JSON
// text written into a string member as it is.
func AppendEscaped[T string | []byte](dst []byte, s T) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				dst = append(dst, '\\', c)
			case c == '\n':
				dst = append(dst, '\\', 'n')
			case c == '\r':
				dst = append(dst, '\\', 'r')
			case c == '\t':
				dst = append(dst, '\\', 't')
			case c < 0x20:
				dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			default:
				dst = append(dst, c)
			}
			i++
			continue
		}
		r, size := decodeRune(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, `\ufffd`...)
		} else {
			dst = append(dst, s[i:i+size]...)
		}
		i += size
	}
	return dst
}

func decodeRune[T string | []byte](s T) (rune, int) {
	switch v := any(s).(type) {
	case string:
		return utf8.DecodeRuneInString(v)
	case []byte:
		return utf8.DecodeRune(v)
	}
	return utf8.RuneError, 1
}

// ArrayItems returns the spans of the items of the JSON array at b[i:], at
// most max of them; more reports an array with more items than that, whose
// rest it did not read. It fails when b[i:] is not an array. It allocates
// only the spans: a caller's list of ten thousand items costs max spans,
// not ten thousand decoded values.
func ArrayItems(b []byte, i, max int) (items []Span, more bool, err error) {
	i = SkipSpace(b, i)
	if i >= len(b) || b[i] != '[' {
		return nil, false, &syntaxError{i, "expected an array"}
	}
	i = SkipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return nil, false, nil
	}
	for {
		end, err := SkipValue(b, i, 2)
		if err != nil {
			return nil, false, err
		}
		if len(items) == max {
			return items, true, nil
		}
		items = append(items, Span{i, end})
		i = SkipSpace(b, end)
		switch {
		case i >= len(b):
			return nil, false, &syntaxError{i, "unexpected end of input in an array"}
		case b[i] == ',':
			i = SkipSpace(b, i+1)
		case b[i] == ']':
			return items, false, nil
		default:
			return nil, false, &syntaxError{i, "expected ',' or ']'"}
		}
	}
}
