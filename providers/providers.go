// Package providers is where a cloud provider plugs into the gateway: the
// Provider interface an engine's provider implements, and the small types it
// reads and writes. A provider is a Caddy guest module in the namespace
// http.handlers.llm_gateway.providers (ID
// http.handlers.llm_gateway.providers.<name>), as reverse_proxy's transports
// are guests in http.reverse_proxy.transport: an engine's `provider <name>`
// line is unmarshalled by the module, its JSON config is the engine's
// "provider" object ({"name": "bedrock", "region": "us-east-1"}), and the
// caddy module loads it when it provisions the handler. This repository's
// providers are one package each below this one (providers/anthropic,
// bedrock, gemini, vertex, azure, openai); one written elsewhere is built in
// with `xcaddy build --with` (docs/providers.md says how to write one).
//
// The package imports nothing of Caddy: handler and engines use a provider
// through these interfaces, and only its own package is a Caddy module.
// The API a provider speaks is named with package api. What a request and
// an answer say in it (its codec) is internal/translate's for the clients'
// APIs; a provider that brings an API of its own registers its codec with
// translate.Register from its package's init (providers/bedrock's
// Converse, providers/gemini's generateContent).
package providers

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Namespace is the Caddy module namespace of the providers: a provider
// named bedrock is the module http.handlers.llm_gateway.providers.bedrock.
const Namespace = "http.handlers.llm_gateway.providers"

// Provider is one engine's cloud provider: what it sets of its engine's
// config, and where each request goes. A provider is made for one engine's
// config (the gateway never shares one between engines but those that
// inherit it from `defaults`) and is used by many requests at once: its
// methods are safe for concurrent use once the engine is built.
//
// Beside these methods a provider may implement the optional interfaces
// below (Authorizer, EventReader, Passer, FailureReader, Checker,
// Locator), as Caddy's
// modules implement caddy.Provisioner or caddy.Validator.
type Provider interface {
	// Name is the provider's name, as an engine's `provider` line writes
	// it and the admin API, the status page and errors say it.
	Name() string

	// Engine fills in what the provider sets of its engine and the engine
	// leaves unset (its APIs, its endpoint, the header of its key), and
	// says what the engine lacks that the provider needs: an error,
	// written without the engine's name, which the caller adds. It is
	// called once the engine's config has its own defaults, and again when
	// the config is validated: it must give the same answer each time.
	Engine(e *Engine) error

	// Target sets u's path and query for one request, u holding the
	// engine's base URL and the client's path already.
	Target(u *url.URL, r Request)
}

// Engine is what a provider sets of its engine's config, and reads of it.
type Engine struct {
	// Name is the engine's, for nothing but the provider's own words.
	Name string
	// To is the engine's base URL: "" when its block has no `to`, which
	// the provider then fills in with its own endpoint, if it has one.
	To string
	// APIs are the APIs the engine speaks natively, as an `api` line names
	// them (api.Named): none when its block has no `api` line, which the
	// provider then fills in with the one it speaks.
	APIs []string
	// KeyHeader is the header the engine's api_key is sent in: ""
	// (Authorization: Bearer) unless its block names one, which the
	// provider may fill in with its own (x-api-key).
	KeyHeader string
	// HasKey is whether the engine has an api_key, for a provider whose own
	// credentials (Azure's Entra ID) exclude one; the key itself is never
	// the provider's to read.
	HasKey bool
}

// Request is what Target reads of one upstream request.
type Request struct {
	// Base is the engine's base URL (its `to`).
	Base *url.URL
	// API is the API the request is spoken in: the client's when the
	// engine speaks it natively, else the one translation chose.
	API api.API
	// Path is the client's path when the engine speaks the client's API
	// (/v1/messages/count_tokens and all), else API's own (api.API.Path).
	Path string
	// Model is the model the attempt sends (the engine's model_name, or
	// the name the client asked for).
	Model string
	// Stream is whether the client asked for a stream.
	Stream bool
}

// An Authorizer sets a request's credentials beyond the engine's api_key,
// once its body is final: SigV4 signs the body's hash, a Google access
// token is fetched. The request carries the engine's api_key already, in
// the header Engine set (Authorization: Bearer by default): a provider that
// signs or fetches a token leaves a request whose Authorization is set as
// it is. An error says no credentials could be had; it must never hold a
// secret (it is logged and may reach the client's error).
type Authorizer interface {
	Authorize(ctx context.Context, r *http.Request, body []byte) error
}

