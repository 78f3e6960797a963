package grammar

import (
	"sync"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Memo is what a stream's last events teach the scan of the next, in two
// ways, the cheaper first:
//
//   - the template: the last event and the one string value the event
//     before it differed in. A chat stream's chunks are the last chunk
//     but for their delta's text (OpenAI, vLLM, llama.cpp, ollama;
//     Anthropic's text_delta events too): an event that is the last one
//     with that string changed needs the string checked and the bytes
//     around it compared, and is what the last one was (the offsets after
//     the string moved by its change in length). 60 ns where a whole scan
//     takes 360 (BenchmarkScanMemo, BenchmarkScanEvent).
//   - the resume: the bytes its chunks repeat before their first object or
//     array member, and what those bytes held (jsonmember.Resume): the
//     scan of the rest costs 200 ns. Streams that do not repeat themselves
//     are scanned whole, as without a memo.
//
// A Responses stream numbers its events (sequence_number): they differ in
// a number too, and take the resume. Only a committed stream's events use
// the template: before the commit point a chunk's text says whether it is
// content (jsonmember.FirstAnswer).
type Memo struct {
	prefix []byte
	resume jsonmember.Resume

	last []byte // the last event scanned whole: what the next one whole is compared with
	// the template: an event that is head, a string, then tail is what
	// fields says, its offsets past the string moved by the string's length
	// less end's (the offset past the string in the event learnt from)
	head, tail []byte
	fields     jsonmember.Fields
	end        int
	// failed counts the whole scans in a row that taught no template: a
	// stream whose events differ in more than a string (a Responses
	// stream numbers them) tries one in eight, not each
	failed int
}

// maxMemoPrefix bounds the bytes a memo keeps for the resume, and
// maxTemplate for the template: a chunk longer is resumed or scanned whole.
const (
	maxMemoPrefix = 256
	maxTemplate   = 1024
)

// scan scans data into f: by the template when data fits it, else from
// the resume's point when data repeats the last event's bytes up to it,
// else whole. A nil memo scans whole.
func (m *Memo) scan(f *jsonmember.Fields, data []byte, mode jsonmember.Mode) error {
	if m == nil {
		return f.Scan(data, mode)
	}
	if mode == jsonmember.Answer && m.fits(f, data) {
		return nil
	}
	var err error
	if m.resume.Resumes(data, m.prefix, mode) {
		err = f.ScanFrom(data, &m.resume)
	} else {
		err = f.ScanNoting(data, mode, &m.resume)
		if at := m.resume.At; at > 0 && at < maxMemoPrefix {
			m.prefix = append(m.prefix[:0], data[:at+1]...)
		} else {
			m.resume.At, m.prefix = 0, m.prefix[:0]
		}
	}
	m.head, m.tail = m.head[:0], m.tail[:0]
	if err == nil && mode == jsonmember.Answer && len(data) <= maxTemplate {
		if m.failed < 3 || m.failed%8 == 0 {
			m.learn(f, data)
		}
		if len(m.head) == 0 {
			m.failed++
		} else {
			m.failed = 0
		}
		m.last = append(m.last[:0], data...)
	} else {
		m.last = m.last[:0]
	}
	return err
}

// fits reports whether data is the template's head, a valid string and
// its tail, and then sets f to what a scan of data finds.
func (m *Memo) fits(f *jsonmember.Fields, data []byte) bool {
	o := len(m.head) - 1
	if o <= 0 || len(data) <= o || string(data[:o+1]) != string(m.head) {
		return false
	}
	end, err := jsonmember.SkipString(data, o)
	if err != nil || string(data[end:]) != string(m.tail) {
		return false
	}
	*f = m.fields
	if end != m.end {
		f.Shift(m.end, end-m.end)
	}
	return true
}

// learn makes a template of data, scanned whole into f, when it differs
// from the last event scanned whole in one string, and that string is a
// value (not a key) that no member the scan reads holds.
func (m *Memo) learn(f *jsonmember.Fields, data []byte) {
	last := m.last
	if len(last) == 0 {
		return
	}
	p := 0
	for p < len(data) && p < len(last) && data[p] == last[p] {
		p++
	}
	from := 0 // where the search for the string that holds p starts: outside strings
	if at := m.resume.At; at > 0 && at < p && at < len(m.prefix) && string(data[:at+1]) == string(m.prefix) {
		from = at // a member's key begins there
	}
	o := jsonmember.StringAt(data, from, p)
	if o <= 0 || f.NotesAt(o) {
		return
	}
	e, err := jsonmember.SkipString(data, o)
	le, lerr := jsonmember.SkipString(last, o)
	if err != nil || lerr != nil || string(data[e:]) != string(last[le:]) {
		return
	}
	if k := jsonmember.SkipSpace(data, e); k >= len(data) || data[k] == ':' {
		return
	}
	m.head = append(m.head[:0], data[:o+1]...)
	m.tail = append(m.tail[:0], data[e:]...)
	m.fields, m.end = *f, e
}

// memos are pooled: a stream holds one from its first event relayed after
// the commit point to its end (about 2 KB; a stream waiting for its engine
// none). A memo another stream used is safe to take: its template stands
// for an event only one that has its bytes but for a string value.
var memos = sync.Pool{New: func() any { return new(Memo) }}

// GetMemo takes a memo from the pool.
func GetMemo() *Memo { return memos.Get().(*Memo) }

// Release gives m (which may be nil) back to the pool, and returns nil.
func (m *Memo) Release() *Memo {
	if m != nil {
		memos.Put(m)
	}
	return nil
}
