// Package provider speaks to cloud providers in their own words: the path
// of each request (which names the model for Bedrock, Gemini and Vertex,
// and the deployment for Azure), credentials that are not a plain key
// (SigV4 from AWS's default chain, Google's Application Default
// Credentials), and a streamed answer's framing where it is not SSE
// (Bedrock's event stream). What an engine's `provider` line sets in its
// config (API, endpoint, key header) is engines.Config's; what the
// requests and answers say is internal/translate's.
package provider

import (
	"context"
	"io"
	"net/http"
	"net/url"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Provider is one engine's provider.
type Provider interface {
	// Target sets u's path and query (u holds the engine's base URL) for
	// a request spoken in api: a client's path tail when the engine
	// speaks the client's API, for the model the attempt sends,
	// streaming or not.
	Target(u *url.URL, base *url.URL, a api.API, tail, model string, stream bool)
	// Authorize sets r's credentials once its body is final (SigV4 signs
	// its hash); an error says no credentials could be had. Keys in the
	// provider's header are set before (engines.Config.SetKey).
	Authorize(ctx context.Context, r *http.Request, body []byte) error
	// Events reads a streamed answer's body as SSE events when the
	// provider frames its streams otherwise (Bedrock); else it returns
	// body. It may set h's Content-Type to text/event-stream.
	Events(h http.Header, body io.ReadCloser) io.ReadCloser
	// Passer is what may pass /upstream/ (passthrough.go).
	Passer
}

// New makes the provider of an engine's config (with its defaults); nil
// for an engine that has none.
func New(cfg *engines.Config) (Provider, error) {
	switch cfg.Provider {
	case "anthropic":
		return anthropic{version: cfg.APIVersion}, nil
	case "azure":
		return azure{version: cfg.APIVersion}, nil
	case "bedrock":
		return newBedrock(cfg)
	case "gemini", "vertex":
		return newGemini(cfg)
	}
	return nil, nil
}

// Routes are the routes an engine of provider may name in its passthrough
// line; none for an engine without a provider.
func Routes(provider string) []string {
	switch provider {
	case "anthropic":
		return anthropic{}.Routes()
	case "azure":
		return azure{}.Routes()
	case "bedrock":
		return (&bedrock{}).Routes()
	case "gemini", "vertex":
		return (&gemini{vertex: provider == "vertex"}).Routes()
	}
	return nil
}

// joinPath joins a base path and a path that starts with '/'.
func joinPath(base, p string) string {
	for len(base) > 0 && base[len(base)-1] == '/' {
		base = base[:len(base)-1]
	}
	return base + p
}

// sseBody leaves a body that is SSE already as it is.
type sseBody struct{}

func (sseBody) Events(_ http.Header, body io.ReadCloser) io.ReadCloser { return body }

// noAuth has no credentials beyond the key in the provider's header.
type noAuth struct{}

func (noAuth) Authorize(context.Context, *http.Request, []byte) error { return nil }
