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

func readAll(t *testing.T, r *Reader) int {
	t.Helper()
	n := 0
	for {
		ev, err := r.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(ev, benchChunk) {
			t.Fatalf("event %d is %q", n, ev)
		}
		n++
	}
}

// A slow stream keeps its first, small buffer however its events fall
// against it: a read that finds an event and a half waiting fills what is
// left of the buffer, and that is no sign of a fast stream (issue 30:
// thousands of open streams each kept 2 KiB and more).
func TestSlowStreamKeepsItsSmallBuffer(t *testing.T) {
	src := &lagging{rest: bytes.Repeat(benchChunk, 500), perTick: len(benchChunk) * 5 / 2}
	r := NewReader(src)
	defer r.Release()
	if n := readAll(t, r); n != 500 {
		t.Fatalf("%d events, want 500", n)
	}
	if len(r.buf) != firstReadSize {
		t.Fatalf("buffer %d bytes after a slow stream, want %d", len(r.buf), firstReadSize)
	}
}

// A fast stream, whose reads find more than the buffer holds, grows it to
// the size that reads it in as few calls as reverse_proxy's copy buffer.
func TestFastStreamGrowsItsBuffer(t *testing.T) {
	r := NewReader(bytes.NewReader(bytes.Repeat(benchChunk, 500)))
	defer r.Release()
	if n := readAll(t, r); n != 500 {
		t.Fatalf("%d events, want 500", n)
	}
	if len(r.buf) != fastReadSize {
		t.Fatalf("buffer %d bytes after a fast stream, want %d", len(r.buf), fastReadSize)
	}
}

// An event larger than the buffer grows it as far as the event needs.
func TestLargeEventGrowsTheBuffer(t *testing.T) {
	big := append(append([]byte("data: "), bytes.Repeat([]byte("x"), 5000)...), "\n\n"...)
	src := &lagging{rest: append(append([]byte(nil), big...), benchChunk...), perTick: 700}
	r := NewReader(src)
	defer r.Release()
	ev, err := r.Next()
	if err != nil || !bytes.Equal(ev, big) {
		t.Fatalf("first event %d bytes, %v", len(ev), err)
	}
	if ev, err = r.Next(); err != nil || !bytes.Equal(ev, benchChunk) {
		t.Fatalf("second event %q, %v", ev, err)
	}
}
