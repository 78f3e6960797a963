package caddyfile

import (
	"github.com/caddyserver/caddy/v2/caddyconfig"
	cf "github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// parseDynamic reads a pool's members from a source, with the syntax of
// reverse_proxy's own `dynamic` (Caddy's module parses its block), and the
// engine each member is made from:
//
//	dynamic srv|a|multi [<args…>] {
//		…                       # as in reverse_proxy
//	}
//	template <engine>
func parseDynamic(d *cf.Dispenser, pc *hconfig.PoolConfig) error {
	if d.Val() == "template" {
		return oneArg(d, &pc.Template)
	}
	if !d.NextArg() {
		return d.Errf("dynamic takes a source of members: dynamic srv|a|multi …")
	}
	source := d.Val()
	id := "http.reverse_proxy.upstreams." + source
	unm, err := cf.UnmarshalModule(d, id)
	if err != nil {
		return err
	}
	src, ok := unm.(reverseproxy.UpstreamSource)
	if !ok {
		return d.Errf("module %s is not a source of upstreams", id)
	}
	pc.Dynamic = caddyconfig.JSONModuleObject(src, "source", source, nil)
	return nil
}
