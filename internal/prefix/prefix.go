// Package prefix is an approximate index of the prompt prefixes a pool sent
// to each of its members, so a conversation's next turn can go
// where its earlier turns are still in the engine's KV cache.
//
// A prompt is cut into fixed-size blocks of bytes (no tokenizer), and block
// i is named by a hash chained over blocks 0…i, as SGLang's and vLLM's
// routers and vLLM's own prefix cache name theirs: equal hashes at block i
// mean (up to a 64-bit collision) equal prompts up to its end. The index
// maps each block hash it holds to the members it was sent to, and keeps at
// most a fixed number of hashes, dropping the least recently sent: a
// prompt's first blocks are touched by every turn that shares them, so an
// LRU drops tails before heads.
//
// The index is each front door's own: nothing is shared between gateways,
// and the hash seed is the process's.
package prefix

import (
	"encoding/binary"
	"hash/maphash"
	"sync"
)

// Defaults.
const (
	DefaultBlock = 256     // bytes in a block
	DefaultCap   = 1 << 16 // block hashes an index holds: 16 MiB of prompt at 256 bytes a block
)

var seed = maphash.MakeSeed()

// Blocks appends to dst the chained hashes of the whole blocks of size
// bytes in the concatenation of parts; a tail shorter than a block has no
// hash. It allocates nothing when dst has room.
func Blocks(dst []uint64, size int, parts ...[]byte) []uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var prev [8]byte
	fill := 0 // bytes of the current block written
	for _, p := range parts {
		for len(p) > 0 {
			if fill == 0 {
				h.Reset()
				_, _ = h.Write(prev[:])
			}
			n := min(size-fill, len(p))
			_, _ = h.Write(p[:n])
			p, fill = p[n:], fill+n
			if fill == size {
				sum := h.Sum64()
				dst = append(dst, sum)
				binary.LittleEndian.PutUint64(prev[:], sum)
				fill = 0
			}
		}
	}
	return dst
}

// Index is the prefix index of one pool: for each block hash it holds, the
// members (numbered 0…n-1) it was sent to. Safe for concurrent use.
type Index struct {
	members int
	words   int // uint64 words of a member set
	cap     int

	mu    sync.Mutex
	nodes map[uint64]*node
	head  node // sentinel of the LRU ring: head.next is the most recent
}

type node struct {
	hash       uint64
	set        []uint64 // members, a bit each
	prev, next *node
}

// New makes an index for members members that holds at most cap block
// hashes (DefaultCap when cap ≤ 0).
func New(members, cap int) *Index {
	if cap <= 0 {
		cap = DefaultCap
	}
	x := &Index{members: members, words: (members + 63) / 64, cap: cap, nodes: map[uint64]*node{}}
	x.head.prev, x.head.next = &x.head, &x.head
	return x
}

// Len is how many block hashes the index holds.
func (x *Index) Len() int {
	x.mu.Lock()
	defer x.mu.Unlock()
	return len(x.nodes)
}

// Add records that a prompt of these blocks was sent to member.
func (x *Index) Add(member int, blocks []uint64) {
	if member < 0 || member >= x.members {
		return
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	for _, b := range blocks {
		n := x.nodes[b]
		if n == nil {
			n = x.newNode(b)
		} else {
			n.unlink()
		}
		n.set[member/64] |= 1 << (member % 64)
		x.pushFront(n)
	}
}

func (x *Index) newNode(b uint64) *node {
	var n *node
	if len(x.nodes) >= x.cap {
		// reuse the least recent: the bound holds, and nothing allocates
		n = x.head.prev
		n.unlink()
		delete(x.nodes, n.hash)
		clear(n.set)
	} else {
		n = &node{set: make([]uint64, x.words)}
	}
	n.hash = b
	x.nodes[b] = n
	return n
}

func (n *node) unlink() {
	n.prev.next, n.next.prev = n.next, n.prev
}

func (x *Index) pushFront(n *node) {
	n.prev, n.next = &x.head, x.head.next
	x.head.next.prev = n
	x.head.next = n
}

// Match is what Lookup found: the members that were sent the longest
// prefix of the prompt, and how many of its blocks that prefix is.
type Match struct {
	Blocks  int
	members []uint64
}

// Has reports whether member was sent the matched prefix.
func (m Match) Has(member int) bool {
	return m.Blocks > 0 && member >= 0 && member/64 < len(m.members) && m.members[member/64]&(1<<(member%64)) != 0
}

// Lookup returns the members that were sent the longest prefix of these
// blocks. It does not touch the LRU: only what is sent counts as use.
func (x *Index) Lookup(blocks []uint64) Match {
	x.mu.Lock()
	defer x.mu.Unlock()
	var m Match
	var cur []uint64
	for i, b := range blocks {
		n := x.nodes[b]
		if n == nil {
			break
		}
		if cur == nil {
			cur = make([]uint64, x.words)
			copy(cur, n.set)
		} else {
			any := false
			for w := range cur {
				if cur[w]&n.set[w] != 0 {
					any = true
				}
			}
			if !any {
				break // nobody was sent block i after the blocks before it
			}
			for w := range cur {
				cur[w] &= n.set[w]
			}
		}
		m.Blocks = i + 1
	}
	if m.Blocks > 0 {
		m.members = cur
	}
	return m
}