// An EventReader reads a streamed answer as SSE events when the provider
// frames its streams otherwise (Bedrock's binary event stream), setting h's
// Content-Type to text/event-stream; it returns any other body (an error's
// JSON) as it is. A frame it cannot read is a read error of the body: the
// gateway then cuts the client's stream rather than pass on a guess.
type EventReader interface {
	Events(h http.Header, body io.ReadCloser) io.ReadCloser
}

// A Passer says what of the provider's API /upstream/<model>/ may reach
// (issue 51). Its credentials open the whole API: every model, deployment
// and project the operator's account reaches, every tenant's batches and
// files. So nothing passes but what the engine's passthrough line names, and
// of that a route is read from the path a caller sent, as the provider's own
// SDKs write it, and sent to the path the provider builds for the model the
// key may use: a model, deployment or project in the caller's path is
// compared, never sent. A provider without routes passes only the paths the
// line names, to keys without rules.
type Passer interface {
	// Routes are the routes an engine's passthrough line may name.
	Routes() []string
	// ReadRoute reads tail, the path (unescaped) a caller sent below
	// /upstream/<model>, as one of the routes; ok is false for any other
	// path, and for a path into another project or location than the
	// engine's.
	ReadRoute(tail string) (r Route, ok bool)
	// RouteTarget sets u's path and query for the route named name, for
	// model (what the engine is sent), from the engine's base URL.
	RouteTarget(u, base *url.URL, name, model string)
}

// A Route is a request on /upstream/ read as one of a provider's routes.
type Route struct {
	Name string // the route, as an engine's passthrough line names it
	// Model is the model (or deployment) the caller's path names, written
	// as Target takes it; "" for a route whose body names the model.
	Model string
}

// A FailureReader reads the provider's error answers in its own words
// into the gateway's failure table (its verdict table, docs/failover.md),
// which judges an answer by its status and its wait before a retry: a
// provider that says "the model failed", "retry in 36 s" or "overloaded"
// its own way (a status of its own, a header, a body's details) says it
// here in the table's words. Its error body is read before translation
// gives it the client's shape, and is passed on to the client as it is;
// only the verdict reads the Failure.
type FailureReader interface {
	ReadFailure(f *Failure)
}

// Failure is an error answer as the failure table reads it.
type Failure struct {
	// Status is the answer's status, which the provider may set to the
	// table's row its failure belongs in (a Bedrock model error's 424 is a
	// 500's: retry, move on, count against the model).
	Status int
	// RetryAfter is the wait before a retry the answer asks for: its
	// Retry-After (or Anthropic's limit resets), which the provider may
	// set from its own words (OpenAI's retry-after-ms, Google's
	// RetryInfo); 0 for none.
	RetryAfter time.Duration
	// Header and Body are the answer's, to read only; Body is at most
	// what the gateway keeps of an error (1 MiB).
	Header http.Header
	Body   []byte
}

// A Checker names a cheap request that says whether the provider answers
// the engine's credentials (its model list): an engine with health checks
// (health_interval) sends it, GET, with the engine's key and the
// provider's credentials, instead of GET <health_path>; any 2xx passes.
// Without health checks a provider's engine is sent nothing but requests:
// its state comes from their answers.
type Checker interface {
	// Check sets u's path and query (u holds the engine's base URL).
	Check(u, base *url.URL)
}

// A Locator says where, beyond its `to`, a provider sends its engine's
// requests, for people (the admin API, the status page): Bedrock's region,
// Vertex's project and location.
type Locator interface {
	Where() string
}

// JoinPath joins a base path and a path that starts with '/'.
func JoinPath(base, p string) string {
	return strings.TrimRight(base, "/") + p
}

// MethodRoute reads tail as <prefix><model><sep><name> for a name of names:
// the model between the prefix and the route, which may hold the separator
// itself (an ARN holds '/' and ':').
func MethodRoute(tail, prefix, sep string, names []string) (Route, bool) {
	rest, ok := strings.CutPrefix(tail, prefix)
	if !ok {
		return Route{}, false
	}
	for _, n := range names {
		if m, ok := strings.CutSuffix(rest, sep+n); ok && m != "" {
			return Route{Name: n, Model: m}, true
		}
	}
	return Route{}, false
}
