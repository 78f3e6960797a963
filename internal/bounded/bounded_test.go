package bounded

import (
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

// stalling sends n bytes, then fails as a client that stops sending does
// when its read deadline passes.
type stalling struct{ left int }

var errStalled = errors.New("stalled")

func (s *stalling) Read(p []byte) (int, error) {
	if s.left == 0 {
		return 0, errStalled
	}
	n := min(len(p), s.left, 1000) // a client's packets, not one big write
	for i := range p[:n] {
		p[i] = 'x'
	}
	s.left -= n
	return n, nil
}

// allocated is what f allocates, in bytes.
func allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// An unsized body grew one buffer by appending, and held up to
// three times what it sent while it was copied; 100 stalled uploads of
// 900 KB held about 2 MB each.
func TestAStalledUnsizedBodyHoldsLittleMoreThanItSent(t *testing.T) {
	const sent = 900 << 10
	got := allocated(func() {
		if _, err := Read(&stalling{left: sent}, -1, 32<<20, nil); !errors.Is(err, errStalled) {
			t.Errorf("read: %v", err)
		}
	})
	if float64(got) > 1.1*sent {
		t.Fatalf("a body that stalled after %d bytes allocated %d (%.2fx)", sent, got, float64(got)/sent)
	}
}

func TestAnUnsizedBodyOverTheLimitIsRefusedAtTheChunkThatPassesIt(t *testing.T) {
	const limit = 1 << 20
	got := allocated(func() {
		if _, err := Read(&stalling{left: 100 << 20}, -1, limit, nil); !errors.Is(err, ErrTooLarge) {
			t.Errorf("read: %v", err)
		}
	})
	if float64(got) > 1.1*limit {
		t.Fatalf("a 100 MB body over a 1 MiB limit allocated %d before its refusal", got)
	}
}

func TestABodyIsReadWholeAtEveryLength(t *testing.T) {
	for _, n := range []int{0, 1, 4095, 4096, 4097, 70_000, 1 << 20, 3<<20 + 7} {
		want := bytes.Repeat([]byte("ab"), n)[:n]
		for _, length := range []int64{-1, int64(n)} {
			got, err := Read(bytes.NewReader(want), length, 4<<20, nil)
			if err != nil || !bytes.Equal(got, want) {
				t.Fatalf("%d bytes (length %d): %d read, %v", n, length, len(got), err)
			}
		}
		if _, err := Read(bytes.NewReader(want), -1, int64(n)-1, nil); n > 0 && !errors.Is(err, ErrTooLarge) {
			t.Fatalf("%d bytes over a limit of %d: %v", n, n-1, err)
		}
	}
	if _, err := Read(io.LimitReader(bytes.NewReader(make([]byte, 10)), 5), 10, 100, nil); err == nil {
		t.Fatal("a body shorter than its Content-Length was read")
	}
}

func TestAnAnnouncedBodyIsNotAllocatedBeforeItArrives(t *testing.T) {
	t.Parallel()
	body, err := Read(strings.NewReader(`{"model":"m"}`), 1<<20, 32<<20, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cap(body) > 4<<10 {
		t.Fatalf("a 1 MiB claim with 13 bytes sent holds %d bytes", cap(body))
	}
}

// The 413 says max_body as the operator writes it.
func TestSizeTextSaysASizeAsConfigured(t *testing.T) {
	t.Parallel()
	for n, want := range map[int64]string{
		1 << 10: "1KiB", 32 << 20: "32MiB", 2 << 30: "2GiB", 1000: "1kB", 5e6: "5MB",
		1536: "1536 bytes", 1: "1 byte", 3 << 20 / 2: "1536KiB",
	} {
		if got := SizeText(n); got != want {
			t.Errorf("SizeText(%d) = %q, want %q", n, got, want)
		}
	}
}

// budget is a Budget of n bytes that counts what it gave.
type budget struct{ left, taken int64 }

func (b *budget) Take(n int64) bool {
	if n > b.left {
		return false
	}
	b.left, b.taken = b.left-n, b.taken+n
	return true
}

// A body takes what it allocates from the budget before it allocates it,
// and one that would pass it is refused where it would, holding no more.
func TestABodyTakesItsChunksFromTheBudget(t *testing.T) {
	b := &budget{left: 10 << 20}
	body, err := Read(bytes.NewReader(make([]byte, 3<<20)), -1, 32<<20, b)
	if err != nil || len(body) != 3<<20 {
		t.Fatalf("%d bytes, %v", len(body), err)
	}
	if float64(b.taken) > 1.1*float64(3<<20) || b.taken < 3<<20 {
		t.Fatalf("a 3 MiB body took %d bytes of the budget", b.taken)
	}
	left := b.left
	got := allocated(func() {
		if _, err := Read(&stalling{left: 20 << 20}, -1, 32<<20, b); !errors.Is(err, ErrBusy) {
			t.Errorf("a body past the budget: %v", err)
		}
	})
	if float64(got) > 1.1*float64(left) {
		t.Fatalf("refused past the budget, it allocated %d bytes of the %d left", got, left)
	}
	small := &budget{left: 100}
	if _, err := Read(strings.NewReader(`{"model":"a model"}`+strings.Repeat(" ", 200)), 219, 1<<20, small); !errors.Is(err, ErrBusy) || small.taken != 0 {
		t.Fatalf("a sized body past the budget: %v, took %d", err, small.taken)
	}
}

// A body read whole is one allocation of its length, and one shorter than
// its length is an error.
func TestABodyReadWholeIsOneAllocation(t *testing.T) {
	want := bytes.Repeat([]byte("ab"), 3<<20)
	var body []byte
	got := allocated(func() {
		var err error
		if body, err = ReadWhole(bytes.NewReader(want), int64(len(want))); err != nil {
			t.Error(err)
		}
	})
	if !bytes.Equal(body, want) || got > uint64(len(want))+64<<10 {
		t.Fatalf("%d bytes read, %d allocated for %d", len(body), got, len(want))
	}
	if _, err := ReadWhole(strings.NewReader("short"), 10); err == nil {
		t.Fatal("a body shorter than its length was read")
	}
}
