//go:build race

package translate

// raceEnabled: the race detector drops a quarter of what sync.Pool is
// given, so allocations counted under it are not the gateway's.
const raceEnabled = true
