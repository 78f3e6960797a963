package config

import "fmt"

// Balance is how a pool chooses a member for a request without a session
// key: by the prompt prefix a member already holds, gated by
// load, as SGLang's and vLLM's cache-aware routers do.
type Balance struct {
	// Policy is affinity (the member that was sent the longest prefix of
	// the prompt, when it covers CacheThreshold of it and the pool is not
	// imbalanced; else the least loaded), least_loaded or round_robin.
	// Default: affinity.
	Policy string `json:"policy,omitempty"`

	// CacheThreshold is the share of the prompt (0–1) a member must have
	// been sent before for affinity to choose it. Default: 0.3.
	CacheThreshold float64 `json:"cache_threshold,omitempty"`

	// AbsThreshold and RelThreshold say when the pool is imbalanced and
	// affinity yields to the load: busiest − idlest > AbsThreshold and
	// busiest > RelThreshold × idlest (requests in flight and queued).
	// Default: the smallest capacity of the ready members where one is
	// known (their max_concurrent, or the slots llama-server's /slots
	// lists), else 64; and 1.5.
	AbsThreshold int     `json:"balance_abs_threshold,omitempty"`
	RelThreshold float64 `json:"balance_rel_threshold,omitempty"`

	// Block is the size in bytes of the prompt blocks the prefix index
	// hashes. Default: 256.
	Block int `json:"block,omitempty"`

	// IndexSize bounds the prefix index of the pool, in blocks: the least
	// recently sent are dropped beyond it (about 100 bytes each). Default:
	// 65536.
	IndexSize int `json:"index_size,omitempty"`
}

// The policies and their defaults.
const (
	BalanceAffinity    = "affinity"
	BalanceLeastLoaded = "least_loaded"
	BalanceRoundRobin  = "round_robin"

	DefaultCacheThreshold = 0.3
	DefaultAbsThreshold   = 64
	DefaultRelThreshold   = 1.5
	DefaultBlock          = 256
	DefaultIndexSize      = 1 << 16
	maxIndexSize          = 1 << 24
)

// WithDefaults returns b (nil for none) with every unset field filled in.
func (b *Balance) WithDefaults() Balance {
	var out Balance
	if b != nil {
		out = *b
	}
	if out.Policy == "" {
		out.Policy = BalanceAffinity
	}
	if out.CacheThreshold == 0 {
		out.CacheThreshold = DefaultCacheThreshold
	}
	if out.RelThreshold == 0 {
		out.RelThreshold = DefaultRelThreshold
	}
	if out.Block == 0 {
		out.Block = DefaultBlock
	}
	if out.IndexSize == 0 {
		out.IndexSize = DefaultIndexSize
	}
	return out
}

func (b *Balance) validate(pool string) error {
	if b == nil {
		return nil
	}
	switch b.Policy {
	case "", BalanceAffinity, BalanceLeastLoaded, BalanceRoundRobin:
	default:
		return fmt.Errorf("pool %s: balance takes affinity, least_loaded or round_robin, not %q", pool, b.Policy)
	}
	if b.CacheThreshold < 0 || b.CacheThreshold > 1 {
		return fmt.Errorf("pool %s: cache_threshold is a share of the prompt between 0 and 1, not %g", pool, b.CacheThreshold)
	}
	if b.AbsThreshold < 0 || b.RelThreshold < 0 || (b.RelThreshold > 0 && b.RelThreshold < 1) {
		return fmt.Errorf("pool %s: balance_abs_threshold may not be negative, and balance_rel_threshold is 1 or more", pool)
	}
	if b.Block < 0 || b.Block > 1<<20 || b.IndexSize < 0 || b.IndexSize > maxIndexSize {
		return fmt.Errorf("pool %s: block is up to 1MiB and index_size up to %d blocks", pool, maxIndexSize)
	}
	return nil
}

// AbsFor is the absolute imbalance threshold of a pool whose ready members
// serve at least capacity requests at once (0: unknown): the configured
// one, else capacity (a member more than one engine's worth of requests
// busier than another is imbalanced, as SGLang's default of 64 says for
// engines that batch dozens), else DefaultAbsThreshold.
func (b Balance) AbsFor(capacity int) int {
	switch {
	case b.AbsThreshold > 0:
		return b.AbsThreshold
	case capacity > 0:
		return capacity
	}
	return DefaultAbsThreshold
}
