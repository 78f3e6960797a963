package caddyfile

import (
	"strconv"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// balanceOptions are the subdirectives of a pool's balance block.
var balanceOptions = []string{"cache_threshold", "balance_abs_threshold", "balance_rel_threshold", "block", "index_size"}

// parseBalance parses a pool's
//
//	balance affinity|least_loaded|round_robin {
//		cache_threshold       <share 0–1>   # 0.3
//		balance_abs_threshold <requests>    # 64
//		balance_rel_threshold <ratio ≥ 1>   # 1.5
//		block                 <bytes>       # 256
//		index_size            <blocks>      # 65536
//	}
//
// (the block is optional).
func parseBalance(d *cf.Dispenser) (*hconfig.Balance, error) {
	b := &hconfig.Balance{}
	if !d.NextArg() {
		return nil, d.Errf("balance takes affinity, least_loaded or round_robin")
	}
	switch b.Policy = d.Val(); b.Policy {
	case hconfig.BalanceAffinity, hconfig.BalanceLeastLoaded, hconfig.BalanceRoundRobin:
	default:
		return nil, d.Errf("balance takes affinity, least_loaded or round_robin, not %q", b.Policy)
	}
	if d.NextArg() {
		return nil, d.ArgErr()
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return nil, err
		}
		var err error
		switch d.Val() {
		case "cache_threshold":
			b.CacheThreshold, err = floatArg(d, 0.01, 1)
		case "balance_abs_threshold":
			err = countArg(d, &b.AbsThreshold, 1)
		case "balance_rel_threshold":
			b.RelThreshold, err = floatArg(d, 1, 1000)
		case "block":
			err = countArg(d, &b.Block, 16)
		case "index_size":
			err = countArg(d, &b.IndexSize, 1)
		default:
			err = unknownSubdirective(d, "balance", "balance "+b.Policy, balanceOptions)
		}
		if err != nil {
			return nil, err
		}
	}
	return b, nil
}

// floatArg parses the one argument of the current subdirective as a number
// in [lo, hi].
func floatArg(d *cf.Dispenser, lo, hi float64) (float64, error) {
	name := d.Val()
	var s string
	if !d.AllArgs(&s) {
		return 0, d.ArgErr()
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || v < lo || v > hi {
		return 0, d.Errf("%s takes a number from %g to %g, not %q", name, lo, hi, s)
	}
	return v, nil
}
