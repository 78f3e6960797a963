package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/history"
)

// parseHistory parses `history [off] [{ keep <n>; max_age <d>; memory }]`.
func parseHistory(d *cf.Dispenser) (history.Config, error) {
	var h history.Config
	if d.NextArg() {
		if d.Val() != "off" {
			return h, d.Errf("history takes off or a block, not %q", d.Val())
		}
		h.Off = true
		if d.NextArg() {
			return h, d.ArgErr()
		}
	}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if h.Off {
			return h, d.Errf("history off takes no block")
		}
		switch d.Val() {
		case "keep":
			if err := countArg(d, &h.Keep, 1); err != nil {
				return h, err
			}
		case "max_age":
			if err := durationArg(d, &h.MaxAge); err != nil {
				return h, err
			}
		case "memory":
			if d.NextArg() {
				return h, d.ArgErr()
			}
			h.Memory = true
		default:
			return h, unknownSubdirective(d, "history", "", historyOptions)
		}
	}
	if err := h.Validate(); err != nil {
		return h, d.Errf("%v", err)
	}
	return h, nil
}
