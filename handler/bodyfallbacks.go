package handler

import (
	"fmt"
	"slices"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// A client may name its own fallback chain in the body, as Bifrost and
// LiteLLM users do: "fallbacks": ["engine/model", "engine", …]. Only
// engines of this handler may be named, never an address: no request can
// make the gateway call something its config does not name. The field is
// gateway-only and never reaches an upstream (strict providers reject
// unknown fields).

// bodyFallbacks turns the field's value into candidates, or a 400 naming
// the offending item. Repeated items count once; more than max_fallbacks
// distinct items is a 400 before anything is sent: every item is an
// upstream call on an engine's key.
func (g *Gateway) bodyFallbacks(raw []byte, kr *keys.Rules) ([]candidate, *apierror.Error) {
	tooMany := apierror.BadRequest("too_many_fallbacks", fmt.Sprintf(
		`"fallbacks" names more than %d engines; this gateway's max_fallbacks is %d`, g.maxFallbacks, g.maxFallbacks))
	// more items than this is not worth resolving item by item
	items, more, err := jsonmember.ArrayItems(raw, 0, 4*g.maxFallbacks+16)
	switch {
	case err != nil:
		return nil, apierror.BadRequest("invalid_fallbacks", `"fallbacks" must be an array of "engine" or "engine/model" strings`)
	case more:
		return nil, tooMany
	}
	out := make([]candidate, 0, min(len(items), g.maxFallbacks))
	seen := map[string]bool{}
	for i, it := range items {
		s, ok := jsonmember.StringValue(raw, jsonmember.Member{Value: it})
		if !ok {
			return nil, apierror.BadRequest("invalid_fallbacks", fmt.Sprintf(`"fallbacks" item %d (%s) is not a string: use "engine" or "engine/model"`, i, raw[it.Start:it.End]))
		}
		c, err := g.bodyCandidate(string(s), kr)
		if err != nil {
			return nil, apierror.BadRequest("invalid_fallbacks", fmt.Sprintf(`"fallbacks" item %d (%q): %s`, i, s, err))
		}
		if key := c.rt.cfg.Name + "/" + c.model; !seen[key] {
			seen[key] = true
			if len(out) == g.maxFallbacks {
				return nil, tooMany
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// bodyCandidate resolves one item: ENGINE or ENGINE/MODEL (the model may
// itself contain slashes, as in openrouter/meta-llama/llama-3).
func (g *Gateway) bodyCandidate(item string, kr *keys.Rules) (candidate, error) {
	if strings.Contains(item, "://") || strings.HasPrefix(item, "//") {
		return candidate{}, fmt.Errorf("an address is not allowed; name an engine of this gateway (%s)", strings.Join(g.engineNames(kr), ", "))
	}
	name, model, hasModel := strings.Cut(item, "/")
	if name == "" || (hasModel && model == "") || strings.TrimSpace(item) != item {
		return candidate{}, fmt.Errorf(`malformed: use "engine" or "engine/model"`)
	}
	rt := g.byName[name]
	if rt == nil {
		return candidate{}, fmt.Errorf("no engine %s here; engines: %s", name, strings.Join(g.engineNames(kr), ", "))
	}
	if !hasModel {
		// the engine's own name for its models, else the first of its
		// names the key may use (reach.go checks the item as sent)
		model = rt.cfg.ModelName
		if only := kr.Only(rt.cfg.Models); model == "" && len(only) > 0 {
			model = only[0]
		} else if model == "" {
			model = rt.cfg.Models[0]
		}
	} else if model != rt.cfg.ModelName && !slices.Contains(rt.cfg.Models, model) {
		// the engine's key pays for what it is sent: only models the
		// config lists for it may be named
		return candidate{}, fmt.Errorf("engine %s does not serve model %s here; it serves %s", name, model, strings.Join(rt.cfg.Models, ", "))
	}
	return candidate{rt: rt, model: model, role: roleBody, acquire: true}, nil
}

// named resolves a request's model of the form engine/model (or engine):
// never one a pool or engine serves under that very name.
func (g *Gateway) named(model string, kr *keys.Rules) (candidate, bool) {
	if g.byModel[model] != nil || g.pools[model] != nil {
		return candidate{}, false
	}
	c, err := g.bodyCandidate(model, kr)
	return c, err == nil
}

// engineNames lists the engines, or for a restricted key those that serve
// a model it may use.
func (g *Gateway) engineNames(kr *keys.Rules) []string {
	var names []string
	for _, rt := range g.routes {
		if len(kr.Only(rt.cfg.Models)) > 0 {
			names = append(names, rt.cfg.Name)
		}
	}
	return names
}

// withBodyFallbacks returns plan followed by the body's fallbacks, if the
// request names any (a new slice: route plans are shared).
func (g *Gateway) withBodyFallbacks(req *request, plan []candidate) ([]candidate, *apierror.Error) {
	if req.fallbacks == nil {
		return plan, nil
	}
	if !g.allowBodyFallbacks {
		return nil, apierror.BadRequest("fallbacks_disabled", `"fallbacks" in the request body are disabled on this gateway (body_fallbacks off); remove the field`)
	}
	extra, err := g.bodyFallbacks(req.fallbacks, req.key)
	if err != nil {
		return nil, err
	}
	for _, c := range extra {
		// a key cannot reach through fallbacks a model it may not use:
		// the model each item sends, not only its engine (reach.go)
		if !g.mayReach(req.key, c) {
			return nil, req.key.NotAllowed(c.rt.cfg.Name + "/" + c.model)
		}
	}
	out := make([]candidate, 0, len(plan)+len(extra))
	return append(append(out, plan...), extra...), nil
}
