// Package compatible is an example of a provider written outside
// caddy-llm-gateway's module and built in with xcaddy:
//
//	xcaddy build --with github.com/llmgateway/caddy-llm-gateway \
//		--with example.com/llm-gateway-provider-compatible
//
// The provider openai_compatible is an OpenAI-compatible cloud (Together,
// Fireworks, DeepInfra, Groq and the like): Chat Completions at the
// engine's `to`, which the provider's base_url fills in when the engine
// has none, the engine's api_key as a bearer token. Every client API
// reaches it: a Messages or Responses request is translated into Chat
// Completions by the gateway, as for any engine that speaks Chat.
//
// It is the whole of what a provider needs: a Caddy module in the
// providers' namespace (providers.Namespace) that implements
// providers.Provider, and a caddyfile.Unmarshaler for its block. The
// optional interfaces of package providers (an Authorizer, a
// FailureReader, a Checker…) are added the same way, as methods.
package compatible

import (
	"errors"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func init() {
	caddy.RegisterModule(new(Compatible))
}

// Compatible is the provider openai_compatible.
type Compatible struct {
	// BaseURL is the cloud's OpenAI base URL, as its docs give it to the
	// OpenAI SDKs (https://api.together.xyz/v1): the engine's `to` when
	// its block names none.
	BaseURL string `json:"base_url,omitempty"`
}

// CaddyModule returns the Caddy module information: its ID is the
// providers' namespace and the name an engine's provider line says.
func (*Compatible) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".openai_compatible",
		New: func() caddy.Module { return new(Compatible) },
	}
}

// Name is "openai_compatible".
func (*Compatible) Name() string { return "openai_compatible" }

// Engine makes the engine speak Chat Completions at the base URL, and
// says when it has nowhere to send a request.
func (p *Compatible) Engine(e *providers.Engine) error {
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Chat.String()}
	}
	if e.To == "" {
		e.To = p.BaseURL
	}
	if e.To == "" {
		return errors.New("provider openai_compatible needs base_url, or the engine's to")
	}
	return nil
}

// Target sends a request to its API's path under the base URL, whose /v1
// (as the clouds write their base URL) is not doubled.
func (*Compatible) Target(u *url.URL, r providers.Request) {
	base := strings.TrimRight(r.Base.Path, "/")
	p := r.Path
	if strings.HasSuffix(base, "/v1") {
		p = strings.TrimPrefix(p, "/v1")
	}
	u.Path, u.RawPath = base+p, ""
}

// UnmarshalCaddyfile reads
//
//	provider openai_compatible {
//		base_url <url>
//	}
func (p *Compatible) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the provider's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "base_url":
			if !d.NextArg() {
				return d.ArgErr()
			}
			p.BaseURL = d.Val()
			if d.NextArg() {
				return d.ArgErr()
			}
		default:
			return d.Errf("provider openai_compatible: unknown option %q", d.Val())
		}
	}
	return nil
}

// Interface guards: what the gateway and Caddy use the module as.
var (
	_ providers.Provider    = (*Compatible)(nil)
	_ caddyfile.Unmarshaler = (*Compatible)(nil)
)
