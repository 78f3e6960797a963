package provider

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// anthropic is Anthropic's API: Messages at /v1/messages with x-api-key
// (the key header its config sets) and anthropic-version, which a client
// that speaks Messages sends itself and every other request gets.
type anthropic struct {
	version string
	sseBody
}

func (p anthropic) Target(u, base *url.URL, a api.API, tail, _ string, _ bool) {
	if a == api.Messages && strings.HasPrefix(tail, "/v1/messages") {
		u.Path = joinPath(base.Path, tail) // count_tokens too, and the client's ?beta=true
		return
	}
	u.Path, u.RawQuery = joinPath(base.Path, "/v1/messages"), base.RawQuery
}

func (p anthropic) Authorize(_ context.Context, r *http.Request, _ []byte) error {
	if r.Header.Get("Anthropic-Version") == "" {
		r.Header.Set("Anthropic-Version", p.version)
	}
	return nil
}

// anthropicRoutes are Anthropic's endpoints /upstream/ may pass, by name:
// Messages and count_tokens, whose body names the model (checked, and
// rewritten to the engine's, as on /v1/). Batches and files name models
// inside their items, or none: they are no route a key's models bound.
var anthropicRoutes = [...]struct{ name, path string }{
	{"messages", "/v1/messages"},
	{"count_tokens", "/v1/messages/count_tokens"},
}

func (anthropic) Routes() []string {
	var names []string
	for _, r := range anthropicRoutes {
		names = append(names, r.name)
	}
	return names
}

func (anthropic) ReadRoute(tail string) (Route, bool) {
	for _, r := range anthropicRoutes {
		if tail == r.path {
			return Route{Name: r.name}, true
		}
	}
	return Route{}, false
}

func (anthropic) RouteTarget(u, base *url.URL, name, _ string) {
	for _, r := range anthropicRoutes {
		if r.name == name {
			u.Path, u.RawPath, u.RawQuery = joinPath(base.Path, r.path), "", base.RawQuery
		}
	}
}
