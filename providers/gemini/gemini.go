// Package gemini is the provider gemini: Google's Gemini API,
// generateContent at /v1beta/models/{model}:generateContent with the key in
// x-goog-api-key; a stream is :streamGenerateContent?alt=sse, SSE already
// (docs/provider-gemini.md). Vertex AI serves the same API under a project
// and location (package vertex), with the methods and their paths written
// here. The API's codec is here too (codec.go, request.go, answer.go,
// stream.go): what translation reads and writes of generateContent.
package gemini

import (
	"encoding/json"
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
	caddy.RegisterModule(new(Gemini))
}

// Endpoint is the Gemini API, the engine's default `to`.
const Endpoint = "https://generativelanguage.googleapis.com"

// Gemini is the provider gemini. It has no options of its own: the key is
// the engine's api_key.
type Gemini struct{}

// CaddyModule returns the Caddy module information.
func (*Gemini) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  providers.Namespace + ".gemini",
		New: func() caddy.Module { return new(Gemini) },
	}
}

// Name is "gemini".
func (*Gemini) Name() string { return "gemini" }

// Engine gives the engine generateContent, the Gemini API's endpoint and
// x-goog-api-key.
func (*Gemini) Engine(e *providers.Engine) error {
	if len(e.APIs) == 0 {
		e.APIs = []string{api.Gemini.String()}
	}
	if e.To == "" {
		e.To = Endpoint
	}
	if e.KeyHeader == "" {
		e.KeyHeader = "x-goog-api-key"
	}
	return nil
}

// Target sets the method's path for the model: a model already given as a
// resource name ("models/…", "tunedModels/…") is the path's tail as it is.
func (p *Gemini) Target(u *url.URL, r providers.Request) {
	p.RouteTarget(u, r.Base, Generate(r.Stream), r.Model)
}

// Check is the first page of the model list, GET
// /v1beta/models?pageSize=1: free, and refused without a good key.
func (*Gemini) Check(u, base *url.URL) {
	q, _ := url.ParseQuery(base.RawQuery)
	if q == nil {
		q = url.Values{}
	}
	q.Set("pageSize", "1")
	u.Path, u.RawPath, u.RawQuery = providers.JoinPath(base.Path, "/v1beta/models"), "", q.Encode()
}

// ReadFailure reads the wait Google's error details ask for: a 429
// RESOURCE_EXHAUSTED names it in a RetryInfo detail ("retryDelay": "36s")
// and in no header.
func (*Gemini) ReadFailure(f *providers.Failure) {
	if d, ok := RetryDelay(f.Body); ok {
		f.RetryAfter = d
	}
}

// RetryDelay reads the retryDelay of a google.rpc.RetryInfo detail in a
// Google API's error body ({"error":{"details":[{"@type": …RetryInfo,
// "retryDelay":"36s"}]}}): a protobuf Duration, seconds with an "s".
func RetryDelay(body []byte) (time.Duration, bool) {
	var e struct {
		Error struct {
			Details []struct {
				Type       string `json:"@type"`
				RetryDelay string `json:"retryDelay"`
			} `json:"details"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return 0, false
	}
	for _, d := range e.Error.Details {
		if d.Type != "type.googleapis.com/google.rpc.RetryInfo" {
			continue
		}
		secs, err := strconv.ParseFloat(strings.TrimSuffix(d.RetryDelay, "s"), 64)
		if err != nil || secs < 0 || secs > time.Hour.Seconds() || !strings.HasSuffix(d.RetryDelay, "s") {
			return 0, false
		}
		return time.Duration(secs * float64(time.Second)), true
	}
	return 0, false
}

// modelPath is the path of a model's resource, its methods after a ':'.
func modelPath(model string) string {
	if strings.HasPrefix(model, "models/") || strings.HasPrefix(model, "tunedModels/") {
		return "/v1beta/" + model
	}
	return "/v1beta/models/" + model
}

// Generate is the method that answers a request: streamGenerateContent for a
// stream, else generateContent.
func Generate(stream bool) string {
	if stream {
		return "streamGenerateContent"
	}
	return "generateContent"
}

// methods are a model's methods /upstream/ may pass, by name
// (…/models/{model}:<name>, the model being the one the key may use). Files,
// cached contents, batches, tuning and model lists belong to the whole
// project: no route a key's models bound.
var methods = [...]string{"generateContent", "streamGenerateContent", "countTokens", "embedContent", "batchEmbedContents"}

// Methods are a model's methods /upstream/ may pass, on the Gemini API and
// on Vertex.
func Methods() []string { return methods[:] }

// Routes are the model's methods.
func (*Gemini) Routes() []string { return Methods() }

// ReadRoute reads a model's method as Google's SDKs write it: under v1beta
// or v1, a model or a tuned model.
func (*Gemini) ReadRoute(tail string) (providers.Route, bool) {
	for _, v := range [...]string{"/v1beta/", "/v1/"} {
		if r, ok := providers.MethodRoute(tail, v+"models/", ":", methods[:]); ok {
			return r, true
		}
		if r, ok := providers.MethodRoute(tail, v+"tunedModels/", ":", methods[:]); ok {
			r.Model = "tunedModels/" + r.Model
			return r, true
		}
	}
	return providers.Route{}, false
}

// RouteTarget sets the path of a model's method.
func (*Gemini) RouteTarget(u, base *url.URL, name, model string) {
	SetMethod(u, base, modelPath(model), name)
}

// SetMethod sets u's path and query to a model's method, the model's
// resource at path under base. A stream is asked as SSE (alt=sse), which the
// gateway relays as it comes and reads usage from.
func SetMethod(u, base *url.URL, path, method string) {
	query := base.RawQuery
	if method == "streamGenerateContent" {
		q, _ := url.ParseQuery(base.RawQuery)
		if q == nil {
			q = url.Values{}
		}
		q.Set("alt", "sse")
		query = q.Encode()
	}
	u.Path = providers.JoinPath(base.Path, path+":"+method)
	u.RawPath = ""
	u.RawQuery = query
}

// UnmarshalCaddyfile reads `provider gemini`, which takes no options.
func (*Gemini) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the provider's name
	if d.NextArg() {
		return d.ArgErr()
	}
	if d.NextBlock(0) {
		return d.Errf("provider gemini takes no options, not %q: its key is the engine's api_key", d.Val())
	}
	return nil
}

// Interface guards
var (
	_ providers.Provider      = (*Gemini)(nil)
	_ providers.Passer        = (*Gemini)(nil)
	_ providers.Checker       = (*Gemini)(nil)
	_ providers.FailureReader = (*Gemini)(nil)
	_ caddyfile.Unmarshaler   = (*Gemini)(nil)
)
