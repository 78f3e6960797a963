package handler

import (
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
)

// What /upstream/ reaches of a provider's engine (issue 51). Its
// credentials open the provider's whole API, and the path names the model
// (Bedrock, Gemini, Vertex, Azure's deployments) or nothing the key's
// models bound (batches, files): a key allowed one Gemini model got 200
// from another through /upstream/<its model>/v1beta/models/<another>:….
// So such an engine (config.PassesNamedOnly) passes only what its
// passthrough line names:
//
//	the caller's path              passes                        to
//	one of the provider's routes   for a key that may use the    the path the provider builds
//	the line names                 model its path (or body)      for the engine's model
//	                               names, POST only              (RouteTarget)
//	a path the line names          for a key without rules       as written
//	anything else                  never: 404 naming the engine
//	                               and its passthrough line
//
// Another engine passes its own pages, but its slots (mayReachEngine).

// passRoute is what /upstream/ sends a provider's engine: one of its routes
// for the model sent, or a path the operator named, as written (name "").
type passRoute struct {
	name      string // the provider's route; "" for a path the line names
	sent      string // the model the route is sent for
	bodyModel bool   // the body names the model: it must, and is sent as sent
}

// passRouteOf decides what /upstream/<model><tail> reaches of rt: nil for
// an engine whose own pages pass.
func (g *Gateway) passRouteOf(r *http.Request, kr *keys.Rules, rt *route, model, tail string) (*passRoute, *apierror.Error) {
	if !config.PassesNamedOnly(&rt.cfg) {
		return nil, mayReachEngine(kr, rt, tail)
	}
	for _, item := range rt.cfg.Passthrough {
		if config.IsPathItem(item) && config.MatchesPath(item, tail) {
			if !kr.RuleFree() {
				return nil, &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "route_not_allowed", Message: fmt.Sprintf(
					"key %s has rules, and %s%s%s is a path engine %s passes only to keys without rules: its models cannot bound it", kr.Name, config.UpstreamPrefix, shorten(model, maxEcho), shorten(tail, maxEcho), rt.cfg.Name)}
			}
			return &passRoute{}, nil
		}
	}
	p := rt.passer()
	if p == nil {
		return nil, g.noPassRoute(rt, model, tail)
	}
	route, ok := p.ReadRoute(tail)
	if !ok || !slices.Contains(rt.cfg.Passthrough, route.Name) {
		return nil, g.noPassRoute(rt, model, tail)
	}
	if r.Method != http.MethodPost {
		return nil, &apierror.Error{Status: http.StatusMethodNotAllowed, Type: apierror.TypeInvalidRequest, Code: "method_not_allowed", Message: fmt.Sprintf("%s %s…: engine %s's route %s takes POST", r.Method, config.UpstreamPrefix, rt.cfg.Name, route.Name)}
	}
	pr := &passRoute{name: route.Name, sent: rt.cfg.ModelName, bodyModel: route.Model == ""}
	if pr.bodyModel {
		return pr, nil // the body's model is checked as it is read (readPassthrough)
	}
	if gerr := g.mayNameInPath(kr, rt, model, route.Model); gerr != nil {
		return nil, gerr
	}
	if pr.sent == "" {
		pr.sent = route.Model
	}
	return pr, nil
}

// mayNameInPath checks the model a provider's path names: the engine's
// model_name, or one of its models the key may use. It is compared, never
// sent: the route goes to the path the provider builds.
func (g *Gateway) mayNameInPath(kr *keys.Rules, rt *route, model, named string) *apierror.Error {
	switch {
	case named == rt.cfg.ModelName:
		return nil
	case g.byModel[named] != rt:
		return apierror.BadRequest("model_mismatch", fmt.Sprintf(
			"the path names the model %q, which %s%s/ does not serve: send it to the path of its own model", shorten(named, maxEcho), config.UpstreamPrefix, shorten(model, maxEcho)))
	case !kr.Allows(named):
		return kr.NotAllowed(named)
	}
	return nil
}

// noPassRoute is the 404 of a path a provider's engine does not pass: it
// names the engine and the line that would pass it.
func (g *Gateway) noPassRoute(rt *route, model, tail string) *apierror.Error {
	what := "passes nothing of its provider's API through " + config.UpstreamPrefix + " unless the operator names it"
	if len(rt.cfg.Passthrough) > 0 {
		what = "passes through " + config.UpstreamPrefix + " only what its passthrough line names (" + strings.Join(rt.cfg.Passthrough, " ") + ")"
	}
	how := "paths starting with '/'"
	if p := rt.passer(); p != nil {
		how = "its routes (" + strings.Join(p.Routes(), ", ") + "), sent for the caller's model, or paths starting with '/', for keys without rules"
	}
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "route_not_found", Message: fmt.Sprintf(
		"%s%s%s: engine %s %s; the operator allows more with passthrough <route|path…> in the engine's block: %s",
		config.UpstreamPrefix, shorten(model, maxEcho), shorten(tail, maxEcho), rt.cfg.Name, what, how)}
}

// target points up at the route, once its body is final: the provider's
// path for the model sent, and its credentials (a SigV4 signature, a Vertex
// token), which a path the line names needs as much. Nothing for an engine
// whose own pages pass (pr nil).
func (pr *passRoute) target(rt *route, up *http.Request, base *url.URL, body []byte) error {
	if pr == nil || rt.provider == nil {
		return nil
	}
	if p := rt.passer(); p != nil && pr.name != "" {
		p.RouteTarget(up.URL, base, pr.name, pr.sent)
	}
	return rt.authorize(up, body)
}
