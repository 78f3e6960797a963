package translate

import (
	"bytes"
	"math/rand/v2"
	"strconv"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// A stream is translated event by event, never buffered: each upstream
// event is decoded by its API's codec (Codec.Decode, in <api>_stream.go)
// into the neutral steps below, which the client's writer (client, in the
// client API's <api>_stream.go) writes at once in its own grammar:
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
// copy kept is a block's text, arguments or signature for a Responses
// client, whose closing events repeat them whole; it lives in the Stream's
// blocks, which Reset keeps for the next stream, and is bounded
// (stream_bound.go).

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

// A client writes the neutral steps in its API's grammar: each client
// API's is in its codec (chat_stream.go, messages_stream.go,
// responses_stream.go), with the few rules of its ids and indexes that
// the steps ask it.
type client struct {
	// announce tells the client the answer began, at the start step; nil
	// when it hears of it with the first block (Messages' message_start,
	// the Responses API's response.created: an engine that fails before
	// its first token then answers with an error alone).
	announce func(s *Stream, dst []byte) []byte
	open     func(s *Stream, dst []byte, b *streamBlock) []byte
	delta    func(s *Stream, dst []byte, b *streamBlock, p Piece, text []byte) []byte
	close    func(s *Stream, dst []byte, b *streamBlock) []byte // nil: the API has no word for it
	finish   func(s *Stream, dst []byte) []byte
	fail     func(s *Stream, dst, typ, code, msg []byte) []byte

	toolPrefix string // of a tool call id the engine gave none: "call_", "toolu_"
	// sanitizesIDs: tool call ids must match ^[a-zA-Z0-9_-]+$ (Messages)
	sanitizesIDs bool
	// countsTools: a tool call's index counts tool calls only, not the
	// blocks before them (Chat's tool_calls[].index)
	countsTools bool
	// keepsBlocks: closing events repeat a block whole, so closed blocks
	// are kept (the Responses API's …done events), and tools are named
	// as the client declared them (custom, namespaces)
	keepsBlocks bool
}

// Stream translates one event stream from the engine's API into the client's, event by event.
type Stream struct {
	from, to api.API
	opt      StreamOptions
	decode   func(s *Stream, dst, ev, data []byte) []byte // the engine API's decoder
	cl       *client                                      // the client API's writer

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
	calls     int // a Chat upstream's tool calls: one past the highest index seen; a Gemini one's so far (NextCall)

	kept    int   // bytes kept to repeat in closing events (stream_bound.go)
	evStart int   // where the current upstream event's output starts in dst
	err     error // why the stream was cut past a bound

	id      []byte // the answer's id without its API's prefix, safe to write unescaped
	model   []byte // the model, as escaped upstream
	token   []byte // random, for ids the upstream did not give
	head    []byte // a Chat client's chunk up to its choices
	blocks  []streamBlock
	scratch []byte
	// buf is a decoder's (Buffer), which the steps never write
	buf      []byte
	reqModel []byte // the request's model, escaped (RequestModel)
}

// A stream's block holds text, a tool call or thinking: a BlockKind, as
// an Answer's blocks do (a refusal and redacted thinking have no piece of
// their own in a stream).

// KeyText and KeyThinking are the keys of a running text block and a
// running thinking block, for an engine whose stream has no blocks of its
// own (Chat's, Gemini's): its text and its reasoning are each one running
// block, and its tool calls are keyed by their own index (>= 0).
const (
	KeyText     = -1
	KeyThinking = -2
)

// Piece is what a delta carries.
type Piece uint8

const (
	PieceText Piece = iota + 1
	PieceArgs
	PieceThinking
	PieceSignature
)

func (p Piece) kind() BlockKind {
	switch p {
	case PieceArgs:
		return BlockTool
	case PieceThinking, PieceSignature:
		return BlockThinking
	}
	return BlockText
}

// streamBlock is one block of the answer. Its byte slices keep their capacity
// across Reset, so a Stream reused for stream after stream stops allocating
// once warm (the benchmarks reuse one; the gateway makes one per answer).
type streamBlock struct {
	kind   BlockKind
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

// Reset makes s ready for another stream, keeping its buffers for a caller
// that reuses a Stream (the benchmarks and tests do; the gateway makes a
// new one per answer, NewStream).
func (s *Stream) Reset(from, to api.API, o StreamOptions) {
	var dec func(*Stream, []byte, []byte, []byte) []byte
	if c := codecOf(from); c != nil {
		dec = c.Decode
	}
	var cl *client
	if c := codecOf(to); c != nil {
		cl = c.client
	}
	*s = Stream{
		from: from, to: to, opt: o, decode: dec, cl: cl,
		id: s.id[:0], model: s.model[:0], token: s.token[:0], head: s.head[:0], stopSeq: s.stopSeq[:0],
		blocks: s.blocks[:0], scratch: s.scratch[:0], buf: s.buf[:0], reqModel: s.reqModel[:0],
	}
}

// End appends what the client's stream still needs when the upstream's ended cleanly (e.g. Chat's [DONE] was seen and a Messages client still needs message_delta + message_stop). It appends nothing for an upstream stream that never said the answer was whole: the gateway cuts that one honestly.
func (s *Stream) End(dst []byte) []byte {
	if s.from == s.to || s.dead || s.finished || s.stop == StopNone {
		return dst
	}
	return s.Finish(dst)
}

// eventComments copies the event's comment lines (keep-alives, an engine's
// loading notes) as an event of their own.
func eventComments(dst, ev []byte) []byte {
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

// Begin is the start step: the answer's id (as escaped upstream), model
// and creation time (0: now). Only the first call counts. Open and Finish
// call it first, so an answer whose start event never came (a Messages
// stream without message_start, a Responses one without
// response.created) is begun all the same, with an id of its own; Fail
// does not, so an engine that fails first is answered with the error alone.
func (s *Stream) Begin(dst, id, model []byte, created int64) []byte {
	if s.begun {
		return dst
	}
	s.begun = true
	if !s.keep(nil, len(id)+len(model)+responseOverhead) {
		return dst
	}
	s.token = strconv.AppendUint(s.token[:0], rand.Uint64(), 36)
	s.id = idCore(s.id[:0], id)
	if len(s.id) == 0 {
		s.id = append(s.id, s.token...)
	}
	s.model = append(s.model[:0], model...)
	s.created = created
	if created <= 0 {
		s.created = time.Now().Unix()
	}
	if s.cl.announce != nil {
		return s.cl.announce(s, dst)
	}
	return dst
}

// idCore appends id without its API's prefix, every byte outside
// [A-Za-z0-9_-] replaced by '_', so that it can be written as is after the
// client's prefix.
func idCore(dst, id []byte) []byte {
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_"} {
		if bytes.HasPrefix(id, []byte(p)) {
			id = id[len(p):]
			break
		}
	}
	return appendSanitized(dst, id)
}

// appendSanitized appends id with every byte outside [A-Za-z0-9_-] replaced by
// '_': what Messages accepts as a tool_use id, and what the request side
// does to the same ids, so a call and its result still pair.
func appendSanitized(dst, id []byte) []byte {
	for _, c := range id {
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '_' || c == '-') {
			c = '_'
		}
		dst = append(dst, c)
	}
	return dst
}

// find returns the open block the upstream calls key, or nil.
func (s *Stream) find(key int) *streamBlock {
	for i := len(s.blocks) - 1; i >= 0; i-- {
		if b := &s.blocks[i]; b.open && b.key == key {
			return b
		}
	}
	return nil
}

// Open is the open step: a block of kind, with a tool call's id and name
// (as escaped upstream; an id may be missing), under key, the upstream's
// name for it (a content index, an output_index, a tool call's index, or
// KeyText/KeyThinking).
func (s *Stream) Open(dst []byte, kind BlockKind, key int, id, name []byte) []byte {
	dst = s.Begin(dst, nil, nil, 0)
	if s.finished || s.dead || !s.roomForBlock() || !s.room(dst, itemOverhead+len(id)+len(name)) {
		return dst
	}
	n := len(s.blocks)
	if n < cap(s.blocks) {
		s.blocks = s.blocks[:n+1]
	} else {
		s.blocks = append(s.blocks, streamBlock{})
	}
	b := &s.blocks[n]
	*b = streamBlock{kind: kind, key: key, open: true, idx: s.nBlocks,
		id: reuse(b.id), name: reuse(b.name), ns: reuse(b.ns), text: b.text[:0], sig: b.sig[:0], input: b.input[:0]}
	s.nBlocks++
	if kind == BlockTool {
		b.idx = s.toolIndex()
		s.nTools++
		b.name = append(b.name, name...)
		b.id = s.toolID(b.id, id)
		if s.cl.keepsBlocks {
			b.custom = s.isCustom(name)
			// Looked up once per call, not per delta; the conversion in
			// the index does not allocate.
			if nn, ok := s.opt.Namespaces[string(name)]; ok {
				b.ns = jsonmember.AppendEscaped(b.ns, nn[0])
				b.name = jsonmember.AppendEscaped(b.name[:0], nn[1])
			}
		}
	}
	if !s.keep(b, itemOverhead+len(b.id)+len(b.name)+len(b.ns)) {
		s.blocks = s.blocks[:n]
		return dst
	}
	return s.cl.open(s, dst, b)
}

// toolIndex is the client's index of the next tool block: Chat counts tool
// calls only (a text block before them must not shift it), the others
// count every block.
func (s *Stream) toolIndex() int {
	if s.cl.countsTools {
		return s.nTools
	}
	return s.nBlocks - 1
}

// toolID appends the client's id for a tool call the upstream named id:
// sanitized for Messages, synthesized when missing.
func (s *Stream) toolID(dst, id []byte) []byte {
	if len(id) == 0 {
		dst = append(append(dst, s.cl.toolPrefix...), s.token...)
		return strconv.AppendInt(append(dst, '_'), int64(s.nTools), 10)
	}
	if !s.cl.sanitizesIDs {
		return append(dst, id...)
	}
	if bytes.IndexByte(id, '\\') >= 0 {
		// escaped upstream: the request side sanitizes the decoded id
		s.scratch = jsonmember.AppendUnescaped(s.scratch[:0], id)
		id = s.scratch
	}
	return appendSanitized(dst, id)
}

func (s *Stream) isCustom(name []byte) bool {
	for _, c := range s.opt.CustomTools {
		if string(name) == c {
			return true
		}
	}
	return false
}

// Delta is the delta step. A text or thinking piece opens its block if
// the upstream did not (Chat never does), so no block is opened for
// nothing; tool arguments for no open tool call are dropped.
func (s *Stream) Delta(dst []byte, p Piece, key int, text []byte) []byte {
	if len(text) == 0 || s.finished || s.dead || !s.room(dst, len(text)) {
		return dst
	}
	b := s.find(key)
	if b == nil {
		if p == PieceArgs {
			return dst
		}
		dst = s.Open(dst, p.kind(), key, nil, nil)
		if s.dead {
			return dst
		}
		b = &s.blocks[len(s.blocks)-1]
	}
	if b.kind != p.kind() {
		return dst
	}
	return s.cl.delta(s, dst, b, p, text)
}

// CloseKey is the close step for the open block the upstream calls key;
// a key with no open block (closed already, or never opened because its
// pieces were empty) writes nothing.
func (s *Stream) CloseKey(dst []byte, key int) []byte {
	if b := s.find(key); b != nil {
		return s.close(dst, b)
	}
	return dst
}

func (s *Stream) close(dst []byte, b *streamBlock) []byte {
	b.open = false
	if s.dead {
		return dst
	}
	if s.cl.close == nil {
		return dst // Chat has no word for it
	}
	return s.cl.close(s, dst, b)
}

// Finish is the finish step: every open block closes, in the order they
// opened, then the client hears why the answer ended and what it cost.
func (s *Stream) Finish(dst []byte) []byte {
	if s.finished || s.dead {
		return dst
	}
	dst = s.Begin(dst, nil, nil, 0)
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
	return s.cl.finish(s, dst)
}

// Fail is the fail step: typ and code are JSON strings ("" for none), msg
// is a JSON value as the upstream wrote it. A message that is not a JSON
// string (an object, a number, nothing) is replaced: each client API's
// error event carries its message as a string, which its SDK reads.
func (s *Stream) Fail(dst, typ, code, msg []byte) []byte {
	if s.finished || s.dead {
		return dst
	}
	s.dead = true
	if len(msg) == 0 || msg[0] != '"' {
		msg = []byte(`"the engine failed"`)
	}
	return s.cl.fail(s, dst, typ, code, msg)
}

// validObject reports whether data is one JSON object and nothing else.
func validObject(data []byte) bool {
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

// ReadUsage takes in the usage object of API a at data[v]: a later report
// of the same answer replaces what an earlier one said (api.Usage.Update):
// Messages says the prompt in message_start and the output in
// message_delta, whose counts are cumulative, and vLLM and Gemini repeat
// theirs in every chunk (docs/translation-facts.md#streams).
func (s *Stream) ReadUsage(a api.API, data []byte, v int) {
	if u, ok := a.ReadUsage(data, v); ok {
		s.usage = s.usage.Update(u)
	}
}

// What a decoder may ask of the stream besides its steps (Begin, Open,
// Delta, CloseKey, Finish, Fail, ReadUsage): a decoder in a provider's
// package reads the stream through these alone.

// Begun reports whether the answer's start was seen, or assumed.
func (s *Stream) Begun() bool { return s.begun }

// Finished reports whether the client was told the answer is whole.
func (s *Stream) Finished() bool { return s.finished }

// SetStop records why the engine said the answer ended.
func (s *Stream) SetStop(st Stop) { s.stop = st }

// Stopped is why the engine said the answer ended; StopNone until it did.
func (s *Stream) Stopped() Stop { return s.stop }

// CloseAll is the close step for every open block, in the order they
// opened.
func (s *Stream) CloseAll(dst []byte) []byte {
	for i := range s.blocks {
		if s.blocks[i].open {
			dst = s.close(dst, &s.blocks[i])
		}
	}
	return dst
}

// NextCall is the key of the next tool call of an engine whose calls come
// whole and unnumbered (Gemini's): 0, 1, 2, … per stream.
func (s *Stream) NextCall() int {
	k := s.calls
	s.calls++
	return k
}

// RequestModel is the model the request was sent, JSON-escaped: for an
// engine whose stream does not name it (Converse's).
func (s *Stream) RequestModel() []byte {
	if len(s.reqModel) == 0 {
		s.reqModel = jsonmember.AppendEscaped(s.reqModel, s.opt.Model)
	}
	return s.reqModel
}

// AppendToolID appends an id for a tool call the engine gave none: the
// prefix of the client's API's ids and a part unique to the stream and
// the call. Open makes the same for a call it is given no id for; a
// decoder that carries more in an id (Gemini's thought signature) makes
// it with this.
func (s *Stream) AppendToolID(dst []byte) []byte {
	dst = append(dst, s.cl.toolPrefix...)
	dst = append(dst, s.token...)
	return strconv.AppendInt(append(dst, '_'), int64(s.nTools), 10)
}

// Buffer is a buffer a decoder may build an event's pieces in (an id, the
// arguments of a whole call): it keeps its capacity from event to event
// and stream to stream, and the steps never write into it.
func (s *Stream) Buffer() []byte { return s.buf[:0] }

// KeepBuffer hands back a buffer Buffer gave, grown, for the next event.
func (s *Stream) KeepBuffer(b []byte) { s.buf = b[:0] }

// One upstream event, handed to its API's decoder (Codec.Decode): the
// decoders call the steps above, never the steps a decoder, so a decoder
// can live in any spoke, or in a provider's package.

// Event appends to dst the client's events (complete SSE events, each ending in a blank line) for one upstream event ev (one complete SSE event as internal/sse.Reader returns it: lines plus the blank line; comments and keep-alives included), and returns dst.
func (s *Stream) Event(dst, ev []byte) []byte {
	if s.from == s.to {
		return append(dst, ev...)
	}
	if s.dead {
		return dst
	}
	s.evStart = len(dst)
	dst = eventComments(dst, ev)
	data, ok := sse.Data(ev)
	if !ok {
		return dst
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return s.done(dst) // OpenAI's sentinel: the answer is whole
	}
	if !validObject(data) || s.decode == nil {
		// Not one JSON object (or an API without a decoder): dropped here,
		// so the relay's count of malformed events, which reads the
		// translated stream, never sees it; nor does the client.
		return dst
	}
	return s.decode(s, dst, ev, data)
}

// EventName is the value of ev's event: line, nil for none.
func EventName(ev []byte) []byte {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// done reads OpenAI's [DONE]: the answer is whole.
func (s *Stream) done(dst []byte) []byte {
	if s.stop == StopNone {
		s.stop = StopEnd
	}
	return s.Finish(dst)
}

// orDefault appends the JSON string v, or def when v is none.
func orDefault(dst, v []byte, def string) []byte {
	if len(v) > 1 && v[0] == '"' {
		return append(dst, v...)
	}
	return append(dst, def...)
}
