package caddyfile

import (
	"strconv"
	"strings"

	"github.com/caddyserver/caddy/v2"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// hedgeOption parses hedge_after and hedge_budget, on an engine (and in
// defaults) or a pool, into *h: `hedge_after 800ms`, `hedge_after auto`,
// `hedge_after off` (off also undoes a hedge the defaults set), and
// `hedge_budget 10%`. It reports whether the line was one of them.
func hedgeOption(d *cf.Dispenser, h **engines.Hedge) (bool, error) {
	name := d.Val()
	if name != "hedge_after" && name != "hedge_budget" {
		return false, nil
	}
	args := d.RemainingArgs()
	if len(args) != 1 {
		if name == "hedge_after" {
			return true, d.Errf("hedge_after takes a duration such as 800ms, auto, or off")
		}
		return true, d.Errf("hedge_budget takes a share of requests such as 10%%")
	}
	if *h == nil {
		*h = &engines.Hedge{}
	}
	if name == "hedge_budget" {
		s := args[0]
		v, err := strconv.ParseFloat(strings.TrimSuffix(s, "%"), 64)
		if !strings.HasSuffix(s, "%") || err != nil || v < 0 || v > 100 {
			return true, d.Errf("hedge_budget takes a share of requests from 0%% to 100%%, such as 10%%, not %q", s)
		}
		(*h).Budget = v / 100
		return true, nil
	}
	switch s := args[0]; s {
	case "auto":
		(*h).Auto, (*h).After = true, 0
	case "off":
		(*h).Auto, (*h).After = false, 0
	default:
		v, err := caddy.ParseDuration(s)
		if err != nil || v <= 0 {
			return true, d.Errf("hedge_after takes a duration such as 800ms, auto, or off, not %q", s)
		}
		(*h).Auto, (*h).After = false, caddy.Duration(v)
	}
	return true, nil
}
