// Package bounded reads a request body within a limit, and says sizes the way
// an operator writes them.
package bounded

import (
	"errors"
	"io"
	"strconv"
)

var ErrTooLarge = errors.New("body too large")

// ErrBusy is a body refused because the bodies held at once already hold
// the whole of a Budget.
var ErrBusy = errors.New("the bodies in flight hold the whole budget")

// A Budget is the bytes the bodies read at once may hold together (the
// handler's max_body_in_flight): Take asks for n more before they are
// allocated, and is false when they are not there. The reader gives
// nothing back: what it took is held for as long as its body is, and the
// budget's owner gives it back when the request ends.
type Budget interface {
	Take(n int64) bool
}

// Read reads at most limit bytes; one more is ErrTooLarge. A claimed
// Content-Length is trusted for a first allocation only up to firstRead, so
// connections that announce a large body and send slowly hold only what
// they sent (300 of them, 4 KiB each).
//
// A longer body is read into chunks of a 32nd of what has arrived
// (4 KiB to 1 MiB), joined once at the end: a body that stalls holds at most
// about 1.04 times what it sent, and one that passes the limit is refused
// at the chunk that passes it. Growing one buffer by appending held up to
// three times the body while it was copied (ten unsized bodies
// over max_body took 780 MB before their 413s).
//
// Each allocation is taken from budget first (nil: none), so bodies read
// at once hold at most the budget between them (the join at the end copies
// a body once more, for a moment); one that would pass it is ErrBusy.
func Read(rc io.Reader, length, limit int64, budget Budget) ([]byte, error) {
	const firstRead = 4 << 10
	take := func(n int64) bool { return budget == nil || budget.Take(n) }
	if length >= 0 && length <= firstRead {
		if !take(length) {
			return nil, ErrBusy
		}
		buf := make([]byte, length)
		if _, err := io.ReadFull(rc, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	var chunks [][]byte
	total := int64(0)
	for {
		size := min(max(total/32, firstRead), 1<<20, limit+1-total)
		if !take(size) {
			return nil, ErrBusy
		}
		c := make([]byte, size)
		n, err := io.ReadFull(rc, c)
		total += int64(n)
		chunks = append(chunks, c[:n])
		switch {
		case total > limit:
			return nil, ErrTooLarge
		case err == io.EOF || err == io.ErrUnexpectedEOF:
			return join(chunks, total), nil
		case err != nil:
			return nil, err
		}
	}
}

// ReadWhole reads a body of length bytes into one buffer allocated before
// it arrives: for a body whose length its caller has reserved whole (the
// handler's max_body_in_flight), so a stalled body holds no more than was
// reserved, and no copy joins its chunks at the end (Read's join doubled
// each body for a moment: ten uploads under a cap of 128 MiB peaked at
// twice the cap). The reader must end at length (net/http's body does).
func ReadWhole(rc io.Reader, length int64) ([]byte, error) {
	buf := make([]byte, length)
	if _, err := io.ReadFull(rc, buf); err != nil {
		return nil, err
	}
	return buf, nil
}

// join is the chunks as one body.
func join(chunks [][]byte, total int64) []byte {
	if len(chunks) == 1 {
		return chunks[0]
	}
	out := make([]byte, 0, total)
	for _, c := range chunks {
		out = append(out, c...)
	}
	return out
}

// SizeText says a size the way an operator writes it in the Caddyfile: in
// the largest unit it is a whole number of (1KiB, 32MiB, 5MB), else in
// bytes. The config keeps only the number, and humanize.IBytes would say
// "1.0 KiB" for `max_body 1KiB` (the 413 said "1024 bytes").
func SizeText(n int64) string {
	units := []struct {
		size int64
		name string
	}{{1 << 30, "GiB"}, {1e9, "GB"}, {1 << 20, "MiB"}, {1e6, "MB"}, {1 << 10, "KiB"}, {1e3, "kB"}}
	for _, u := range units {
		if n >= u.size && n%u.size == 0 {
			return strconv.FormatInt(n/u.size, 10) + u.name
		}
	}
	if n == 1 {
		return "1 byte"
	}
	return strconv.FormatInt(n, 10) + " bytes"
}
