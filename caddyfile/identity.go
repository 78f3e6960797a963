package caddyfile

import (
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// parseIdentity parses
//
//	identity <placeholder> [{
//		groups <placeholder>
//		user <id> { <key rules> }
//		group <name> { <key rules> }
//		default { <key rules> }
//	}]
//
// A block's position is kept for errors of the whole config's validation.
func parseIdentity(d *cf.Dispenser) (hconfig.Identity, error) {
	var id hconfig.Identity
	var err error
	if id.User, err = blockArg(d, "identity takes the placeholder that names who is asking: identity {http.auth.user.id}"); err != nil {
		return id, err
	}
	seen := map[string]pos{}
	set := settings{}
	for nesting := d.Nesting(); d.NextBlock(nesting); {
		sub := d.Val()
		switch sub {
		case "groups", "default":
			if err := set.once(d); err != nil {
				return id, err
			}
		}
		switch sub {
		case "groups":
			if err := oneArg(d, &id.Groups); err != nil {
				return id, err
			}
		case "user", "group":
			at := here(d)
			name, err := blockArg(d, sub+" takes a name and a block of rules: "+sub+" <name> { models … }")
			if err != nil {
				return id, err
			}
			if first, ok := seen[sub+" "+name]; ok {
				return id, at.errf("%s %s is given twice (first at %s)", sub, name, first)
			}
			seen[sub+" "+name] = at
			k := hconfig.Key{Name: name}
			if err := parseRules(d, &k, "identity "+sub+" "+name, false); err != nil {
				return id, err
			}
			if sub == "user" {
				id.Users = append(id.Users, k)
			} else {
				id.GroupRules = append(id.GroupRules, k)
			}
		case "default":
			if d.NextArg() {
				return id, d.ArgErr()
			}
			var k hconfig.Key
			if err := parseRules(d, &k, "identity default", false); err != nil {
				return id, err
			}
			id.Default = &k
		default:
			return id, unknownSubdirective(d, "identity", "", identityOptions)
		}
	}
	return id, nil
}
