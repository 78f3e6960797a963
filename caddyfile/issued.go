package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// parseIssuedKeys parses `issued_keys [{ secret <secret>; max <n> }]`.
func parseIssuedKeys(d *cf.Dispenser) (hconfig.IssuedKeys, error) {
	var ik hconfig.IssuedKeys
	if d.NextArg() {
		return ik, d.ArgErr()
	}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		if err := set.once(d); err != nil {
			return ik, err
		}
		switch d.Val() {
		case "secret":
			if err := oneArg(d, &ik.Secret); err != nil {
				return ik, err
			}
			// an unset variable must not quietly become a generated
			// secret, nor the shared one of several front doors
			if err := requireEnv(d, "issued_keys secret", ik.Secret); err != nil {
				return ik, err
			}
		case "max":
			if err := countArg(d, &ik.Max, 1); err != nil {
				return ik, err
			}
		default:
			return ik, unknownSubdirective(d, "issued_keys", "", issuedOptions)
		}
	}
	return ik, nil
}
