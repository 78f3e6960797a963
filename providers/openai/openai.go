// Package openai is the provider openai: OpenAI's own cloud, every route of
// its API at https://api.openai.com with the engine's api_key as a bearer
// token, and optionally the organization and project the key bills
// (docs/providers.md). An OpenAI-compatible server of one's own needs no
// provider: `to` and `api openai` say it all; this one's credentials open a
// whole account, so /upstream/ passes it only what its passthrough line
// names.
package openai

import (
	"context"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func init() {
	caddy.RegisterModule(new(OpenAI))
}

// Endpoint is OpenAI's API, the engine's default `to`.
const Endpoint = "https://api.openai.com"

// OpenAI is the provider openai.
type OpenAI struct {
	// Organization is sent as OpenAI-Organization: the organization a key
	// that belongs to several bills. Default: none (the key's default).
	Organization string `json:"organization,omitempty"`
	// Project is sent as OpenAI-Project: the project a legacy user key
	// bills. Default: none (the key's default).
	Project string `json:"project,omitempty"`
}

// CaddyModule returns the Caddy module information.
func (*OpenAI) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".openai",
		New: func() caddy.Module { return new(OpenAI) },
	}
}

// Provision resolves the organization's and project's placeholders
// ({env.NAME}).
func (p *OpenAI) Provision(caddy.Context) error {
	repl := caddy.NewReplacer()
	p.Organization, p.Project = repl.ReplaceKnown(p.Organization, ""), repl.ReplaceKnown(p.Project, "")
	return nil
}

// Name is "openai".
func (*OpenAI) Name() string { return "openai" }

// Where is the project, if one is named.
func (p *OpenAI) Where() string { return p.Project }

// Engine gives the engine every OpenAI route and OpenAI's endpoint.
func (*OpenAI) Engine(e *providers.Engine) error {
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Other.String()} // "openai": every OpenAI route
	}
	if e.To == "" {
		e.To = Endpoint
	}
	return nil
}

// Target sends a request to its API's path under the engine's base, which
// may end in /v1 already.
func (*OpenAI) Target(u *url.URL, r providers.Request) {
	u.Path, u.RawPath = joinV1(r.Base.Path, r.Path), ""
}

// joinV1 joins a base path and a path under /v1/, without doubling a /v1
// the base ends in (https://api.openai.com/v1 is how OpenAI's SDKs write
// their base URL).
func joinV1(base, p string) string {
	base = strings.TrimRight(base, "/")
	if strings.HasSuffix(base, "/v1") {
		p = strings.TrimPrefix(p, "/v1")
	}
	return base + p
}

// ReadFailure reads OpenAI's retry-after-ms, the wait its SDKs honour
// before Retry-After: a 429 that asks for 200 ms is retried after 200 ms,
// not the whole second Retry-After rounds it up to.
func (*OpenAI) ReadFailure(f *providers.Failure) {
	if d, ok := RetryAfterMS(f.Header); ok {
		f.RetryAfter = d
	}
}

// RetryAfterMS reads a retry-after-ms header (OpenAI's and Azure
// OpenAI's): the wait in milliseconds.
func RetryAfterMS(h http.Header) (time.Duration, bool) {
	ms, err := strconv.ParseFloat(h.Get("Retry-After-Ms"), 64)
	if err != nil || ms < 0 || ms > float64(time.Hour/time.Millisecond) {
		return 0, false
	}
	return time.Duration(ms * float64(time.Millisecond)), true
}

// Check is the model list, GET /v1/models: free, and refused without a
// good key.
func (*OpenAI) Check(u, base *url.URL) {
	u.Path, u.RawPath, u.RawQuery = joinV1(base.Path, "/v1/models"), "", base.RawQuery
}

// Authorize names the organization and the project, when the engine has
// them.
func (p *OpenAI) Authorize(_ context.Context, r *http.Request, _ []byte) error {
	if p.Organization != "" {
		r.Header.Set("OpenAI-Organization", p.Organization)
	}
	if p.Project != "" {
		r.Header.Set("OpenAI-Project", p.Project)
	}
	return nil
}

// routes are OpenAI's endpoints /upstream/ may pass, by name (/v1/<name>):
// those whose body names the model, which the key may use. Files, batches,
// fine-tuning, vector stores and assistants belong to the whole account: no
// route a key's models bound.
var routes = [...]string{"chat/completions", "completions", "responses", "embeddings", "moderations",
	"audio/transcriptions", "audio/translations", "audio/speech", "images/generations"}

// Routes are the endpoints whose body names the model.
func (*OpenAI) Routes() []string { return routes[:] }

// ReadRoute reads /v1/<name>.
func (*OpenAI) ReadRoute(tail string) (providers.Route, bool) {
	for _, n := range routes {
		if tail == "/v1/"+n {
			return providers.Route{Name: n}, true
		}
	}
	return providers.Route{}, false
}

// RouteTarget sends an endpoint to /v1/<name>.
func (*OpenAI) RouteTarget(u, base *url.URL, name, _ string) {
	u.Path, u.RawPath, u.RawQuery = joinV1(base.Path, "/v1/"+name), "", base.RawQuery
}

// UnmarshalCaddyfile reads
//
//	provider openai {
//		organization <org-id>
//		project <project-id>
//	}
//
// whose lines may also stand in the engine's block beside `provider openai`
// (EngineLines).
func (p *OpenAI) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
func (*OpenAI) EngineLines() []string { return []string{"organization", "project"} }

// UnmarshalEngineLine reads `organization <id>` or `project <id>`.
func (p *OpenAI) UnmarshalEngineLine(d *caddyfile.Dispenser) error {
	var v *string
	switch d.Val() {
	case "organization":
		v = &p.Organization
	case "project":
		v = &p.Project
	default:
		return d.Errf("provider openai takes organization and project, not %q", d.Val())
	}
	if !d.AllArgs(v) {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var (
	_ providers.Provider      = (*OpenAI)(nil)
	_ providers.Authorizer    = (*OpenAI)(nil)
	_ providers.Passer        = (*OpenAI)(nil)
	_ providers.Checker       = (*OpenAI)(nil)
	_ providers.FailureReader = (*OpenAI)(nil)
	_ providers.Locator       = (*OpenAI)(nil)
	_ caddy.Provisioner       = (*OpenAI)(nil)
	_ caddyfile.Unmarshaler   = (*OpenAI)(nil)
)
