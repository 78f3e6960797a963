package config

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// What an engine's passthrough line opens on /upstream/ (issue 51): on a
// provider's engine nothing passes by default, since its credentials open
// the provider's whole API; the line names the provider's routes that do
// (sent for the model the key may use), or paths that pass as written to
// keys without rules.

// PassesNamedOnly reports whether /upstream/ passes the engine only what its
// passthrough line names: a provider's engine, or one whose API names the
// model in the path (converse, gemini). Another engine's own pages (web
// UI, /props, /metrics) pass.
func PassesNamedOnly(e *engines.Config) bool {
	return e.IsProvider() || e.Speaks(api.Converse) || e.Speaks(api.Gemini)
}

// IsPathItem reports whether an item of a passthrough line is a path
// (passed as written, to keys without rules), not a provider's route.
func IsPathItem(item string) bool { return strings.HasPrefix(item, "/") }

// MatchesPath reports whether the path p is the path item names: the same
// path, or, for an item that ends in '*', a path that starts with the rest.
func MatchesPath(item, p string) bool {
	if prefix, ok := strings.CutSuffix(item, "*"); ok {
		return strings.HasPrefix(p, prefix)
	}
	return p == item
}

// checkPassthrough checks an engine's passthrough line: each item a route
// of its provider, or a clean path.
func checkPassthrough(e engines.Config) error {
	if len(e.Passthrough) == 0 {
		return nil
	}
	if !PassesNamedOnly(&e) {
		return fmt.Errorf("engine %s: passthrough names what /upstream/ passes to a cloud provider's engine (one with a provider line); this engine's own pages pass already", e.Name)
	}
	var routes []string
	if p, ok := e.Provider.(providers.Passer); ok {
		routes = p.Routes()
	}
	for _, item := range e.Passthrough {
		switch {
		case IsPathItem(item):
			p, prefix := strings.CutSuffix(item, "*")
			if prefix {
				p = strings.TrimSuffix(p, "/") // "/*" and "/v1/*" are prefixes too
			}
			if strings.Contains(p, "*") || p != "" && !CleanPath(p) {
				return fmt.Errorf("engine %s: passthrough %q is not a clean path such as /v1/messages/batches (a prefix ends in '*')", e.Name, item)
			}
		case !slices.Contains(routes, item):
			if len(routes) == 0 {
				return fmt.Errorf("engine %s: passthrough %q: an engine without a provider has no routes of its own; name paths (starting with '/')", e.Name, item)
			}
			return fmt.Errorf("engine %s: passthrough %q is no route of provider %s: it has %s, or a path starting with '/'", e.Name, item, e.ProviderName(), strings.Join(routes, ", "))
		}
	}
	return nil
}

// checkRoutes checks an engine's routes line: each a clean path under /v1/
// (a prefix when it ends in '*') that no API serves already.
func checkRoutes(e engines.Config) error {
	for _, item := range e.Routes {
		p, prefix := strings.CutSuffix(item, "*")
		if !strings.HasPrefix(p, "/v1/") || strings.Contains(p, "*") || !CleanPath(strings.TrimSuffix(p, "/")) {
			return fmt.Errorf("engine %s: routes %q is not a clean path under /v1/ such as /v1/batches (a prefix ends in '*')", e.Name, item)
		}
		if a, ok := api.RouteOf(p); ok && !prefix {
			return fmt.Errorf("engine %s: routes %q is %s's own route, which every engine that speaks it serves: name only the paths beyond its APIs' own", e.Name, item, a)
		}
	}
	return nil
}
