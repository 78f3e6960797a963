package provider

import (
	"net/url"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
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

// azureRoutes are Azure OpenAI's endpoints /upstream/ may pass, by name:
// a deployment's (/openai/deployments/{deployment}/<name>, the deployment
// being the model the key may use) with an api_version; without one, the v1
// API's (/openai/v1/<name>), whose body names the model. Files, batches,
// fine-tuning and assistants belong to the whole resource: no route a key's
// models bound.
var azureRoutes = [...]string{"chat/completions", "completions", "embeddings",
	"audio/transcriptions", "audio/translations", "audio/speech", "images/generations"}

func (azure) Routes() []string { return azureRoutes[:] }

func (p azure) ReadRoute(tail string) (Route, bool) {
	if p.version == "" {
		for _, n := range azureRoutes {
			if tail == "/openai/v1/"+n {
				return Route{Name: n}, true
			}
		}
		return Route{}, false
	}
	return methodRoute(tail, "/openai/deployments/", "/", azureRoutes[:])
}

func (p azure) RouteTarget(u, base *url.URL, name, model string) {
	q := url.Values{}
	if base.RawQuery != "" {
		q, _ = url.ParseQuery(base.RawQuery)
	}
	if p.version == "" {
		u.Path = joinPath(base.Path, "/openai/v1/"+name)
	} else {
		u.Path = joinPath(base.Path, "/openai/deployments/"+model+"/"+name)
		q.Set("api-version", p.version)
	}
	u.RawPath = ""
	u.RawQuery = q.Encode()
}
