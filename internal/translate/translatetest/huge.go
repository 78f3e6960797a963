package translatetest

import (
	"errors"
	"io"
	"runtime"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Huge is an engine's stream made as it is read, never held whole: the
// events before the answer (Head), N times the event carrying one piece
// (Piece), and the events after it (Tail). Reading it allocates nothing.
type Huge struct {
	Head, Tail []string
	Piece      string
	N          int
	cur        string // what is left of the event being read
}

func (h *Huge) Read(p []byte) (int, error) {
	for h.cur == "" {
		switch {
		case len(h.Head) > 0:
			h.cur, h.Head = h.Head[0], h.Head[1:]
		case h.N > 0:
			h.cur = h.Piece
			h.N--
		case len(h.Tail) > 0:
			h.cur, h.Tail = h.Tail[0], h.Tail[1:]
		default:
			return 0, io.EOF
		}
	}
	n := copy(p, h.cur)
	h.cur = h.cur[n:]
	return n, nil
}

// PieceSize is what each event of a huge answer carries.
const PieceSize = 8 << 10

// SSE is one event: its name ("" for none) and its data.
func SSE(name, data string) string {
	if name == "" {
		return "data: " + data + "\n\n"
	}
	return "event: " + name + "\ndata: " + data + "\n\n"
}

// HugeSizes are the huge answers every engine API's stream is checked
// with: 100 MB of text, 10 MB of one tool call's arguments.
var HugeSizes = []struct {
	Name string
	Tool bool
	N    int
}{{"text 100 MB", false, 100 << 20}, {"arguments 10 MB", true, 10 << 20}}

// KeepsMemoryFlat reads up, an engine of from answering n bytes, as a
// client of to, and checks that what it allocates is bounded, not growing
// with the answer: a Chat or Messages client gets it all, a Responses
// client (whose closing events repeat the answer) gets it cut past 1 MiB
// with ErrAnswerTooLarge. engine makes the stream of n bytes, n cut short
// under the race detector (what this proves is the allocations, not
// counted under it).
func KeepsMemoryFlat(t *testing.T, from, to api.API, n int, engine func(n int) io.Reader) {
	t.Helper()
	const allocLimit = 6 << 20
	if RaceEnabled {
		n /= 10
	}
	r := translate.NewReader(io.NopCloser(engine(n)), translate.NewStream(from, to, translate.StreamOptions{Model: "m"}))
	defer r.Close()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	got, err := io.CopyBuffer(io.Discard, r, make([]byte, 32<<10))
	runtime.ReadMemStats(&after)
	alloc := after.TotalAlloc - before.TotalAlloc
	t.Logf("%d bytes to the client, %d KiB allocated, err %v", got, alloc>>10, err)
	if alloc > allocLimit && !RaceEnabled {
		t.Errorf("%d KiB allocated for the answer, want at most %d KiB", alloc>>10, allocLimit>>10)
	}
	if to == api.Responses {
		if !errors.Is(err, translate.ErrAnswerTooLarge) || got > 4<<20 {
			t.Errorf("a Responses client: %d bytes and %v, want the stream cut past 1 MiB with ErrAnswerTooLarge", got, err)
		}
		return
	}
	if err != nil || got < int64(n) {
		t.Errorf("%d bytes and %v, want the whole answer (%d bytes)", got, err, n)
	}
}
