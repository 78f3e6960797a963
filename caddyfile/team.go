package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// A team block: budgets that several keys share (each key names it with
// its own `team` line).

// parseTeam parses
//
//	team <name> {
//		rate <limit…>                     # requests per window, every member's together
//		tokens <limit…>                   # prompt + completion tokens per window
//		spend <dollars/window…>           # US dollars per window: 100/mo
//		over_budget refuse|fallback <model>  # once a team budget is spent; a member's own wins
//	}
func parseTeam(d *cf.Dispenser) (hconfig.Team, error) {
	var t hconfig.Team
	var err error
	if t.Name, err = blockArg(d, "team needs a name: team <name> { spend 100/mo }"); err != nil {
		return t, err
	}
	what := "team " + t.Name
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return t, err
		}
		switch sub := d.Val(); sub {
		case "rate", "tokens":
			specs := d.RemainingArgs()
			if len(specs) == 0 {
				return t, d.Errf("%s takes limits such as 60/m or 200k/d", sub)
			}
			for _, spec := range specs {
				l, err := quota.ParseLimit(spec)
				if err != nil {
					return t, d.Errf("%s: %s: %v", what, sub, err)
				}
				if sub == "rate" {
					t.Rate = append(t.Rate, l)
				} else {
					t.Tokens = append(t.Tokens, l)
				}
			}
		case "spend":
			if t.Spend, err = spendArgs(d, what, nil); err != nil {
				return t, err
			}
		case "over_budget":
			args := d.RemainingArgs()
			switch {
			case len(args) == 1 && args[0] == "refuse":
			case len(args) == 2 && args[0] == "fallback":
				t.OverBudgetFallback = args[1]
			default:
				return t, d.Errf("over_budget takes refuse or fallback <model>")
			}
		default:
			return t, unknownSubdirective(d, "team", what, teamOptions)
		}
	}
	return t, nil
}

// spendArgs reads a spend line's budgets: dollars per window, 1/d 50/mo;
// a key's (at not nil) may end in cheap_at 80%.
func spendArgs(d *cf.Dispenser, what string, at *int) ([]quota.SpendLimit, error) {
	specs := d.RemainingArgs()
	if len(specs) == 0 || specs[0] == "cheap_at" {
		return nil, d.Errf("spend takes budgets in US dollars per window, such as 1/d or 50/mo")
	}
	var out []quota.SpendLimit
	for i := 0; i < len(specs); i++ {
		spec := specs[i]
		if spec == "cheap_at" { // a key's share of its budget (cheap.go)
			if err := cheapAt(d, what, specs[i+1:], at); err != nil {
				return nil, err
			}
			i++
			continue
		}
		l, err := quota.ParseSpend(spec)
		if err != nil {
			return nil, d.Errf("%s: %v", what, err)
		}
		out = append(out, l)
	}
	return out, nil
}
