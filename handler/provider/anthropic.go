package provider

import (
	"context"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/api"
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
