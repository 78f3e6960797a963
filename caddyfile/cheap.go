package caddyfile

import (
	"strconv"
	"strings"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// Spend-aware routing (docs/pools.md#prefer-cheap): a pool's `prefer
// cheap`, and a key's `spend 10/d cheap_at 80%`, the share of its money
// budget past which its requests try pools' cheapest members first.

// parsePrefer reads a pool's `prefer cheap`.
func parsePrefer(d *cf.Dispenser, pc *hconfig.PoolConfig) error {
	args := d.RemainingArgs()
	if len(args) != 1 || args[0] != hconfig.PreferCheap {
		return d.Errf("prefer takes cheap: prefer cheap")
	}
	pc.Prefer = args[0]
	return nil
}

// cheapAt reads what follows a key's spend line's cheap_at: a share of
// its money budget, 1% to 100%. at is nil for a team's spend line.
func cheapAt(d *cf.Dispenser, what string, rest []string, at *int) error {
	if at == nil {
		return d.Errf("%s: cheap_at is a key's (spend 10/d cheap_at 80%%), not a team's", what)
	}
	if len(rest) == 0 {
		return d.Errf("%s: cheap_at takes a share of the money budget: spend 10/d cheap_at 80%%", what)
	}
	n, err := strconv.Atoi(strings.TrimSuffix(rest[0], "%"))
	if err != nil || !strings.HasSuffix(rest[0], "%") || n < 1 || n > 100 {
		return d.Errf("%s: cheap_at takes a share from 1%% to 100%%, such as 80%%, not %q", what, rest[0])
	}
	*at = n
	return nil
}
