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

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/api"
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
	method, query := ":generateContent", base.RawQuery
	if stream {
		method = ":streamGenerateContent"
		q, _ := url.ParseQuery(base.RawQuery)
		if q == nil {
			q = url.Values{}
		}
		q.Set("alt", "sse")
		query = q.Encode()
	}
	var tail string
	switch {
	case !p.vertex && strings.HasPrefix(model, "models/"), !p.vertex && strings.HasPrefix(model, "tunedModels/"):
		tail = "/v1beta/" + model
	case !p.vertex:
		tail = "/v1beta/models/" + model
	case strings.HasPrefix(model, "projects/"):
		tail = "/v1/" + model
	case strings.HasPrefix(model, "publishers/"):
		tail = "/v1/projects/" + p.project + "/locations/" + p.location + "/" + model
	default:
		tail = "/v1/projects/" + p.project + "/locations/" + p.location + "/publishers/google/models/" + strings.TrimPrefix(model, "models/")
	}
	u.Path = joinPath(base.Path, tail+method)
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
