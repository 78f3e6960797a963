package prefix

import (
	"bytes"
	"fmt"
	"testing"
)

func prompt(turns int) []byte {
	var b bytes.Buffer
	b.WriteString(`[{"role":"system","content":"You are terse."}`)
	for i := range turns {
		fmt.Fprintf(&b, `,{"role":"user","content":"question %d: %s"}`, i, bytes.Repeat([]byte("why "), 40))
	}
	return b.Bytes()
}

func TestBlocksAreChainedOverThePrefix(t *testing.T) {
	a := Blocks(nil, 64, prompt(3))
	b := Blocks(nil, 64, prompt(5))
	if len(a) != len(prompt(3))/64 {
		t.Fatalf("%d blocks of %d bytes", len(a), len(prompt(3)))
	}
	for i := range a[:len(a)-1] { // the last whole block of a may end inside turn 3's closing
		if a[i] != b[i] {
			t.Fatalf("block %d differs between two prompts that share it", i)
		}
	}
	// one byte changed early changes every later hash
	p := prompt(5)
	p[10] ^= 1
	c := Blocks(nil, 64, p)
	for i := range c {
		if c[i] == b[i] {
			t.Fatalf("block %d equal after an earlier change", i)
		}
	}
	// the parts are one stream
	whole := prompt(2)
	split := Blocks(nil, 64, whole[:100], whole[100:])
	if fmt.Sprint(split) != fmt.Sprint(Blocks(nil, 64, whole)) {
		t.Fatal("cutting the prompt in parts changed its blocks")
	}
	if len(Blocks(nil, 256, []byte("short"))) != 0 {
		t.Fatal("a tail shorter than a block has a hash")
	}
}

func TestLookupFindsTheMemberWithTheLongestPrefix(t *testing.T) {
	x := New(3, 0)
	short := Blocks(nil, 64, prompt(2))
	long := Blocks(nil, 64, prompt(6))
	x.Add(0, short)
	x.Add(2, long)
	m := x.Lookup(Blocks(nil, 64, prompt(7)))
	if !m.Has(2) || m.Has(0) || m.Has(1) || m.Blocks != len(long)-1 && m.Blocks != len(long) {
		t.Fatalf("match %+v, want member 2 over %d blocks", m, len(long))
	}
	m = x.Lookup(short)
	if !m.Has(0) || !m.Has(2) || m.Blocks != len(short) {
		t.Fatalf("both were sent the short prompt: %+v", m)
	}
	if m := x.Lookup(Blocks(nil, 64, bytes.Repeat([]byte("x"), 640))); m.Blocks != 0 || m.Has(0) {
		t.Fatalf("an unknown prompt matched %+v", m)
	}
	x.Add(7, long) // no such member: ignored
	x.Add(-1, long)
}

func TestTheIndexHoldsAtMostItsCapAndDropsTheLeastRecent(t *testing.T) {
	x := New(2, 100)
	old := Blocks(nil, 64, prompt(3))
	x.Add(0, old)
	for i := range 50 {
		x.Add(1, Blocks(nil, 64, []byte(fmt.Sprintf("%03d%s", i, bytes.Repeat([]byte("z"), 200)))))
		if n := x.Len(); n > 100 {
			t.Fatalf("%d hashes held, cap 100", n)
		}
	}
	if x.Len() != 100 {
		t.Fatalf("%d held, want the cap", x.Len())
	}
	if m := x.Lookup(old); m.Blocks != 0 {
		t.Fatalf("the oldest prompt survived: %+v", m)
	}
	// a prompt sent again is recent again
	x.Add(0, old)
	for i := range 10 {
		x.Add(1, Blocks(nil, 64, []byte(fmt.Sprintf("%03d%s", 100+i, bytes.Repeat([]byte("y"), 128)))))
	}
	if m := x.Lookup(old); m.Blocks != len(old) || !m.Has(0) {
		t.Fatalf("a recent prompt was dropped: %+v", m)
	}
}

func BenchmarkBlocksAndLookup(b *testing.B) {
	x := New(64, 0)
	for i := range 64 {
		x.Add(i, Blocks(nil, DefaultBlock, prompt(i%8+1), []byte(fmt.Sprint(i))))
	}
	p := prompt(10) // about 2 KB
	buf := make([]uint64, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		x.Lookup(Blocks(buf[:0], DefaultBlock, p))
	}
}
