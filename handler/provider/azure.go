package provider

import (
	"net/url"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/api"
)

// azure is Azure OpenAI: with an api_version, the deployments API
// (/openai/deployments/{deployment}/chat/completions?api-version=…), the
// deployment being the model the attempt sends (model_name); without one,
// the v1 API (/openai/v1/…), which takes the deployment as the body's
// model. The key goes in api-key (its config's key header), or an Entra
// token as `api_key <token> Authorization`.
type azure struct {
	version string
	sseBody
	noAuth
}

func (p azure) Target(u, base *url.URL, a api.API, tail, model string, _ bool) {
	rest := strings.TrimPrefix(tail, "/v1")
	q := url.Values{}
	if base.RawQuery != "" {
		q, _ = url.ParseQuery(base.RawQuery)
	}
	switch {
	case p.version == "":
		u.Path = joinPath(base.Path, "/openai/v1"+rest)
	case a == api.Responses:
		u.Path = joinPath(base.Path, "/openai"+rest)
		q.Set("api-version", p.version)
	default:
		u.Path = joinPath(base.Path, "/openai/deployments/"+model+rest)
		q.Set("api-version", p.version)
	}
	u.RawPath = ""
	u.RawQuery = q.Encode()
}
