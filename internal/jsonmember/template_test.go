package jsonmember

import (
	"encoding/json"
	"testing"
)

// stringAt is StringAt by a byte-by-byte walk: the reference.
func stringAt(b []byte, p int) int {
	open, in, esc := -1, false, false
	for i := 0; i < len(b); i++ {
		if i == p {
			if in {
				return open
			}
			return -1
		}
		switch c := b[i]; {
		case esc:
			esc = false
		case in && c == '\\':
			esc = true
		case c == '"':
			if in = !in; in {
				open = i
			}
		}
	}
	return -1
}

func TestStringAt(t *testing.T) {
	b := []byte(`{"a":"x\"y\\","b":[1,"q"],"c":"\\\""}`)
	for p := 0; p <= len(b); p++ {
		if got, want := StringAt(b, 0, p), stringAt(b, p); got != want {
			t.Fatalf("StringAt(%q, %d) = %d, want %d", b, p, got, want)
		}
	}
}

// FuzzStringAt: in any valid JSON, StringAt finds the string that holds
// each offset as a walk of every byte does, from 0 or from any quote that
// opens a string before it.
func FuzzStringAt(f *testing.F) {
	f.Add(`{"a":"x\"y\\","b":[1,"q"],"c":"\\\""}`)
	f.Add(`["\u0022", "\\\\\"", {"k\"":"v"}]`)
	f.Fuzz(func(t *testing.T, s string) {
		b := []byte(s)
		if !json.Valid(b) {
			return
		}
		for p := 0; p <= len(b); p++ {
			want := stringAt(b, p)
			if got := StringAt(b, 0, p); got != want {
				t.Fatalf("StringAt(%q, 0, %d) = %d, want %d", b, p, got, want)
			}
			for from := 0; from < p; from++ {
				if b[from] == '"' && stringAt(b, from+1) == from { // a quote that opens a string
					if got := StringAt(b, from, p); got != want && want >= from {
						t.Fatalf("StringAt(%q, %d, %d) = %d, want %d", b, from, p, got, want)
					}
				}
			}
		}
	})
}
