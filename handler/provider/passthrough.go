package provider

import (
	"net/url"
	"strings"
)

// What /upstream/<model>/ may pass to a provider's engine (issue 51). A
// provider's credentials open its whole API: every model, deployment and
// project the operator's account reaches, every tenant's batches and
// files. A key allowed one Gemini model got 200 from another through
// /upstream/<its model>/v1beta/models/<another>:generateContent. So nothing
// passes by default (a provider has no web UI, /props or /slots), and of
// what an engine's passthrough line names, a route is read from the path
// the caller sent, as the provider's own SDKs write it, and sent to the
// path the provider builds for the model the key may use: a model,
// deployment or project in the caller's path is compared, never sent.
//
// Each provider's routes are its own (its Routes method, beside its
// Target): where the model of each is, and the path it goes to.

// A Route is a request on /upstream/ read as one of a provider's routes.
type Route struct {
	Name string // the route, as an engine's passthrough line names it
	// Model is the model (or deployment) the caller's path names, written
	// as Target takes it; "" for a route whose body names the model.
	Model string
}

// Passer is what a provider lets through /upstream/.
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

// methodRoute reads tail as <prefix><model><sep><name> for a name of names:
// the model between the prefix and the route (which may hold the separator
// itself, as an ARN holds '/' and ':').
func methodRoute(tail, prefix, sep string, names []string) (Route, bool) {
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
