package translate

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// A stream is translated event by event, never buffered: each upstream
// event is decoded (stream_chat.go, stream_messages.go,
// stream_responses.go) into the neutral steps below, which the client's
// encoder writes at once in its own grammar:
//
//	start   the answer's id, model and creation time (begin)
//	open    a block: text, thinking, or a tool call with its id and name
//	delta   a piece of a block: text, thinking, a signature, tool arguments
//	close   a block is whole
//	finish  the answer is whole: its Stop and Usage (the decoders keep both)
//	fail    an in-band error; nothing follows it
//
// String values travel as they were escaped upstream (the bytes between
// the quotes), so the hot path copies bytes and allocates nothing. The one
// copy kept is a block's text or arguments for a Responses client, whose
// closing events repeat them whole; it lives in the Stream's blocks, which
// Reset keeps for the next stream, and is bounded (stream_bound.go).

// StreamOptions are what the client's request said that its stream's shape depends on.
type StreamOptions struct {
	IncludeUsage bool     // Chat clients: stream_options.include_usage was asked: one last chunk with choices [] and usage
	CustomTools  []string // Responses clients: names of tools the client declared as `custom` (freeform), sent upstream as function tools with one string parameter "input": their calls go back as custom_tool_call items with input = the argument "input"
	Model        string   // the model sent, for upstream APIs whose streams do not name it (Converse)
	// Namespaces are, for Responses clients, the flattened function names
	// of the tools of the request's namespaces (Codex's MCP servers), each
	// with its namespace and name (Request.Namespaces): Codex runs a call only
	// when it names both, so a call of a flattened name goes back as
	// {namespace, name}.
	Namespaces map[string][2]string
}

// Stream translates one event stream from the engine's API into the client's, event by event.
type Stream struct {
	from, to api.API
	opt      StreamOptions

	begun     bool   // the upstream's start was seen, or assumed
	announced bool   // the client was told the answer began (role chunk, message_start, response.created)
	finished  bool   // the client was told the answer is whole
	dead      bool   // an error was sent: nothing more goes out
	stop      Stop   // why the upstream said it ended, once it said so
	stopSeq   []byte // the stop string it matched, as escaped upstream, when it named one (stop.go)
	usage     api.Usage
	created   int64
	seq       int // a Responses client's sequence_number
	nBlocks   int // blocks opened: a Messages content index, a Responses output_index
	nTools    int // tool blocks opened: a Chat tool call's index
	chatCalls int // a Chat upstream's tool calls: one past the highest index seen

	kept    int   // bytes kept to repeat in closing events (stream_bound.go)
	evStart int   // where the current upstream event's output starts in dst
	err     error // why the stream was cut past a bound

	id      []byte // the answer's id without its API's prefix, safe to write unescaped
	model   []byte // the model, as escaped upstream
	token   []byte // random, for ids the upstream did not give
	head    []byte // a Chat client's chunk up to its choices
	blocks  []stBlock
	scratch []byte
}

// stKind is what a block holds.
type stKind uint8

const (
	stText stKind = iota + 1
	stTool
	stThinking
)

// stPiece is what a delta carries.
type stPiece uint8

const (
	stTextPiece stPiece = iota + 1
	stArgs
	stThought
	stSignature
)

func (p stPiece) kind() stKind {
	switch p {
	case stArgs:
		return stTool
	case stThought, stSignature:
		return stThinking
	}
	return stText
}

// stBlock is one block of the answer. Its byte slices keep their capacity
// across Reset, so a pooled Stream stops allocating once warm.
type stBlock struct {
	kind   stKind
	key    int  // the upstream's name for it: a content index, an output_index, a tool call index
	open   bool // opened and not yet closed
	custom bool // a Responses client's custom tool call
	part   bool // a Responses client was told of its content or summary part
	idx    int  // the client's index: content index, output_index or tool call index
	held   int  // bytes of it counted in the Stream's kept
	id     []byte
	name   []byte
	ns     []byte // a Responses client's namespace of a tool call whose name was flattened (name is then the plain one), JSON-escaped
	text   []byte // text, thinking or arguments so far (Responses clients only)
	sig    []byte // a thinking block's signature (Responses clients only)
	input  []byte // a custom tool call's input, a JSON string
}

// NewStream returns a Stream translating an upstream in from's grammar for a client of to's.
func NewStream(from, to api.API, o StreamOptions) *Stream {
	s := &Stream{}
	s.Reset(from, to, o)
	return s
}

// Reset makes s ready for another stream, keeping its buffers (the gateway pools Streams).
func (s *Stream) Reset(from, to api.API, o StreamOptions) {
	*s = Stream{
		from: from, to: to, opt: o,
		id: s.id[:0], model: s.model[:0], token: s.token[:0], head: s.head[:0], stopSeq: s.stopSeq[:0],
		blocks: s.blocks[:0], scratch: s.scratch[:0],
	}
}

