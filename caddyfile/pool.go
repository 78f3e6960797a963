package caddyfile

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// A pool block: its members and how it balances (balance.go).

func parsePool(d *cf.Dispenser) (hconfig.PoolConfig, error) {
	var pc hconfig.PoolConfig
	var err error
	if pc.Name, err = blockArg(d, "pool needs a name: pool <name> { member … }"); err != nil {
		return pc, err
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if sub := d.Val(); sub != "member" {
			if err := set.once(d); err != nil {
				return pc, err
			}
		}
		switch sub := d.Val(); sub {
		case "member":
			var m string
			if err := oneArg(d, &m); err != nil {
				return pc, err
			}
			pc.Members = append(pc.Members, m)
		case "sticky":
			args := d.RemainingArgs()
			if len(args) != 2 || (args[0] != "header" && args[0] != "body") {
				return pc, d.Errf("sticky takes header <name> or body user|prompt_cache_key")
			}
			if args[0] == "header" {
				pc.StickyHeader = args[1]
			} else if args[1] != "user" && args[1] != "prompt_cache_key" {
				return pc, d.Errf("sticky body takes user or prompt_cache_key, not %q", args[1])
			} else {
				pc.StickyBody = args[1]
			}
		case "failover":
			args := d.RemainingArgs()
			if len(args) < 1 || len(args) > 2 {
				return pc, d.Errf("failover takes an attempt count and optionally a time: failover 3 60s")
			}
			n, err := strconv.Atoi(args[0])
			if err != nil || n < 1 {
				return pc, d.Errf("failover takes an attempt count of 1 or more, not %q", args[0])
			}
			pc.FailoverAttempts = n
			if len(args) == 2 {
				v, err := caddy.ParseDuration(args[1])
				if err != nil || v <= 0 {
					return pc, d.Errf("bad failover time %q", args[1])
				}
				pc.FailoverTime = caddy.Duration(v)
			}
		case "breaker":
			n, cool, err := parseBreaker(d)
			if err != nil {
				return pc, err
			}
			pc.BreakerFailures, pc.BreakerCooldown = n, cool
		case "warm_spare":
			if err := parseWarmSpare(d, &pc); err != nil {
				return pc, err
			}
		case "balance":
			if pc.Balance, err = parseBalance(d); err != nil {
				return pc, err
			}
		case "hedge_after", "hedge_budget":
			if _, err := hedgeOption(d, &pc.Hedge); err != nil {
				return pc, err
			}
		case "prefer":
			if err := parsePrefer(d, &pc); err != nil { // cheap.go
				return pc, err
			}
		case "dynamic", "template":
			if err := parseDynamic(d, &pc); err != nil {
				return pc, err
			}
		default:
			return pc, unknownSubdirective(d, "pool", "pool "+pc.Name, poolOptions)
		}
	}
	if len(pc.Members) == 0 && len(pc.Dynamic) == 0 {
		return pc, d.Errf("pool %s has no members", pc.Name)
	}
	return pc, nil
}
