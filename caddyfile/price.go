package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// priceParts are the words of a price line, each followed by dollars per
// million tokens.
var priceParts = []string{"input", "output", "cache_read", "cache_write", "reasoning"}

// parsePrice parses
//
//	price <model> input <$/M> output <$/M> [cache_read <$/M>] [cache_write <$/M>] [reasoning <$/M>]
//
// where <model> is ENGINE/MODEL, a model, or an engine, and each price is
// US dollars per million tokens ("3", "0.30", "0.075").
func parsePrice(d *cf.Dispenser) (hconfig.Price, error) {
	var p hconfig.Price
	args := d.RemainingArgs()
	if len(args) < 5 || len(args)%2 == 0 {
		return p, d.Errf("price takes a model and its prices per million tokens: price <model> input 3 output 15 [cache_read 0.30] [cache_write 3.75] [reasoning 15]")
	}
	p.Model = args[0]
	seen := map[string]bool{}
	for i := 1; i < len(args); i += 2 {
		part, v := args[i], args[i+1]
		if seen[part] {
			return p, d.Errf("price %s: %s is given twice", p.Model, part)
		}
		seen[part] = true
		r, err := price.ParseRate(v)
		if err != nil {
			return p, d.Errf("price %s: %s: %v (dollars per million tokens, such as 3 or 0.075)", p.Model, part, err)
		}
		switch part {
		case "input":
			p.Input = r
		case "output":
			p.Output = r
		case "cache_read":
			p.CacheRead = &r
		case "cache_write":
			p.CacheWrite = &r
		case "reasoning":
			p.Reasoning = &r
		default:
			return p, d.Errf("price %s: unknown part %q (%s)", p.Model, part, joinOr(priceParts))
		}
	}
	if !seen["input"] || !seen["output"] {
		return p, d.Errf("price %s needs an input and an output price (0 for free)", p.Model)
	}
	return p, nil
}

func joinOr(words []string) string {
	s := ""
	for i, w := range words {
		switch {
		case i == 0:
		case i == len(words)-1:
			s += " or "
		default:
			s += ", "
		}
		s += w
	}
	return s
}
