package sse

import (
	"bytes"
	"io"
	"testing"
	"testing/iotest"
)

// FuzzSSEReader checks that the events a Reader finds do not depend on
// how the body arrives: whole, or one byte per read.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte("data: {\"a\":1}\n\ndata: [DONE]\n\n"))
	f.Add([]byte(": keep-alive\r\n\r\nevent: x\r\ndata: {}\r\n\r\n"))
	f.Add([]byte("data: {\"a\":\n\ndata: cut"))
	f.Fuzz(func(t *testing.T, body []byte) {
		whole, errWhole := events(bytes.NewReader(body))
		bytewise, errBytewise := events(iotest.OneByteReader(bytes.NewReader(body)))
		if (errWhole == nil) != (errBytewise == nil) || len(whole) != len(bytewise) {
			t.Fatalf("whole: %q %v\nbytewise: %q %v", whole, errWhole, bytewise, errBytewise)
		}
		for i := range whole {
			if whole[i] != bytewise[i] {
				t.Fatalf("event %d: %q vs %q", i, whole[i], bytewise[i])
			}
			Data([]byte(whole[i])) // must not panic
		}
	})
}

func events(r io.Reader) ([]string, error) {
	s := NewReader(r)
	var out []string
	for {
		ev, err := s.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(ev))
	}
}
