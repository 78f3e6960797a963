package handler

import (
	"fmt"
	"net/http"
	"path"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Every candidate a request can reach is a model its key may use (docs/door.md#every-candidate-is-a-model-the-key-may-use).
// The door checks the model a request names; a plan reaches
// further: the engine's fallback and context_fallback, the body's
// "fallbacks", a resume on the fallback. A key that could make its own
// primary fail (hold its engine's one max_concurrent place with a slow
// stream) got 200 from a model that was 403 when asked for by name. So the
// door's may step is applied again to each candidate the planner hands out
// (loop.go's next), to a context fallback before it is inserted, to each
// resumer and to each body fallback before anything is sent:
//
//	candidate            the key may reach it when
//	primary, pool member  always: the door checked the model or pool it named
//	fallback, context,    it may use a name of that engine whose request is
//	body fallback         sent as what the candidate sends (the name itself,
//	                      or the engine's model_name), or, for a candidate
//	                      that leaves the body's model alone, any name of
//	                      that engine
//
// A configured fallback the key may not reach is skipped (as an engine that
// does not speak the request's API is); a body fallback is refused, 403.

// mayReach reports whether the key kr may use what c sends.
func (g *Gateway) mayReach(kr *keys.Rules, c candidate) bool {
	if kr.AllowsAll() || c.role == rolePrimary || c.role == rolePool {
		return true
	}
	for _, n := range kr.Models {
		if g.byModel[n] == c.rt && (c.model == "" || c.model == n || c.model == c.rt.cfg.ModelName) {
			return true
		}
	}
	return false
}

// mayReachEngine is what a key may reach of an engine's own pages on
// /upstream/: its slots only as an operator (keys.Rules.Operator), and
// under /v1/ only the APIs' routes with rules (mayPassV1).
// llama-server's /slots lists each slot's prompt, and saves, restores and
// erases them: other callers' conversations, which the gateway scopes by
// key. A key without a models line but with a budget read them all (issue
// 51): whether a key may use every model says nothing of whose prompts it
// may read.
func mayReachEngine(kr *keys.Rules, rt *route, tail string) *apierror.Error {
	if kr.Operator() {
		return nil
	}
	if tail == "/slots" || strings.HasPrefix(tail, "/slots/") {
		return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "passthrough_not_allowed", Message: fmt.Sprintf(
			"key %s may not read or act on engine %s's slots at %s…: they hold other callers' conversations (an operator's key may)", kr.Name, rt.cfg.Name, config.UpstreamPrefix)}
	}
	return mayPassV1(kr, rt, tail)
}

// mayPassV1 holds /upstream/ to routes by name (v1routes.go) for a key with
// rules: under /v1/ it reaches only the APIs' routes (files, batches,
// fine-tuning, … are for keys without rules, as on /v1/, where even a path
// an engine's routes line names is theirs alone). An engine that is no provider's but is sent the
// operator's key (`to https://api.openai.com` with api_key) passed any
// path: a key allowed one model listed the account's files through
// /upstream/<its model>/v1/files. (The door refuses dot segments and
// empty ones; Clean drops a trailing slash.)
func mayPassV1(kr *keys.Rules, rt *route, tail string) *apierror.Error {
	p := path.Clean(tail)
	// /V1/files too: a server may read its paths without case
	if kr.RuleFree() || !strings.HasPrefix(strings.ToLower(p), "/v1/") {
		return nil
	}
	if _, ok := api.RouteOf(p); ok {
		return nil
	}
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "route_not_allowed", Message: fmt.Sprintf(
		"key %s has rules, and %s is no API's route: engine %s's other paths under /v1/ are for keys without rules, through %s… too", kr.Name, shorten(p, maxEcho), rt.cfg.Name, config.UpstreamPrefix)}
}

// mayPinSlot refuses a body that names llama-server's id_slot to any key but
// an operator's: the slot is the gateway's to choose (slots save pins a
// session's own), and a slot the caller picks can hold another caller's
// cached prompt, whose reuse shows in the answer's timings.
func mayPinSlot(kr *keys.Rules, req *request) *apierror.Error {
	if kr.Operator() || !req.json() {
		return nil
	}
	if _, ok := jsonmember.LastMember(req.body, jsonmember.SkipSpace(req.body, 0), "id_slot"); ok {
		return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypeInvalidRequest, Code: "slot_not_allowed", Message: fmt.Sprintf(
			"key %s may not name an engine slot (id_slot): slots hold other callers' conversations; remove the field (an operator's key may name one)", kr.Name)}
	}
	return nil
}

// reachFilter is the planner's check for req's key: nil for a key that may
// use every model, which costs the walk nothing.
func (g *Gateway) reachFilter(req *request) func(candidate) bool {
	kr := req.key
	if kr.AllowsAll() {
		return nil
	}
	return func(c candidate) bool { return g.mayReach(kr, c) }
}
