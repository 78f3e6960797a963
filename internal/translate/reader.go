package translate

import (
	"io"

	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// A translated stream is read like any other: the gateway wraps the
// engine's body in a Reader, and everything after it (the hold before the
// first content, the relay, usage, the transcript that resumes a cut
// stream) reads the client's own grammar, as if the engine spoke it.

// rdBatch bounds what one Read translates of events the engine's body has
// already brought: the rest waits for the next Read, so a burst is written
// in batches and a slow stream event by event.
const rdBatch = 16 << 10

// Reader is an engine's event stream read in the client's API.
type Reader struct {
	body   io.ReadCloser
	events *sse.Reader
	s      *Stream
	out    []byte // translated events not yet read
	off    int
	err    error // the engine body's end: io.EOF or why it broke
}

// NewReader reads body, an event stream in s's upstream API, as the events
// s translates it into. Close closes the body and gives the event reader's
// buffer back; s stays the caller's (the gateway makes one per answer).
func NewReader(body io.ReadCloser, s *Stream) *Reader {
	return &Reader{body: body, events: sse.NewReader(body), s: s}
}

// Read gives the translated events: those of every event the body has
// brought so far, and at least one event's.
func (r *Reader) Read(p []byte) (int, error) {
	for r.off == len(r.out) {
		if r.err != nil {
			return 0, r.err
		}
		r.out, r.off = r.out[:0], 0
		for {
			ev, err := r.events.Next()
			if err != nil {
				if err == io.EOF {
					r.out = r.s.End(r.out)
				}
				r.err = err
				break
			}
			r.out = r.s.Event(r.out, ev)
			if err := r.s.Err(); err != nil {
				// past a bound (stream_bound.go): the events before it
				// go out, then the error, at once; the engine's body is
				// closed by the gateway's cut
				r.err = err
				break
			}
			if !r.events.Buffered() || len(r.out) >= rdBatch {
				break
			}
		}
	}
	n := copy(p, r.out[r.off:])
	r.off += n
	return n, nil
}

// Close closes the engine's body and gives the reader's buffer back; a
// second Close does nothing (the gateway closes an attempt's body on every
// way out).
func (r *Reader) Close() error {
	if r.body == nil {
		return nil
	}
	err := r.body.Close()
	r.events.Release()
	r.body, r.err, r.out, r.off = nil, io.ErrClosedPipe, nil, 0
	return err
}
