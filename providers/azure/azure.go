// Package azure is the provider azure: Azure OpenAI. With an api_version,
// its deployments API (/openai/deployments/{deployment}/chat/completions
// ?api-version=…), the deployment being the model the attempt sends
// (model_name); without one, its v1 API (/openai/v1/…), which takes the
// deployment as the body's model. The key goes in api-key, or an Entra token
// as `api_key <token> Authorization`, or with `entra` a Microsoft Entra ID
// token from the credentials Azure's SDKs find, kept fresh (entra.go;
// docs/provider-azure.md).
package azure

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
	"github.com/llmgateway/caddy-llm-gateway/providers/openai"
)

func init() {
	caddy.RegisterModule(new(Azure))
}

// Azure is the provider azure.
type Azure struct {
	// APIVersion is the api-version of the deployments API
	// (2024-10-21). Default: none, the v1 API at /openai/v1/.
	APIVersion string `json:"api_version,omitempty"`
	// Entra sends a Microsoft Entra ID token from DefaultAzureCredential
	// instead of an api_key (entra.go). Default: off.
	Entra bool `json:"entra,omitempty"`

	entra entra // the token, once found
}

// CaddyModule returns the Caddy module information.
func (*Azure) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".azure",
		New: func() caddy.Module { return new(Azure) },
	}
}

// Name is "azure".
func (*Azure) Name() string { return "azure" }

// Engine gives the engine OpenAI's API and api-key; its `to`, the
// resource's endpoint, is required, and with entra no api_key may be.
func (p *Azure) Engine(e *providers.Engine) error {
	if e.To == "" {
		return errors.New("provider azure needs 'to', the resource's endpoint (https://<resource>.openai.azure.com)")
	}
	if p.Entra && e.HasKey {
		return errors.New("provider azure has both entra and an api_key: entra sends a Microsoft Entra ID token in the key's place, so keep one of them")
	}
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Other.String()} // "openai": every OpenAI route
	}
	if e.KeyHeader == "" {
		e.KeyHeader = "api-key"
	}
	return nil
}

// Target sends a request to its deployment's path with the api-version, or
// to the v1 API.
func (p *Azure) Target(u *url.URL, r providers.Request) {
	rest := strings.TrimPrefix(r.Path, "/v1")
	q := p.query(r.Base)
	switch {
	case p.APIVersion == "":
		u.Path = providers.JoinPath(r.Base.Path, "/openai/v1"+rest)
	case r.API == api.Responses:
		u.Path = providers.JoinPath(r.Base.Path, "/openai"+rest)
	default:
		u.Path = providers.JoinPath(r.Base.Path, "/openai/deployments/"+r.Model+rest)
	}
	u.RawPath = ""
	u.RawQuery = q.Encode()
}

// query is base's query, with the api-version when there is one.
func (p *Azure) query(base *url.URL) url.Values {
	q := url.Values{}
	if base.RawQuery != "" {
		q, _ = url.ParseQuery(base.RawQuery)
	}
	if p.APIVersion != "" {
		q.Set("api-version", p.APIVersion)
	}
	return q
}

// ReadFailure reads Azure OpenAI's retry-after-ms, as OpenAI's (its SDKs
// honour it before Retry-After). A content filter's 400 (code
// content_filter) is the request's fault as any 400 is: passed on, never
// retried.
func (*Azure) ReadFailure(f *providers.Failure) {
	if d, ok := openai.RetryAfterMS(f.Header); ok {
		f.RetryAfter = d
	}
}

// Check is the resource's model list (/openai/models?api-version=…, or the
// v1 API's /openai/v1/models): free, and refused without a good key.
func (p *Azure) Check(u, base *url.URL) {
	path := "/openai/models"
	if p.APIVersion == "" {
		path = "/openai/v1/models"
	}
	u.Path, u.RawPath, u.RawQuery = providers.JoinPath(base.Path, path), "", p.query(base).Encode()
}

// routes are Azure OpenAI's endpoints /upstream/ may pass, by name: a
// deployment's (/openai/deployments/{deployment}/<name>, the deployment being
// the model the key may use) with an api_version; without one, the v1 API's
// (/openai/v1/<name>), whose body names the model. Files, batches,
// fine-tuning and assistants belong to the whole resource: no route a key's
// models bound.
var routes = [...]string{"chat/completions", "completions", "embeddings",
	"audio/transcriptions", "audio/translations", "audio/speech", "images/generations"}

// Routes are the endpoints of a deployment.
func (*Azure) Routes() []string { return routes[:] }

// ReadRoute reads a deployment's endpoint, or the v1 API's without an
// api_version.
func (p *Azure) ReadRoute(tail string) (providers.Route, bool) {
	if p.APIVersion == "" {
		for _, n := range routes {
			if tail == "/openai/v1/"+n {
				return providers.Route{Name: n}, true
			}
		}
		return providers.Route{}, false
	}
	return providers.MethodRoute(tail, "/openai/deployments/", "/", routes[:])
}

// RouteTarget sends an endpoint to the deployment's path, or the v1 API's.
func (p *Azure) RouteTarget(u, base *url.URL, name, model string) {
	if p.APIVersion == "" {
		u.Path = providers.JoinPath(base.Path, "/openai/v1/"+name)
	} else {
		u.Path = providers.JoinPath(base.Path, "/openai/deployments/"+model+"/"+name)
	}
	u.RawPath = ""
	u.RawQuery = p.query(base).Encode()
}

// Authorize sends a Microsoft Entra ID token with entra; without it the
// engine's api_key is the request's credential already. With entra the
// engine has no key of its own (Engine refuses both), so an Authorization or
// api-key r carries is no credential of the engine's: the token replaces
// it. An error names the failure, never a secret.
func (p *Azure) Authorize(ctx context.Context, r *http.Request, _ []byte) error {
	if !p.Entra {
		return nil
	}
	r.Header.Del("Api-Key")
	r.Header.Del("Authorization")
	return p.entra.authorize(ctx, r)
}

// UnmarshalCaddyfile reads
//
//	provider azure {
//		api_version <version>
//		entra
//	}
//
// whose line may also stand in the engine's block beside `provider azure`
// (EngineLines).
func (p *Azure) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
func (*Azure) EngineLines() []string { return []string{"api_version", "entra"} }

// UnmarshalEngineLine reads `api_version <version>` or `entra`.
func (p *Azure) UnmarshalEngineLine(d *caddyfile.Dispenser) error {
	switch d.Val() {
	case "api_version":
		if !d.AllArgs(&p.APIVersion) {
			return d.ArgErr()
		}
	case "entra":
		if d.NextArg() {
			return d.Errf("entra takes no value: the credentials are found as Azure's SDKs find them (DefaultAzureCredential)")
		}
		p.Entra = true
	default:
		return d.Errf("provider azure takes api_version and entra, not %q", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ providers.Provider      = (*Azure)(nil)
	_ providers.Authorizer    = (*Azure)(nil)
	_ providers.Passer        = (*Azure)(nil)
	_ providers.Checker       = (*Azure)(nil)
	_ providers.FailureReader = (*Azure)(nil)
	_ caddyfile.Unmarshaler   = (*Azure)(nil)
)
