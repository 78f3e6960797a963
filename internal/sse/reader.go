// Package sse splits a server-sent event stream into events, with a buffer
// that starts small and grows only for a fast or large stream, pooled
// between streams. It knows nothing of what the events say.
package sse

import (
	"bytes"
	"errors"
	"io"
	"sync"
)

// An event stream is relayed event by event: the gateway must know where an
// event ends to tell a clean end from a cut, to hold back everything before
// the first content event (the commit point), and to drop a `data:` line
// that is not JSON instead of passing garbage to the client's SDK.

// MaxEventSize bounds one event; a larger one is a broken stream.
const MaxEventSize = 1 << 20

// The read buffer starts at the size of an event (a chat chunk is a few
// hundred bytes), so thousands of slow streams stay cheap: the upstream
// body already reads the socket through the transport's own 4 KiB buffer,
// so a small buffer here costs a copy, never a system call. A read that
// fills it takes it to 8 KiB at once (room for all the transport holds
// beside the start of an event left over), and a read that fills that
// doubles it, up to fastReadSize for a body of large chunks: a fast stream
// is then read, written and flushed in as few calls as reverse_proxy's
// 32 KiB copy buffer needs (doubling from 1 KiB, a stream already waiting
// in the transport's buffer took a flush more: 1 KiB, 2 KiB, then the 1 KiB
// left of it). After a read that brought a quarter of it or less, it
// shrinks, while empty, to the smallest size that read would have filled
// half of (never one it fills, so never one it grows from again): a stream
// that was fast for a while (a relay that fell behind its engine, a large
// event) is back at 1 KiB at its first slow event instead of halving once
// per event (a thousand streams opened at once kept 5 KiB each
// for their first seconds), and a stream whose reads bring a steady 1 or
// 2 KiB keeps the size it needs instead of going back and forth.
const (
	firstReadSize = 1 << 10
	// transportReadSize is the transport's read buffer: a read of a body
	// of small chunks (an event each) never brings more than it holds
	transportReadSize = 4 << 10
	fastReadSize      = 32 << 10
)

var (
	ErrCutMidEvent   = errors.New("the stream ended in the middle of an event")
	ErrEventTooLarge = errors.New("an event larger than 1 MiB")
)

// Reader splits an upstream body into events. Its buffer starts small
// and grows only for large events, so thousands of open streams stay cheap.
type Reader struct {
	r          io.Reader
	buf        []byte
	start, end int  // unread bytes are buf[start:end]
	pend       int  // length of the complete event at start, once found; -1 if not yet
	filled     bool // the last read filled the buffer
	slowRead   int  // what the last read brought, if a quarter of the buffer or less
	err        error
}

func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: getBuf(firstReadSize), pend: -1}
}

// Read buffers of 1 to 32 KiB (each size twice the one before) are
// pooled: a busy gateway reuses them instead of making garbage for every
// stream.
var bufPools [6]sync.Pool

func poolIndex(size int) int {
	for i := range bufPools {
		if size == firstReadSize<<i {
			return i
		}
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

// Release gives the reader's buffer back; no event it returned may be used
// afterwards.
func (s *Reader) Release() {
	if s.buf != nil {
		putBuf(s.buf)
		s.buf, s.start, s.end, s.pend = nil, 0, 0, -1
	}
}

// EventEnd returns the offset just past the blank line ending the first
// event in b, or -1. Lines end in \n or \r\n.
func EventEnd(b []byte) int {
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

// Buffered reports whether a whole event is already read, so that the next
// call to Next will not block.
func (s *Reader) Buffered() bool {
	if s.pend < 0 {
		s.pend = EventEnd(s.buf[s.start:s.end])
	}
	return s.pend >= 0
}

// Next returns the next event including its terminating blank line; the
// slice is valid until the following call. A body that ends at an event
// boundary gives io.EOF; one that ends inside an event gives ErrCutMidEvent;
// a read error is returned as it is.
func (s *Reader) Next() ([]byte, error) {
	for {
		if s.Buffered() {
			ev := s.buf[s.start : s.start+s.pend]
			s.start += s.pend
			s.pend = -1
			return ev, nil
		}
		if s.err != nil {
			if s.err == io.EOF && len(bytes.TrimSpace(s.buf[s.start:s.end])) > 0 {
				return nil, ErrCutMidEvent
			}
			return nil, s.err
		}
		s.fill()
	}
}

// fill reads more of the body, compacting or growing the buffer first.
//
// The unread bytes (at most the start of an event) always move to the
// front before a read, so that a read has the whole buffer but them: one
// that fills it found more waiting than the buffer holds, a fast stream's
// sign. Reading into the space left after the events already taken would
// fill it whenever a slow stream's read found an event and a half waiting
// (the relay a little behind the engine, as on a busy gateway), and every
// slow stream would grow its buffer, 2 KiB and more, for nothing.
func (s *Reader) fill() {
	if s.start > 0 {
		s.end = copy(s.buf, s.buf[s.start:s.end])
		s.start = 0
	}
	if s.end == 0 && s.slowRead > 0 && len(s.buf) > firstReadSize {
		// the last read brought a quarter of the buffer or less: the
		// stream is slow again (a burst is over, a large event passed)
		// and waits for its next event with what such reads need
		size := firstReadSize
		for size < 2*s.slowRead {
			size *= 2
		}
		if size < len(s.buf) {
			putBuf(s.buf)
			s.buf = getBuf(size)
		}
		s.slowRead = 0
	}
	if s.filled && len(s.buf) < fastReadSize {
		// the last read filled the buffer: this stream is fast
		s.grow(max(2*len(s.buf), 2*transportReadSize))
		s.filled = false
	}
	if s.end == len(s.buf) {
		if len(s.buf) >= MaxEventSize {
			s.err = ErrEventTooLarge
			return
		}
		s.grow(min(2*len(s.buf), MaxEventSize)) // an event larger than the buffer
	}
	n, err := s.r.Read(s.buf[s.end:])
	s.filled = n > 0 && s.end+n == len(s.buf)
	s.slowRead = 0
	if n > 0 && n <= len(s.buf)/4 {
		s.slowRead = n
	}
	s.end += n
	if err != nil {
		s.err = err
	}
}

// grow moves the unread bytes, at the front of the buffer, to a new one of
// size bytes.
func (s *Reader) grow(size int) {
	nb := getBuf(size)
	s.end = copy(nb, s.buf[:s.end])
	putBuf(s.buf)
	s.buf = nb
}

// Data returns the event's data payload (data lines joined by \n) and
// whether it has one. A single data line, the usual case, is returned
// without copying.
func Data(ev []byte) ([]byte, bool) {
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
