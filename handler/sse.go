package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"bytes"
	"encoding/json"
	"errors"
	"io"
	"sync"
)

// An event stream is relayed event by event: the gateway must know where an
// event ends to tell a clean end from a cut, to hold back everything before
// the first content event (the commit point), and to drop a `data:` line
// that is not JSON instead of passing garbage to the client's SDK.

// maxEventSize bounds one event; a larger one is a broken stream.
const maxEventSize = 1 << 20

// The read buffer starts small, so thousands of slow streams stay cheap, and
// doubles (up to fastReadSize) each time a read fills it: a fast stream is
// then read, written and flushed in as few calls as reverse_proxy's 32 KiB
// copy buffer needs.
const (
	firstReadSize = 4 << 10
	fastReadSize  = 32 << 10
)

var (
	errCutMidEvent   = errors.New("the stream ended in the middle of an event")
	errEventTooLarge = errors.New("an event larger than 1 MiB")
)

// sseReader splits an upstream body into events. Its buffer starts small
// and grows only for large events, so thousands of open streams stay cheap.
type sseReader struct {
	r          io.Reader
	buf        []byte
	start, end int  // unread bytes are buf[start:end]
	pend       int  // length of the complete event at start, once found; -1 if not yet
	filled     bool // the last read filled the buffer
	err        error
}

func newSSEReader(r io.Reader) *sseReader {
	return &sseReader{r: r, buf: getBuf(firstReadSize), pend: -1}
}

// Read buffers of 4, 8, 16 and 32 KiB are pooled: a busy gateway reuses
// them instead of making garbage for every stream.
var bufPools [4]sync.Pool

func poolIndex(size int) int {
	switch size {
	case 4 << 10:
		return 0
	case 8 << 10:
		return 1
	case 16 << 10:
		return 2
	case 32 << 10:
		return 3
	}
	return -1
}

func getBuf(size int) []byte {
	if i := poolIndex(size); i >= 0 {
		if b, ok := bufPools[i].Get().(*[]byte); ok {
			return *b
		}
	}
	return make([]byte, size)
}

func putBuf(b []byte) {
	if i := poolIndex(len(b)); i >= 0 {
		bufPools[i].Put(&b)
	}
}

// release gives the reader's buffer back; no event it returned may be used
// afterwards.
func (s *sseReader) release() {
	if s.buf != nil {
		putBuf(s.buf)
		s.buf, s.start, s.end, s.pend = nil, 0, 0, -1
	}
}

// eventEnd returns the offset just past the blank line ending the first
// event in b, or -1. Lines end in \n or \r\n.
func eventEnd(b []byte) int {
	for i := 0; ; {
		j := bytes.IndexByte(b[i:], '\n')
		if j < 0 {
			return -1
		}
		i += j + 1
		switch {
		case i < len(b) && b[i] == '\n':
			return i + 1
		case i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n':
			return i + 2
		}
	}
}

// buffered reports whether a whole event is already read, so that the next
// call to next will not block.
func (s *sseReader) buffered() bool {
	if s.pend < 0 {
		s.pend = eventEnd(s.buf[s.start:s.end])
	}
	return s.pend >= 0
}

// next returns the next event including its terminating blank line; the
// slice is valid until the following call. A body that ends at an event
// boundary gives io.EOF; one that ends inside an event gives errCutMidEvent;
// a read error is returned as it is.
func (s *sseReader) next() ([]byte, error) {
	for {
		if s.buffered() {
			ev := s.buf[s.start : s.start+s.pend]
			s.start += s.pend
			s.pend = -1
			return ev, nil
		}
		if s.err != nil {
			if s.err == io.EOF && len(bytes.TrimSpace(s.buf[s.start:s.end])) > 0 {
				return nil, errCutMidEvent
			}
			return nil, s.err
		}
		s.fill()
	}
}

// fill reads more of the body, compacting or growing the buffer first.
func (s *sseReader) fill() {
	if s.start == s.end {
		s.start, s.end = 0, 0
	}
	if s.filled && len(s.buf) < fastReadSize {
		// the last read filled the buffer: this stream is fast
		nb := getBuf(2 * len(s.buf))
		s.end = copy(nb, s.buf[s.start:s.end])
		putBuf(s.buf)
		s.start, s.buf, s.filled = 0, nb, false
	}
	if s.end == len(s.buf) {
		if s.start > 0 {
			s.end = copy(s.buf, s.buf[s.start:s.end])
			s.start = 0
		} else if len(s.buf) >= maxEventSize {
			s.err = errEventTooLarge
			return
		} else {
			nb := getBuf(min(2*len(s.buf), maxEventSize))
			s.end = copy(nb, s.buf[s.start:s.end])
			putBuf(s.buf)
			s.start, s.buf = 0, nb
		}
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.filled = n > 0 && s.end+n == len(s.buf)
	s.end += n
	if err != nil {
		s.err = err
	}
}

// eventKind is what an event means to the gateway.
type eventKind int

const (
	eventComment   eventKind = iota // only comments or no data: keep-alives
	eventPreamble                   // data that is not content yet: a role-only first chunk
	eventContent                    // data the client's answer consists of
	eventDone                       // data: [DONE]
	eventError                      // data: {"error": …} from the upstream
	eventMalformed                  // a data payload that is not JSON
)

// dataOf returns the event's data payload (data lines joined by \n) and
// whether it has one. A single data line, the usual case, is returned
// without copying.
func dataOf(ev []byte) ([]byte, bool) {
	var data []byte
	found, joined := false, false
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimSuffix(line, []byte{'\r'})
		if !bytes.HasPrefix(line, []byte("data:")) {
			continue
		}
		v := bytes.TrimPrefix(line[5:], []byte{' '})
		switch {
		case !found:
			data, found = v, true
		case !joined:
			data = append(append(append([]byte(nil), data...), '\n'), v...)
			joined = true
		default:
			data = append(append(data, '\n'), v...)
		}
	}
	return data, found
}

