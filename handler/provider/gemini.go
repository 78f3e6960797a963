package provider

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/google"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// gemini is Google's generateContent, on the Gemini API (provider gemini:
// /v1beta/models/{model}:generateContent, the key in x-goog-api-key, the
// key header its config sets) or on Vertex AI (provider vertex:
// /v1/projects/{project}/locations/{location}/publishers/google/models/
// {model}:generateContent, an OAuth2 access token as Bearer). A stream is
// :streamGenerateContent?alt=sse, SSE already.
type gemini struct {
	vertex            bool
	project, location string
	apiKey            bool // the engine has an api_key: the handler sent it, nothing to add

	// tokens are Vertex's access tokens, from Application Default
	// Credentials found on first use (a gateway that never sends a Vertex
	// request needs none; one whose credentials are not there yet finds
	// them once they are), reused until shortly before they expire.
	mu     sync.Mutex
	tokens oauth2.TokenSource
	find   func(context.Context) (oauth2.TokenSource, error)

	sseBody
}

// vertexScope is the scope of Vertex AI's access tokens.
const vertexScope = "https://www.googleapis.com/auth/cloud-platform"

// findCredentials finds Application Default Credentials (the
// GOOGLE_APPLICATION_CREDENTIALS file, gcloud's, or the metadata server
// of Google's own machines); tests replace it with a fake token source.
var findCredentials = func(ctx context.Context) (oauth2.TokenSource, error) {
	creds, err := google.FindDefaultCredentials(ctx, vertexScope)
	if err != nil {
		return nil, err
	}
	return creds.TokenSource, nil
}

func newGemini(cfg *engines.Config) (Provider, error) {
	p := &gemini{vertex: cfg.Provider == "vertex", project: cfg.Project, location: cfg.Location,
		apiKey: cfg.APIKey != "", find: findCredentials}
	if p.vertex && (p.project == "" || p.location == "") {
		return nil, fmt.Errorf("engine %s: provider vertex needs its project and location", cfg.Name)
	}
	return p, nil
}

// Target sets the method's path for the model: a model already given as
// a resource name ("models/…", "publishers/…/models/…", "projects/…") is
// the path's tail as it is (a tuned model, another publisher's).
func (p *gemini) Target(u, base *url.URL, _ api.API, _, model string, stream bool) {
	method := "generateContent"
	if stream {
		method = "streamGenerateContent"
	}
	p.RouteTarget(u, base, method, model)
}

// modelPath is the path of a model's resource, its methods after a ':'.
func (p *gemini) modelPath(model string) string {
	switch {
	case !p.vertex && strings.HasPrefix(model, "models/"), !p.vertex && strings.HasPrefix(model, "tunedModels/"):
		return "/v1beta/" + model
	case !p.vertex:
		return "/v1beta/models/" + model
	case strings.HasPrefix(model, "projects/"):
		return "/v1/" + model
	case strings.HasPrefix(model, "publishers/"):
		return p.locationPath() + model
	}
	return p.locationPath() + "publishers/google/models/" + strings.TrimPrefix(model, "models/")
}

// locationPath is the engine's project and location on Vertex.
func (p *gemini) locationPath() string {
	return "/v1/projects/" + p.project + "/locations/" + p.location + "/"
}

// geminiRoutes are a model's methods /upstream/ may pass, by name
// (…/models/{model}:<name>, the model being the one the key may use), and
// vertexRoutes Vertex's besides (another publisher's models, Anthropic's on
// Vertex). Files, cached contents, batches, tuning and model lists belong
// to the whole project: no route a key's models bound.
var (
	geminiRoutes = []string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"}
	vertexRoutes = append(geminiRoutes[:len(geminiRoutes):len(geminiRoutes)], "rawPredict", "streamRawPredict")
)

func (p *gemini) Routes() []string {
	if p.vertex {
		return vertexRoutes
	}
	return geminiRoutes
}

// ReadRoute reads a model's method as Google's SDKs write it: on the
// Gemini API under v1beta or v1, a model or a tuned model; on Vertex under
// v1 or v1beta1, in the engine's own project and location only.
func (p *gemini) ReadRoute(tail string) (Route, bool) {
	names := p.Routes()
	if !p.vertex {
		for _, v := range [...]string{"/v1beta/", "/v1/"} {
			if r, ok := methodRoute(tail, v+"models/", ":", names); ok {
				return r, true
			}
			if r, ok := methodRoute(tail, v+"tunedModels/", ":", names); ok {
				r.Model = "tunedModels/" + r.Model
				return r, true
			}
		}
		return Route{}, false
	}
	for _, v := range [...]string{"/v1/", "/v1beta1/"} {
		r, ok := methodRoute(tail, v+"projects/"+p.project+"/locations/"+p.location+"/publishers/", ":", names)
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
	return Route{}, false
}

// RouteTarget sets the path of a model's method; a stream is asked as SSE
// (alt=sse), which the gateway relays as it comes and reads usage from.
func (p *gemini) RouteTarget(u, base *url.URL, name, model string) {
	query := base.RawQuery
	if name == "streamGenerateContent" {
		q, _ := url.ParseQuery(base.RawQuery)
		if q == nil {
			q = url.Values{}
		}
		q.Set("alt", "sse")
		query = q.Encode()
	}
	u.Path = joinPath(base.Path, p.modelPath(model)+":"+name)
	u.RawPath = ""
	u.RawQuery = query
}

// Authorize adds Vertex's access token, unless the engine has a key of
// its own (sent as Bearer by the handler). An error names the failure,
// never a token.
func (p *gemini) Authorize(ctx context.Context, r *http.Request, _ []byte) error {
	if !p.vertex || p.apiKey {
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
func (p *gemini) tokenSource(ctx context.Context) (oauth2.TokenSource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.tokens != nil {
		return p.tokens, nil
	}
	// Not the request's cancellation: a service account's token source
	// keeps this context for every later refresh.
	ts, err := p.find(context.WithoutCancel(ctx))
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
