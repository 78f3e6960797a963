package caddyfile

import (
	"strconv"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// parseWarmSpare reads a pool's warm_spare [<n>]: a request that finds
// every ready member saturated, or with n requests waiting for a place
// (itself included; default 1: every place is taken), starts the first
// stopped cmd member in the background (handler/spare.go).
func parseWarmSpare(d *cf.Dispenser, pc *hconfig.PoolConfig) error {
	args := d.RemainingArgs()
	switch len(args) {
	case 0:
		pc.WarmSpare = 1
		return nil
	case 1:
		n, err := strconv.Atoi(args[0])
		if err != nil || n < 1 {
			return d.Errf("warm_spare takes a count of waiting requests of 1 or more, not %q", args[0])
		}
		pc.WarmSpare = n
		return nil
	}
	return d.Errf("warm_spare takes at most one count of waiting requests: warm_spare 2")
}
