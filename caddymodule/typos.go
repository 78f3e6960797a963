package caddymodule

import (
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// The directive's name misspelt the likely ways (the repository is
// caddy-llm-gateway, so a hyphen comes first) and the directive written
// among the global options: Caddy's own answer, "unrecognized directive",
// does not say what was meant. These names are registered only to say it,
// with the line.
var directiveTypos = []string{"llm-gateway", "llmgateway", "llm_gatway", "llm_gateways", "llm-gateways"}

func init() {
	for _, name := range directiveTypos {
		httpcaddyfile.RegisterDirective(name, func(h httpcaddyfile.Helper) ([]httpcaddyfile.ConfigValue, error) {
			h.Next()
			return nil, h.Errf("unrecognized directive %s (did you mean llm_gateway?)", h.Val())
		})
	}
	httpcaddyfile.RegisterGlobalOption("llm_gateway", func(d *caddyfile.Dispenser, _ any) (any, error) {
		d.Next()
		return nil, d.Err("llm_gateway is a directive of a site, not a global option: write it in a site block such as :8080 { llm_gateway { … } }")
	})
}
