//go:build race

package translatetest

// RaceEnabled: the race detector drops a quarter of what sync.Pool is
// given, so allocations counted under it are not the gateway's.
const RaceEnabled = true
