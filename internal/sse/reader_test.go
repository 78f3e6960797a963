package sse

import (
	"bytes"
	"io"
	"testing"
)

// lagging delivers a stream the way a relay that is a little behind its
// engine reads it: each read finds a few events waiting (here two and a
// half), never more than that, and takes what fits.
type lagging struct {
	rest    []byte
	perTick int
	pending int
}

func (l *lagging) Read(p []byte) (int, error) {
	if len(l.rest) == 0 {
		return 0, io.EOF
	}
	if l.pending == 0 {
		l.pending = min(l.perTick, len(l.rest))
	}
	n := copy(p, l.rest[:l.pending])
	l.rest, l.pending = l.rest[n:], l.pending-n
	return n, nil
}

// readEvents reads n events of benchChunk, failing on anything else.
func readEvents(t *testing.T, r *Reader, n int) {
	t.Helper()
	for i := range n {
		ev, err := r.Next()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		if !bytes.Equal(ev, benchChunk) {
			t.Fatalf("event %d is %q", i, ev)
		}
	}
}

// A slow stream keeps its first, small buffer however its events fall
// against it: a read that finds an event and a half waiting fills what is
// left of the buffer, and that is no sign of a fast stream
// (thousands of open streams each kept 2 KiB and more).
func TestSlowStreamKeepsItsSmallBuffer(t *testing.T) {
	src := &lagging{rest: bytes.Repeat(benchChunk, 500), perTick: len(benchChunk) * 5 / 2}
	r := NewReader(src)
	defer r.Release()
	readEvents(t, r, 500)
	if len(r.buf) != firstReadSize {
		t.Fatalf("buffer %d bytes after a slow stream, want %d", len(r.buf), firstReadSize)
	}
	if _, err := r.Next(); err != io.EOF {
		t.Fatalf("after the last event: %v", err)
	}
}

// A fast stream, whose reads find more than the buffer holds, grows it to
// the size that reads it in as few calls as reverse_proxy's copy buffer.
func TestFastStreamGrowsItsBuffer(t *testing.T) {
	r := NewReader(bytes.NewReader(bytes.Repeat(benchChunk, 500)))
	defer r.Release()
	readEvents(t, r, 400)
	if len(r.buf) != fastReadSize {
		t.Fatalf("buffer %d bytes in a fast stream, want %d", len(r.buf), fastReadSize)
	}
}

// transportBuffer delivers a stream the way an upstream body over the
// transport's 4 KiB read buffer does when the whole stream is waiting: a
// read takes what is left of the buffer and fits, and an empty buffer is
// filled by one read of the socket.
type transportBuffer struct {
	rest             []byte
	buffered         int
	reads, socketIOs int
}

func (tb *transportBuffer) Read(p []byte) (int, error) {
	if len(tb.rest) == 0 {
		return 0, io.EOF
	}
	if tb.buffered == 0 {
		tb.buffered = min(4096, len(tb.rest))
		tb.socketIOs++
	}
	n := copy(p, tb.rest[:tb.buffered])
	tb.rest, tb.buffered = tb.rest[n:], tb.buffered-n
	tb.reads++
	return n, nil
}

// A stream already waiting whole is read in one read per read of the
// socket, and one more for the first, small buffer: the relay writes and
// flushes once per read (relayEvents), so a doubling buffer (1, 2, then the
// 1 KiB left of the transport's buffer) cost a flush more than
// reverse_proxy's copy.
func TestWaitingStreamIsReadInAsManyReadsAsTheSocket(t *testing.T) {
	src := &transportBuffer{rest: bytes.Repeat(benchChunk, 50)}
	r := NewReader(src)
	defer r.Release()
	readEvents(t, r, 50)
	if src.reads > src.socketIOs+1 {
		t.Fatalf("%d reads for %d reads of the socket (%d bytes), want at most %d",
			src.reads, src.socketIOs, 50*len(benchChunk), src.socketIOs+1)
	}
}

// A stream that was fast for a while and is slow again halves its buffer
// at each small read until it is back at the first size: a relay that fell
// behind its engine once does not keep a large buffer for the rest of a
// long answer.
func TestStreamThatSlowsDownGivesItsBufferBack(t *testing.T) {
	src := &lagging{rest: bytes.Repeat(benchChunk, 600), perTick: 100 * len(benchChunk)}
	r := NewReader(src)
	defer r.Release()
	readEvents(t, r, 200) // two bursts of 100 events: the buffer grows
	if len(r.buf) <= 4*firstReadSize {
		t.Fatalf("buffer %d bytes after bursts, want more than %d", len(r.buf), 4*firstReadSize)
	}
	src.perTick = len(benchChunk) // one event per read from now on
	readEvents(t, r, 300)
	if len(r.buf) != firstReadSize {
		t.Fatalf("buffer %d bytes after 300 slow events, want %d", len(r.buf), firstReadSize)
	}
}

// A stream whose relay fell behind once (a thousand streams opened at
// once) is back at the first size at its first slow read, not one halving
// per event: the buffer shrinks to what the slow read needs.
func TestStreamThatFellBehindOnceIsBackAtTheFirstSizeAtItsNextEvent(t *testing.T) {
	src := &lagging{rest: bytes.Repeat(benchChunk, 40), perTick: 10 * len(benchChunk)}
	r := NewReader(src)
	defer r.Release()
	readEvents(t, r, 10) // ten events waiting: the first read fills 1 KiB
	if len(r.buf) <= firstReadSize {
		t.Fatalf("buffer %d bytes after ten waiting events, want it grown", len(r.buf))
	}
	src.perTick = len(benchChunk) // an event per read from now on
	readEvents(t, r, 2)           // the rest of the burst was 900 bytes: 2 KiB, then 1
	if len(r.buf) != firstReadSize {
		t.Fatalf("buffer %d bytes at the second slow event, want %d", len(r.buf), firstReadSize)
	}
}

// A stream whose reads bring a steady 1.5 KiB keeps one buffer size: the
// shrink after a slow read goes no lower than a size such reads are a
// quarter of, so no read fills it and it does not grow again.
func TestSteadyMediumStreamKeepsItsBuffer(t *testing.T) {
	per := 8 * len(benchChunk) // about 1.5 KiB a read
	src := &lagging{rest: bytes.Repeat(benchChunk, 400), perTick: per}
	r := NewReader(src)
	defer r.Release()
	readEvents(t, r, 40)
	size, changes := len(r.buf), 0
	for range 45 {
		readEvents(t, r, 8)
		if len(r.buf) != size {
			size, changes = len(r.buf), changes+1
		}
	}
	if changes > 0 {
		t.Fatalf("buffer changed size %d times at a steady %d bytes a read (now %d)", changes, per, size)
	}
}

// An event larger than the buffer grows it as far as the event needs.
func TestLargeEventGrowsTheBuffer(t *testing.T) {
	big := append(append([]byte("data: "), bytes.Repeat([]byte("x"), 5000)...), "\n\n"...)
	src := &lagging{rest: append(append([]byte(nil), big...), bytes.Repeat(benchChunk, 20)...), perTick: 700}
	r := NewReader(src)
	defer r.Release()
	ev, err := r.Next()
	if err != nil || !bytes.Equal(ev, big) {
		t.Fatalf("first event %d bytes, %v", len(ev), err)
	}
	readEvents(t, r, 20)
}
