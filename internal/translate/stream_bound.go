package translate

import (
	"errors"

	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// A translated stream holds no more of an answer than one event can carry,
// whatever the client's and the engine's APIs (issue 51: 100 streams whose
// tool-call arguments were 10 MB took a gateway from 56 MB to 3.3 GB).
// Three bounds, each checked before the bytes are kept or written:
//
//   - kept: a Responses client's closing events (…done, output_item.done,
//     response.completed) repeat every block whole, so its Stream keeps each
//     block's text, arguments and signature. response.completed carries all
//     of them in one event, and an event is at most sse.MaxEventSize (the
//     relay refuses a larger one): an answer that could never be told whole
//     is cut the moment what is kept passes that, not after the engine sent
//     all of it. Chat and Messages clients keep nothing of a block's text;
//     what every Stream keeps (the answer's id and model, each held block's
//     id and name) counts too.
//   - blocks: the blocks held (every block for a Responses client; the open
//     ones for the others, whose closed blocks are dropped) are at most
//     maxBlocks; find walks them, so their number bounds CPU as well.
//   - one event's output: an upstream event is at most sse.MaxEventSize, but
//     a Gemini chunk of many tiny parts makes an event of ~150 bytes per
//     part; the deltas and openings one upstream event writes are at most
//     maxEventOutput.
//
// Past a bound the stream is cut: Err says why, Event writes nothing more,
// and the Reader ends with the error, which the gateway's relay turns into
// the client's in-band error (its cut of any stream that breaks).
//
// Why a cut, and not `.done` events that carry what was kept and say so: the
// clients act on those events. Codex takes a function call's arguments from
// response.output_item.done and runs it, and keeps the output items as the
// conversation it sends back; the SDKs' stream helpers (openai-go's
// accumulated response, the Node SDK's finalResponse()) hand the
// application response.completed's output. Arguments cut at a byte count
// are JSON that does not parse, or parses as a smaller, other call, and a
// cut text reads as a whole answer; the Responses API has no member that
// marks an output item as truncated that these clients read. An error
// event followed by the end of the connection is what every one of them
// reports as a failed request (Codex shows it and may retry).

// maxKept is what a Stream keeps of an answer, in bytes of the events that
// repeat it: an event's cap.
const maxKept = sse.MaxEventSize

// itemOverhead is what an output item adds to response.completed beside
// its text, id and name (its type, status and member names), rounded up;
// responseOverhead, the event's own (its names, status, usage).
const (
	itemOverhead     = 192
	responseOverhead = 2 << 10
)

// maxBlocks bounds the blocks a Stream holds. A real answer has a few:
// text, reasoning, a handful of parallel tool calls.
const maxBlocks = 1024

// maxEventOutput bounds the client's events written for one upstream
// event's deltas and openings (an upstream event's own bytes, twice).
const maxEventOutput = 2 * sse.MaxEventSize

// The errors that cut a translated stream past one of its bounds, which
// the Reader ends with (the gateway's cut names them to the client).
var (
	ErrAnswerTooLarge = errors.New("the answer is larger than its closing events can carry (1 MiB, the cap of one event)")
	ErrTooManyBlocks  = errors.New("the answer has more than 1024 blocks (text, reasoning or tool calls)")
	ErrEventTooLarge  = errors.New("one event of the engine translated into more than 2 MiB of events")
)

// Err is why the stream was cut past a bound, or nil.
func (s *Stream) Err() error { return s.err }

// cut stops the stream past a bound: nothing more is written.
func (s *Stream) cut(err error) {
	s.dead, s.err = true, err
}

// keep counts n more bytes kept (for b, or nil for the answer's own);
// false, and the stream cut, past maxKept.
func (s *Stream) keep(b *streamBlock, n int) bool {
	s.kept += n
	if b != nil {
		b.held += n
	}
	if s.kept > maxKept {
		s.cut(ErrAnswerTooLarge)
		return false
	}
	return true
}

// room reports whether n more bytes may be written for the current
// upstream event (dst is what was written so far); false cuts the stream.
func (s *Stream) room(dst []byte, n int) bool {
	if len(dst)-s.evStart+n > maxEventOutput {
		s.cut(ErrEventTooLarge)
		return false
	}
	return true
}

// roomForBlock makes room for one more block: a Chat or Messages client's
// closed blocks are dropped (their buffers kept for the next ones); false
// cuts the stream when maxBlocks are held still.
func (s *Stream) roomForBlock() bool {
	if !s.cl.keepsBlocks && len(s.blocks) >= 16 {
		s.dropClosed()
	}
	if len(s.blocks) >= maxBlocks {
		s.cut(ErrTooManyBlocks)
		return false
	}
	return true
}

// dropClosed moves the closed blocks past the end of s.blocks, keeping the
// open ones in the order they opened (finish closes them in that order).
func (s *Stream) dropClosed() {
	n := 0
	for i := range s.blocks {
		if s.blocks[i].open {
			s.blocks[n], s.blocks[i] = s.blocks[i], s.blocks[n]
			n++
		} else {
			s.kept -= s.blocks[i].held
		}
	}
	s.blocks = s.blocks[:n]
}

// reuse is a block slot's id, name or namespace buffer made ready for
// the slot's next block: one that grew past reuseCap (a huge name) is let
// go, so that the slots a Chat or Messages client reuses keep no more than
// that each. (Their text buffers stay empty: only a Responses client's
// Stream fills them, and it reuses no slot within a stream.)
func reuse(b []byte) []byte {
	if cap(b) > reuseCap {
		return nil
	}
	return b[:0]
}

const reuseCap = 1 << 10

// stKeep appends p to a buffer a Responses client's Stream keeps: grown by
// doubling up to maxKept, which it never needs to pass (keep cuts the
// stream first), where append grows a large slice by a quarter at a time
// and a megabyte kept would have cost five allocated.
func stKeep(dst, p []byte) []byte {
	if n := len(dst) + len(p); n > cap(dst) {
		nb := make([]byte, len(dst), min(max(2*cap(dst), n, 256), max(n, maxKept)))
		copy(nb, dst)
		dst = nb
	}
	return append(dst, p...)
}