// End appends what the client's stream still needs when the upstream's ended cleanly (e.g. Chat's [DONE] was seen and a Messages client still needs message_delta + message_stop). It appends nothing for an upstream stream that never said the answer was whole: the gateway cuts that one honestly.
func (s *Stream) End(dst []byte) []byte {
	if s.from == s.to || s.dead || s.finished || s.stop == StopNone {
		return dst
	}
	return s.finish(dst)
}

// stComments copies the event's comment lines (keep-alives, an engine's
// loading notes) as an event of their own.
func stComments(dst, ev []byte) []byte {
	found := false
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i+1], ev[i+1:]
		} else {
			ev = nil
		}
		if line[0] != ':' {
			continue
		}
		if i := bytes.IndexAny(line, "\r\n"); i >= 0 {
			line = line[:i] // a lone CR ends a line for the client: it must not start one
		}
		dst = append(dst, line...)
		dst = append(dst, '\n')
		found = true
	}
	if found {
		dst = append(dst, '\n')
	}
	return dst
}

// begin is the start step: the answer's id (as escaped upstream), model
// and creation time (0: now). Only the first call counts.
func (s *Stream) begin(dst, id, model []byte, created int64) []byte {
	if s.begun {
		return dst
	}
	s.begun = true
	if !s.keep(nil, len(id)+len(model)+stResponseOverhead) {
		return dst
	}
	s.token = strconv.AppendUint(s.token[:0], rand.Uint64(), 36)
	s.id = stIDCore(s.id[:0], id)
	if len(s.id) == 0 {
		s.id = append(s.id, s.token...)
	}
	s.model = append(s.model[:0], model...)
	s.created = created
	if created <= 0 {
		s.created = time.Now().Unix()
	}
	if s.to == api.Chat {
		return s.chatAnnounce(dst)
	}
	// a Messages or Responses client hears of it with its first block
	// (messagesAnnounce, respAnnounce)
	return dst
}

// stIDCore appends id without its API's prefix, every byte outside
// [A-Za-z0-9_-] replaced by '_', so that it can be written as is after the
// client's prefix.
func stIDCore(dst, id []byte) []byte {
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_"} {
		if bytes.HasPrefix(id, []byte(p)) {
			id = id[len(p):]
			break
		}
	}
	return stSanitize(dst, id)
}