// classifyEvent says what an event is. With probe, a data event is decoded
// far enough to tell a role-only chunk from content (only done before the
// commit point, for a handful of events); without, every valid data event
// is content and only validity is checked.
func classifyEvent(ev []byte, probe bool) eventKind {
	data, ok := dataOf(ev)
	if !ok {
		return eventComment
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return eventDone
	}
	if len(data) == 0 {
		return eventComment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventMalformed
	}
	if !probe {
		return eventContent
	}
	return probeChunk(data)
}

// classifyAnthropic says what an event of Anthropic's Messages API stream
// is, before commit. The commit point is the first content_block_delta
// (text, thinking or tool input): message_start, ping and the start and
// stop of a block say nothing yet, so a failure before the first delta
// may still go elsewhere; an error event is an error.
func classifyAnthropic(ev []byte) eventKind {
	data, ok := dataOf(ev)
	if !ok {
		return eventComment
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return eventComment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventMalformed
	}
	var t struct {
		Type string `json:"type"`
	}
	if data[0] != '{' || json.Unmarshal(data, &t) != nil {
		return eventContent // valid JSON of another shape: not ours to judge
	}
	switch t.Type {
	case "message_start", "ping", "content_block_start", "content_block_stop":
		return eventPreamble
	case "error":
		return eventError
	}
	return eventContent
}

// inspectEvent is classifyEvent for a committed stream, which also wants
// the token usage an event may carry: one validating scan of an object's
// top level finds both, so counting tokens costs no second pass.
func inspectEvent(ev []byte) (eventInfo, error) {
	data, ok := dataOf(ev)
	if !ok {
		return eventInfo{kind: eventComment}, nil
	}
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "[DONE]":
		return eventInfo{kind: eventDone}, nil
	case len(data) == 0:
		return eventInfo{kind: eventComment}, nil
	case data[0] == '{':
		f, err := jsonmember.ScanAnswer(data)
		if err != nil {
			return eventInfo{kind: eventMalformed}, err
		}
		u, has := usageIn(data, f)
		return eventInfo{kind: eventContent, usage: u, hasUsage: has, finished: f.Finished}, nil
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventInfo{kind: eventMalformed}, err
	}
	return eventInfo{kind: eventContent}, nil
}

// eventInfo is what the relay learns of one event in one scan.
type eventInfo struct {
	kind     eventKind
	usage    Usage
	hasUsage bool
	finished bool // a choice got its finish_reason
}

// chunkProbe decodes just enough of a streamed chunk to see whether it
// carries content.
type chunkProbe struct {
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Delta *struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			Refusal          *string         `json:"refusal"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
			FunctionCall     json.RawMessage `json:"function_call"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func probeChunk(data []byte) eventKind {
	// only a chunk that names a role can be role-only, and only one that
	// says "error" an error: anything else is content without decoding
	if !bytes.Contains(data, []byte(`"role"`)) && !bytes.Contains(data, []byte(`"error"`)) {
		return eventContent
	}
	var p chunkProbe
	if data[0] != '{' || json.Unmarshal(data, &p) != nil {
		return eventContent // valid JSON of another shape: not ours to judge
	}
	if len(p.Error) > 0 && string(p.Error) != "null" {
		return eventError
	}
	if p.Choices == nil {
		return eventContent // another API's event, usage, …
	}
	for _, c := range p.Choices {
		if c.FinishReason != nil || (c.Text != nil && *c.Text != "") {
			return eventContent
		}
		d := c.Delta
		if d == nil {
			continue
		}
		if nonEmpty(d.Content) || nonEmpty(d.ReasoningContent) || nonEmpty(d.Reasoning) || nonEmpty(d.Refusal) ||
			isSet(d.ToolCalls) || isSet(d.FunctionCall) {
			return eventContent
		}
	}
	if len(p.Choices) == 0 {
		return eventContent // a usage-only chunk ends an answer
	}
	return eventPreamble
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
