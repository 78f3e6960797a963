// Package rendezvous is highest-random-weight hashing: a session key's
// member, the same on every gateway.
package rendezvous

import (
	"hash/fnv"
	"io"
)

// Hash is a string's FNV-1a hash.
func Hash(s string) uint64 {
	h := fnv.New64a()
	_, _ = io.WriteString(h, s)
	return h.Sum64()
}

// Score is the rendezvous score of a key and a member, by their Hash: a
// 64-bit finalizer (splitmix64) of the two. A key goes to the member with
// the highest score, on every gateway alike, with no state shared.
func Score(key, member uint64) uint64 {
	x := key ^ member
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}
