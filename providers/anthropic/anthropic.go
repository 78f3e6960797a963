// Package anthropic is the provider anthropic: Anthropic's API, Messages at
// /v1/messages (and count_tokens) with the key in x-api-key and an
// anthropic-version, which a client that speaks Messages sends itself and
// every other request gets (docs/provider-anthropic.md).
package anthropic

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func init() {
	caddy.RegisterModule(new(Anthropic))
}

// Endpoint is Anthropic's API, the engine's default `to`.
const Endpoint = "https://api.anthropic.com"

// Anthropic is the provider anthropic.
type Anthropic struct {
	// APIVersion is the anthropic-version sent when the client sent none
	// (a client that speaks Messages sends its own). Default: 2023-06-01.
	APIVersion string `json:"api_version,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*Anthropic) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".anthropic",
		New: func() caddy.Module { return new(Anthropic) },
	}
}

// Name is "anthropic".
func (*Anthropic) Name() string { return "anthropic" }

// Engine gives the engine Messages, Anthropic's endpoint and x-api-key.
func (*Anthropic) Engine(e *providers.Engine) error {
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Messages.String()}
	}
	if e.To == "" {
		e.To = Endpoint
	}
	if e.KeyHeader == "" {
		e.KeyHeader = "x-api-key"
	}
	return nil
}

// version is the anthropic-version the engine's requests carry.
func (p *Anthropic) version() string {
	if p.APIVersion == "" {
		return api.AnthropicVersion
	}
	return p.APIVersion
}

// Target sends a Messages client's path as it is (count_tokens too, and the
// client's ?beta=true), and any translated request to /v1/messages.
func (*Anthropic) Target(u *url.URL, r providers.Request) {
	if r.API == api.Messages && strings.HasPrefix(r.Path, "/v1/messages") {
		u.Path = providers.JoinPath(r.Base.Path, r.Path)
		return
	}
	u.Path, u.RawQuery = providers.JoinPath(r.Base.Path, "/v1/messages"), r.Base.RawQuery
}

// Authorize adds the engine's anthropic-version when the client sent none.
func (p *Anthropic) Authorize(_ context.Context, r *http.Request, _ []byte) error {
	if r.Header.Get("Anthropic-Version") == "" {
		r.Header.Set("Anthropic-Version", p.version())
	}
	return nil
}

// Check is the model list, GET /v1/models: free, and refused without a
// good key.
func (*Anthropic) Check(u, base *url.URL) {
	u.Path, u.RawPath, u.RawQuery = providers.JoinPath(base.Path, "/v1/models"), "", base.RawQuery
}

// routes are Anthropic's endpoints /upstream/ may pass, by name: Messages
// and count_tokens, whose body names the model (checked, and rewritten to
// the engine's, as on /v1/). Batches and files name models inside their
// items, or none: they are no route a key's models bound.
var routes = [...]struct{ name, path string }{
	{"messages", "/v1/messages"},
	{"count_tokens", "/v1/messages/count_tokens"},
}

// Routes are messages and count_tokens.
func (*Anthropic) Routes() []string {
	var names []string
	for _, r := range routes {
		names = append(names, r.name)
	}
	return names
}

// ReadRoute reads /v1/messages and /v1/messages/count_tokens.
func (*Anthropic) ReadRoute(tail string) (providers.Route, bool) {
	for _, r := range routes {
		if tail == r.path {
			return providers.Route{Name: r.name}, true
		}
	}
	return providers.Route{}, false
}

// RouteTarget sends a route to its path under the engine's base.
func (*Anthropic) RouteTarget(u, base *url.URL, name, _ string) {
	for _, r := range routes {
		if r.name == name {
			u.Path, u.RawPath, u.RawQuery = providers.JoinPath(base.Path, r.path), "", base.RawQuery
		}
	}
}

// UnmarshalCaddyfile reads
//
//	provider anthropic {
//		api_version <version>
//	}
//
// whose line may also stand in the engine's block beside `provider
// anthropic` (EngineLines).
func (p *Anthropic) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the provider's name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		if err := p.UnmarshalEngineLine(d); err != nil {
			return err
		}
	}
	return nil
}

// EngineLines are the engine block's lines the provider takes.
func (*Anthropic) EngineLines() []string { return []string{"api_version"} }

// UnmarshalEngineLine reads `api_version <version>`.
func (p *Anthropic) UnmarshalEngineLine(d *caddyfile.Dispenser) error {
	switch d.Val() {
	case "api_version":
		if !d.AllArgs(&p.APIVersion) {
			return d.ArgErr()
		}
		return nil
	}
	return d.Errf("provider anthropic takes api_version, not %q", d.Val())
}

// Interface guards
var (
	_ providers.Provider    = (*Anthropic)(nil)
	_ providers.Authorizer  = (*Anthropic)(nil)
	_ providers.Passer      = (*Anthropic)(nil)
	_ providers.Checker     = (*Anthropic)(nil)
	_ caddyfile.Unmarshaler = (*Anthropic)(nil)
)
