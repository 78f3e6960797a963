// Package vertex is the provider vertex: Google's generateContent on Vertex
// AI, /v1/projects/{project}/locations/{location}/publishers/google/models/
// {model}:generateContent, with an OAuth2 access token from Application
// Default Credentials as Bearer, or the engine's api_key (an express-mode
// key) instead (docs/provider-gemini.md). The methods and their paths are
// package gemini's.
package vertex

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
	"github.com/llmgateway/caddy-llm-gateway/providers/gemini"
)

func init() {
	caddy.RegisterModule(new(Vertex))
}

// Vertex is the provider vertex.
type Vertex struct {
	// Project is the Google Cloud project. Required.
	Project string `json:"project,omitempty"`
	// Location is the project's location: a region (us-central1) or
	// global. Required.
	Location string `json:"location,omitempty"`

	// tokens are the access tokens, from Application Default Credentials
	// found on first use (a gateway that never sends a Vertex request
	// needs none; one whose credentials are not there yet finds them once
	// they are), reused until shortly before they expire.
	mu     sync.Mutex
	tokens oauth2.TokenSource
	// find finds the credentials' token source; tests set a fake's.
	find func(context.Context) (oauth2.TokenSource, error)
}

// CaddyModule returns the Caddy module information.
func (*Vertex) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".vertex",
		New: func() caddy.Module { return new(Vertex) },
	}
}

// Provision resolves the project's and location's placeholders
// ({env.NAME}).
func (p *Vertex) Provision(caddy.Context) error {
	repl := caddy.NewReplacer()
	p.Project, p.Location = repl.ReplaceKnown(p.Project, ""), repl.ReplaceKnown(p.Location, "")
	return nil
}

// Name is "vertex".
func (*Vertex) Name() string { return "vertex" }

// Where is the project and the location: my-project/us-central1.
func (p *Vertex) Where() string { return p.Project + "/" + p.Location }

// Engine gives the engine generateContent and the location's endpoint; the
// project and the location are required.
func (p *Vertex) Engine(e *providers.Engine) error {
	if p.Project == "" || p.Location == "" {
		return errors.New("provider vertex needs its project and location (project my-project, location us-central1)")
	}
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Gemini.String()}
	}
	if e.To == "" {
		e.To = "https://" + p.Location + "-aiplatform.googleapis.com"
		if p.Location == "global" {
			e.To = "https://aiplatform.googleapis.com"
		}
	}
	return nil
}

// Target sets the method's path for the model: a model already given as a
// resource name ("publishers/…/models/…", "projects/…") is the path's tail
// as it is (a tuned model, another publisher's).
func (p *Vertex) Target(u *url.URL, r providers.Request) {
	p.RouteTarget(u, r.Base, gemini.Generate(r.Stream), r.Model)
}

// modelPath is the path of a model's resource, its methods after a ':'.
func (p *Vertex) modelPath(model string) string {
	switch {
	case strings.HasPrefix(model, "projects/"):
		return "/v1/" + model
	case strings.HasPrefix(model, "publishers/"):
		return p.locationPath() + model
	}
	return p.locationPath() + "publishers/google/models/" + strings.TrimPrefix(model, "models/")
}

// locationPath is the engine's project and location.
func (p *Vertex) locationPath() string {
	return "/v1/projects/" + p.Project + "/locations/" + p.Location + "/"
}

// methods are Gemini's methods and, on Vertex, another publisher's models'
// (Anthropic's on Vertex).
var methods = append(gemini.Methods()[:len(gemini.Methods()):len(gemini.Methods())], "rawPredict", "streamRawPredict")

// Routes are the model's methods.
func (*Vertex) Routes() []string { return methods }

// ReadRoute reads a model's method as Google's SDKs write it, under v1 or
// v1beta1, in the engine's own project and location only.
func (p *Vertex) ReadRoute(tail string) (providers.Route, bool) {
	for _, v := range [...]string{"/v1/", "/v1beta1/"} {
		r, ok := providers.MethodRoute(tail, v+"projects/"+p.Project+"/locations/"+p.Location+"/publishers/", ":", methods)
		if !ok {
			continue
		}
		if m, google := strings.CutPrefix(r.Model, "google/models/"); google {
			r.Model = m
		} else {
			r.Model = "publishers/" + r.Model
		}
		return r, true
	}
	return providers.Route{}, false
}

