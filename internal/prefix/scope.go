package prefix

import (
	"encoding/binary"
	"hash/maphash"
)

// Scope rewrites blocks in place into the blocks of the same prompt within
// scope, and returns them (a tenant's data is its own: docs/door.md#a-tenants-data-is-its-own).
// The gateway scopes by the caller's key, so that two keys sending the same
// prompt never match each other's blocks: one tenant could otherwise learn,
// from where its request went and how fast its engine answered (a KV cache
// hit shows in the timings), that another tenant sent that prompt.
//
// Block i within a scope is the hash of the scope and the chained block i:
// equal scoped hashes still mean equal prompts up to block i, now within
// one scope. The hash is seeded with the process's seed, so no prompt sent
// in one scope can be made to hash as another scope's (the anonymous scope,
// "", included).
func Scope(blocks []uint64, scope string) []uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	var b [8]byte
	for i, x := range blocks {
		h.Reset()
		_, _ = h.WriteString(scope)
		binary.LittleEndian.PutUint64(b[:], x) // fixed width last: (scope, block) reads one way
		_, _ = h.Write(b[:])
		blocks[i] = h.Sum64()
	}
	return blocks
}
