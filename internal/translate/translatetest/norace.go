//go:build !race

package translatetest

// RaceEnabled is false: allocations counted are the gateway's.
const RaceEnabled = false