// RouteTarget sets the path of a model's method.
func (p *Vertex) RouteTarget(u, base *url.URL, name, model string) {
	gemini.SetMethod(u, base, p.modelPath(model), name)
}

// ReadFailure reads the wait Google's error details ask for, as the
// Gemini API's (gemini.RetryDelay).
func (*Vertex) ReadFailure(f *providers.Failure) {
	if d, ok := gemini.RetryDelay(f.Body); ok {
		f.RetryAfter = d
	}
}

// scope is the scope of Vertex AI's access tokens.
const scope = "https://www.googleapis.com/auth/cloud-platform"

// findCredentials finds Application Default Credentials (the
// GOOGLE_APPLICATION_CREDENTIALS file, gcloud's, or the metadata server of
// Google's own machines).
func findCredentials(ctx context.Context) (oauth2.TokenSource, error) {
	creds, err := google.FindDefaultCredentials(ctx, scope)
	if err != nil {
		return nil, err
	}
	return creds.TokenSource, nil
}

// Authorize adds an access token, unless r carries the engine's own key:
// as Authorization: Bearer, or an express-mode key in x-goog-api-key. An
// error names the failure, never a token.
func (p *Vertex) Authorize(ctx context.Context, r *http.Request, _ []byte) error {
	if r.Header.Get("Authorization") != "" || r.Header.Get("X-Goog-Api-Key") != "" {
		return nil
	}
	ts, err := p.tokenSource(ctx)
	if err != nil {
		return err
	}
	tok, err := ts.Token()
	if err != nil {
		return fmt.Errorf("vertex: getting an access token: %w", tokenError(err))
	}
	if tok.AccessToken == "" {
		return errors.New("vertex: the credentials gave an empty access token")
	}
	r.Header.Set("Authorization", "Bearer "+tok.AccessToken)
	return nil
}

// tokenSource is the engine's token source, found on first use.
func (p *Vertex) tokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens != nil {
		return p.tokens, nil
	}
	find := p.find
	if find == nil {
		find = findCredentials
	}
	// Not the request's cancellation: a service account's token source
	// keeps this context for every later refresh.
	ts, err := find(context.WithoutCancel(ctx))
	if err != nil {
		return nil, fmt.Errorf("vertex: no Application Default Credentials (set GOOGLE_APPLICATION_CREDENTIALS, run gcloud auth application-default login, or give the engine an api_key): %w", err)
	}
	p.tokens = oauth2.ReuseTokenSource(nil, ts)
	return p.tokens, nil
}

// tokenError is err without the body of Google's token endpoint's answer,
// which oauth2 puts in its message and which a log need not hold.
func tokenError(err error) error {
	var re *oauth2.RetrieveError
	if errors.As(err, &re) {
		if re.ErrorCode != "" {
			return fmt.Errorf("token endpoint: %s %s", re.ErrorCode, re.ErrorDescription)
		}
		if re.Response != nil {
			return fmt.Errorf("token endpoint answered %s", re.Response.Status)
		}
		return errors.New("token endpoint refused")
	}
	return err
}

// UnmarshalCaddyfile reads
//
//	provider vertex {
//		project <project>
//		location <location>
//	}
//
// whose lines may also stand in the engine's block beside `provider vertex`
// (EngineLines).
func (p *Vertex) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
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
func (*Vertex) EngineLines() []string { return []string{"project", "location"} }

// UnmarshalEngineLine reads `project <project>` or `location <location>`.
func (p *Vertex) UnmarshalEngineLine(d *caddyfile.Dispenser) error {
	var v *string
	switch d.Val() {
	case "project":
		v = &p.Project
	case "location":
		v = &p.Location
	default:
		return d.Errf("provider vertex takes project and location, not %q", d.Val())
	}
	if !d.AllArgs(v) {
		return d.ArgErr()
	}
	return nil
}

// Interface guards
var (
	_ providers.Provider      = (*Vertex)(nil)
	_ providers.Authorizer    = (*Vertex)(nil)
	_ providers.Passer        = (*Vertex)(nil)
	_ providers.Locator       = (*Vertex)(nil)
	_ providers.FailureReader = (*Vertex)(nil)
	_ caddy.Provisioner       = (*Vertex)(nil)
	_ caddyfile.Unmarshaler   = (*Vertex)(nil)
)
