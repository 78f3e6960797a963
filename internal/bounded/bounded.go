// Package bounded reads a request body within a limit, and says sizes the way
// an operator writes them.
package bounded

import (
	"errors"
	"io"
	"strconv"
)

var ErrTooLarge = errors.New("body too large")

// Read reads at most limit bytes; one more is ErrTooLarge. The buffer
// grows as bytes arrive: a claimed Content-Length is trusted for a first
// allocation only up to firstRead, so connections that announce a large body
// and send slowly hold only what they sent (300 of them, 4 KiB each).
func Read(rc io.Reader, length, limit int64) ([]byte, error) {
	const firstRead = 4 << 10
	if length >= 0 && length <= firstRead {
		buf := make([]byte, length)
		if _, err := io.ReadFull(rc, buf); err != nil {
			return nil, err
		}
		return buf, nil
	}
	buf := make([]byte, 0, firstRead)
	for {
		if int64(len(buf)) > limit {
			return nil, ErrTooLarge
		}
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := rc.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			if int64(len(buf)) > limit {
				return nil, ErrTooLarge
			}
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// SizeText says a size the way an operator writes it in the Caddyfile: in
// the largest unit it is a whole number of (1KiB, 32MiB, 5MB), else in
// bytes. The config keeps only the number, and humanize.IBytes would say
// "1.0 KiB" for `max_body 1KiB` (issue 28: the 413 said "1024 bytes").
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
