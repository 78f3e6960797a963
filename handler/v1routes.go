package handler

import (
	"fmt"
	"net/http"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
)

// Routes by name, not by prefix (issue 51; api/routes.go has the table):
// a request under /v1/ is on one of its APIs' routes, or on a path an
// engine's `routes` line names, or on no route at all. Before, any POST
// under /v1/ reached an engine that speaks OpenAI's API: a key allowed one
// model ran a fine-tuning job of 50 epochs with the operator's key
// (charged what the answer reported), and /v1/messages/batches reached
// Anthropic with an allowed top-level model and another one inside.
//
//	the path                              who passes                what it reaches
//	an API's route (api.Routes)           every key, for its        the engines that speak the API
//	                                      models
//	named by an engine's routes line      keys without rules        only the engines that name it
//	                                      (403 route_not_allowed)   (the planner skips the others)
//	anything else                         nobody (404               nothing
//	                                      route_not_found)
//
// The check comes before the body is read: a key with rules never reaches
// an undeclared route, whatever its body names.

// mayRoute is the door's check of a /v1/ path (ServeHTTP): "" for an API's
// route, the path for one an engine's routes line names (what the request
// may then reach: servesRoute), or the refusal.
func (g *Gateway) mayRoute(p string, kr *keys.Rules) (string, *apierror.Error) {
	if _, ok := api.RouteOf(p); ok {
		return "", nil
	}
	var by []string
	for _, rt := range g.routes {
		if rt.servesRoute(p) {
			by = append(by, rt.cfg.Name)
		}
	}
	if len(by) == 0 {
		return "", &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "route_not_found", Message: fmt.Sprintf(
			"%s is no route served here: the APIs' routes are %s (an engine's routes line may name another, for keys without rules)", p, strings.Join(allRoutes(), ", "))}
	}
	if !kr.RuleFree() {
		return "", &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "route_not_allowed", Message: fmt.Sprintf(
			"key %s may not use %s: it is a route beyond the APIs' own, which the operator opened on engine %s for keys without rules", kr.Name, p, strings.Join(by, ", "))}
	}
	return p, nil
}

// servesRoute reports whether the engine's routes line names the path p.
func (rt *route) servesRoute(p string) bool {
	for _, item := range rt.cfg.Routes {
		if config.MatchesPath(item, p) {
			return true
		}
	}
	return false
}

// notServedRoute is the refusal of a request on a named route whose model's
// engine does not name it.
func notServedRoute(req *request, rt *route) *apierror.Error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "route_not_found", Message: fmt.Sprintf(
		"the model %q is not served on %s: its engine %s's routes line does not name it", req.model, req.route, rt.cfg.Name)}
}

// allRoutes are the APIs' routes, for the refusal of a path that is none.
func allRoutes() []string {
	var out []string
	for _, a := range api.Clients {
		out = append(out, api.Routes(a)...)
	}
	return out
}