// stSanitize appends id with every byte outside [A-Za-z0-9_-] replaced by
// '_': what Messages accepts as a tool_use id, and what the request side
// does to the same ids, so a call and its result still pair.
func stSanitize(dst, id []byte) []byte {
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// stEscape appends v as the inside of a JSON string: the names from
// Request.Namespaces come decoded, and the stream writes names as escaped.
func stEscape(dst []byte, v string) []byte {
	const hex = "0123456789abcdef"
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// find returns the open block the upstream calls key, or nil.
func (s *Stream) find(key int) *stBlock {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		if b := &s.blocks[i]; b.open && b.key == key {
			return b
		}
	}
	return nil
}

// open is the open step: a block of kind, with a tool call's id and name
// (as escaped upstream; an id may be missing).
func (s *Stream) open(dst []byte, kind stKind, key int, id, name []byte) []byte {
	dst = s.begin(dst, nil, nil, 0)
	if s.finished || s.dead || !s.roomForBlock() || !s.room(dst, stItemOverhead+len(id)+len(name)) {
		return dst
	}
	n := len(s.blocks)
	if n < cap(s.blocks) {
		s.blocks = s.blocks[:n+1]
	} else {
		s.blocks = append(s.blocks, stBlock{})
	}
	b := &s.blocks[n]
	*b = stBlock{kind: kind, key: key, open: true, idx: s.nBlocks,
		id: stReuse(b.id), name: stReuse(b.name), ns: stReuse(b.ns), text: b.text[:0], sig: b.sig[:0], input: b.input[:0]}
	s.nBlocks++
	if kind == stTool {
		b.idx = s.toolIndex()
		s.nTools++
		b.name = append(b.name, name...)
		b.id = s.toolID(b.id, id)
		if s.to == api.Responses {
			b.custom = s.isCustom(name)
			// Looked up once per call, not per delta; the conversion in
			// the index does not allocate.
			if nn, ok := s.opt.Namespaces[string(name)]; ok {
				b.ns = stEscape(b.ns, nn[0])
				b.name = stEscape(b.name[:0], nn[1])
			}
		}
	}
	if !s.keep(b, stItemOverhead+len(b.id)+len(b.name)+len(b.ns)) {
		s.blocks = s.blocks[:n]
		return dst
	}
	switch s.to {
	case api.Chat:
		return s.chatOpen(dst, b)
	case api.Messages:
		return s.messagesOpen(dst, b)
	}
	return s.respOpen(dst, b)
}

// toolIndex is the client's index of the next tool block: Chat counts tool
// calls only (a text block before them must not shift it), the others
// count every block.
func (s *Stream) toolIndex() int {
	if s.to == api.Chat {
		return s.nTools
	}
	return s.nBlocks - 1
}

// toolID appends the client's id for a tool call the upstream named id:
// sanitized for Messages, synthesized when missing.
func (s *Stream) toolID(dst, id []byte) []byte {
	if len(id) == 0 {
		prefix := "call_"
		if s.to == api.Messages {
			prefix = "toolu_"
		}
		dst = append(append(dst, prefix...), s.token...)
		return strconv.AppendInt(append(dst, '_'), int64(s.nTools), 10)
	}
	if s.to != api.Messages {
		return append(dst, id...)
	}
	if bytes.IndexByte(id, '\\') >= 0 {
		// escaped upstream: the request side sanitizes the decoded id
		s.scratch = stUnescape(s.scratch[:0], id)
		id = s.scratch
	}
	return stSanitize(dst, id)
}

func (s *Stream) isCustom(name []byte) bool {
	for _, c := range s.opt.CustomTools {
		if string(name) == c {
			return true
		}
	}
	return false
}

// delta is the delta step. A text or thinking piece opens its block if
// the upstream did not (Chat never does), so no block is opened for
// nothing; tool arguments for no open tool call are dropped.
func (s *Stream) delta(dst []byte, p stPiece, key int, text []byte) []byte {
	if len(text) == 0 || s.finished || s.dead || !s.room(dst, len(text)) {
		return dst
	}
	b := s.find(key)
	if b == nil {
		if p == stArgs {
			return dst
		}
		dst = s.open(dst, p.kind(), key, nil, nil)
		if s.dead {
			return dst
		}
		b = &s.blocks[len(s.blocks)-1]
	}
	if b.kind != p.kind() {
		return dst
	}
	switch s.to {
	case api.Chat:
		return s.chatDelta(dst, b, p, text)
	case api.Messages:
		return s.messagesDelta(dst, b, p, text)
	}
	return s.respDelta(dst, b, p, text)
}

// closeKey is the close step for the open block the upstream calls key.
func (s *Stream) closeKey(dst []byte, key int) []byte {
	if b := s.find(key); b != nil {
		return s.close(dst, b)
	}
	return dst
}

func (s *Stream) close(dst []byte, b *stBlock) []byte {
	b.open = false
	if s.dead {
		return dst
	}
	switch s.to {
	case api.Messages:
		return s.messagesClose(dst, b)
	case api.Responses:
		return s.respClose(dst, b)
	}
	return dst // Chat has no word for it
}

// finish is the finish step: every open block closes, in the order they
// opened, then the client hears why the answer ended and what it cost.
func (s *Stream) finish(dst []byte) []byte {
	if s.finished || s.dead {
		return dst
	}
	dst = s.begin(dst, nil, nil, 0)
	for i := range s.blocks {
		if s.blocks[i].open {
			dst = s.close(dst, &s.blocks[i])
		}
	}
	s.finished = true
	if s.nTools > 0 && (s.stop == StopNone || s.stop == StopEnd) {
		s.stop = StopTool // engines that say "stop" after calling tools
	}
	s.stop = s.stop.matched(len(s.stopSeq) > 0)
	switch s.to {
	case api.Chat:
		return s.chatFinish(dst)
	case api.Messages:
		return s.messagesFinish(dst)
	}
	return s.respFinish(dst)
}

// fail is the fail step: typ and code are JSON strings ("" for none), msg
// is a JSON value as the upstream wrote it.
func (s *Stream) fail(dst, typ, code, msg []byte) []byte {
	if s.finished || s.dead {
		return dst
	}
	s.dead = true
	if len(msg) == 0 || msg[0] != '"' {
		msg = []byte(`"the engine failed"`)
	}
	switch s.to {
	case api.Chat:
		return s.chatFail(dst, typ, code, msg)
	case api.Messages:
		return s.messagesFail(dst, typ, code, msg)
	}
	return s.respFail(dst, typ, code, msg)
}

// stValidObject reports whether data is one JSON object and nothing else.
func stValidObject(data []byte) bool {
	if len(data) == 0 || data[0] != '{' {
		return false
	}
	end, err := jsonmember.SkipValue(data, 0, 1)
	return err == nil && jsonmember.SkipSpace(data, end) == len(data)
}

// matchedStop keeps the stop string an engine named (escaped, as the
// stream carries strings), within maxStopSequence.
func (s *Stream) matchedStop(seq []byte) {
	if len(seq) > 0 && len(seq) <= maxStopSequence {
		s.stopSeq = append(s.stopSeq[:0], seq...)
	}
}

// readUsage takes in the usage object of API a at data[v]: a later report
// of the same answer replaces what an earlier one said (api.Usage.Update).
func (s *Stream) readUsage(a api.API, data []byte, v int) {
	if u, ok := a.ReadUsage(data, v); ok {
		s.usage = s.usage.Update(u)
	}
}
