package config

import "fmt"

// Spend-aware routing (docs/pools.md#prefer-cheap, docs/keys.md#spend-aware-routing):
// a pool whose members are tried cheapest first, and a key whose requests
// are, once it has spent a share of its money budget.

// PreferCheap is a pool's `prefer cheap`: among the members able to serve,
// the one of the lowest price is tried first.
const PreferCheap = "cheap"

// checkPrefer checks a pool's prefer. It and checkCheapAt take plain
// values, so this file leans on no other of the package's.
func checkPrefer(pool, prefer string) error {
	if prefer != "" && prefer != PreferCheap {
		return fmt.Errorf("pool %s: prefer takes cheap, not %q", pool, prefer)
	}
	return nil
}

// checkCheapAt checks a key's cheap_at: a share, in percent, of a money
// budget of its own (it has spends of them).
func checkCheapAt(label string, at, spends int) error {
	if at == 0 {
		return nil
	}
	if at < 1 || at > 100 {
		return fmt.Errorf("%s: cheap_at is a share of its money budget from 1%% to 100%%, not %d%%", label, at)
	}
	if spends == 0 {
		return fmt.Errorf("%s: cheap_at needs a money budget of the key's own (spend 10/d cheap_at 80%%)", label)
	}
	return nil
}
