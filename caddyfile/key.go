package caddyfile

import (
	"strconv"

	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// A key block: a caller's key, its models and limits.

// parseKey parses `key <name> <token> [{ models … rate … tokens … spend …
// team <name> over_budget refuse|fallback <model> }]`.
func parseKey(d *cf.Dispenser) (hconfig.Key, error) {
	var k hconfig.Key
	args := d.RemainingArgs()
	if len(args) != 2 {
		return k, d.Errf("key takes a name and a token: key <name> <token> [{ … }]")
	}
	if err := hconfig.CheckKey(hconfig.Key{Value: args[1]}); err != nil {
		return k, d.Errf("key %s: %v", args[0], err)
	}
	k.Name, k.Value = args[0], args[1]
	return k, parseRules(d, &k, "key "+k.Name, true)
}

// parseRules parses the block of rules of a key, or of an identity's
// user, group or default (what names it in errors; an identity is never
// an operator).
func parseRules(d *cf.Dispenser, k *hconfig.Key, what string, operator bool) error {
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		if sub != "rate" && sub != "tokens" && sub != "spend" {
			if err := set.once(d); err != nil {
				return err
			}
		}
		switch sub {
		case "models":
			k.Models = d.RemainingArgs()
			if len(k.Models) == 0 {
				return d.ArgErr()
			}
		case "rate", "tokens":
			specs := d.RemainingArgs()
			if len(specs) == 0 {
				return d.Errf("%s takes limits such as 60/m or 200k/d", sub)
			}
			for _, spec := range specs {
				l, err := quota.ParseLimit(spec)
				if err != nil {
					return d.Errf("%s: %s: %v", what, sub, err)
				}
				if sub == "rate" {
					k.Rate = append(k.Rate, l)
				} else {
					k.Tokens = append(k.Tokens, l)
				}
			}
		case "spend":
			ls, err := spendArgs(d, what, &k.CheapAt)
			if err != nil {
				return err
			}
			k.Spend = append(k.Spend, ls...)
		case "team":
			if err := oneArg(d, &k.Team); err != nil {
				return err
			}
		case "reserve":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			n, err := quota.ParseCount(v)
			if err != nil || n < 1 {
				return d.Errf("%s: reserve takes a token count such as 1024 or 4k, not %q", what, v)
			}
			k.Reserve = n
		case "priority":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return d.Errf("%s: priority takes a whole number (higher goes first), not %q", what, v)
			}
			k.Priority = n
		case "operator":
			if d.NextArg() {
				return d.ArgErr()
			}
			if !operator {
				return d.Errf("%s: an identity is never an operator (give the operator a key of its own)", what)
			}
			k.Operator = true
		case "hedge":
			var v string
			if err := oneArg(d, &v); err != nil {
				return err
			}
			if v != "off" && v != "on" {
				return d.Errf("%s: hedge takes off (never start a second attempt beside a slow one for this key) or on, not %q", what, v)
			}
			k.NoHedge = v == "off"
		case "over_budget":
			args := d.RemainingArgs()
			switch {
			case len(args) == 1 && args[0] == "refuse":
			case len(args) == 2 && args[0] == "fallback":
				k.OverBudgetFallback = args[1]
			default:
				return d.Errf("over_budget takes refuse or fallback <model>")
			}
		default:
			return unknownSubdirective(d, "key", what, keyOptions)
		}
	}
	return nil
}
