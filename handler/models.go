package handler

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// modelStatus maps an engine's state to the model status llama.cpp's router
// mode and llama-swap report.
func modelStatus(s engines.State) string {
	switch s {
	case engines.Ready:
		return "loaded"
	case engines.Starting:
		return "loading"
	case engines.Sleeping:
		return "sleeping"
	}
	return "unloaded"
}

// status is the status of a route's model id: a started engine's state; a
// remote engine's, the state it reports everywhere (down, unknown or ready:
// its health checks, its breaker, whether it answered its model list
// lately, which the fan-out told it; a provider's, ready, failing or down
// by its answers, failing being no reason to unlist it); a models_from
// node's, what it reports of the model.
func (rt *route) status(f *fleet, id string) string {
	if !rt.cfg.Managed() {
		if st := rt.eng.Status().State; st != "ready" && st != "failing" {
			return "unloaded"
		}
		if rt.cfg.ModelsFrom != "" {
			if s := f.models[rt.cfg.Name][rt.sentName(id)]; s != "" {
				return s
			}
			return "unloaded"
		}
		return "loaded"
	}
	return modelStatus(rt.eng.State())
}

// sentName is what the engine is sent for model id.
func (rt *route) sentName(id string) string {
	if rt.cfg.ModelName != "" {
		return rt.cfg.ModelName
	}
	return id
}

// listable reports whether a route's models belong in /v1/models: those of
// running engines (a remote one runs when it answers), and of stopped ones
// a request may wake.
func (rt *route) listable(status string) bool {
	return rt.wake || status != "unloaded"
}

// listed are the names of rt that /v1/models lists for a key: none for an
// unlisted engine; every name the key may use with list_aliases; else the
// first of them, the others being its aliases (five engines with
// aliases made nine entries in a client's model picker).
func (g *Gateway) listed(rt *route, kr *keys.Rules) (ids, aliases []string) {
	if rt.cfg.Unlisted {
		return nil, nil
	}
	for _, m := range rt.cfg.Models {
		if kr.Allows(m) {
			ids = append(ids, m)
		}
	}
	if g.listAliases || len(ids) < 2 {
		return ids, nil
	}
	return ids[:1], ids[1:]
}

// appendModel appends one OpenAI model object; aliases, when given, are
// the other names that serve it.
func appendModel(b []byte, id string, rt *route, status string, aliases ...string) []byte {
	b = append(b, `{"id":`...)
	b = jsonmember.AppendString(b, id)
	b = append(b, `,"object":"model","created":0,"owned_by":`...)
	b = jsonmember.AppendString(b, rt.cfg.Name)
	if len(aliases) > 0 {
		b = append(b, `,"aliases":[`...)
		for i, a := range aliases {
			if i > 0 {
				b = append(b, ',')
			}
			b = jsonmember.AppendString(b, a)
		}
		b = append(b, ']')
	}
	b = appendAbout(b, rt.cfg.About)
	b = append(b, `,"status":{"value":"`...)
	b = append(b, status...)
	b = append(b, '"', '}')
	// breakers of both scopes, when either keeps requests away: the host's
	// (transport failures) and this model's (status failures, timeouts)
	sent := rt.cfg.ModelName
	if sent == "" {
		sent = id
	}
	eng, mod := rt.eng.Breaker().State(), rt.eng.ModelBreaker(sent).State()
	if eng != engines.BreakerClosed || mod != engines.BreakerClosed {
		b = append(b, `,"breaker":{"engine":"`...)
		b = append(b, eng.String()...)
		b = append(b, `","model":"`...)
		b = append(b, mod.String()...)
		b = append(b, '"', '}')
	}
	return append(b, '}')
}

// serveModels answers GET /v1/models in OpenAI's list format (Anthropic's
// for an Anthropic client).
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request, kr *keys.Rules) {
	if wantsAnthropic(r) {
		g.serveAnthropicModels(w, r, kr)
		return
	}
	f := g.listingFleet(r.Context())
	b := []byte(`{"object":"list","data":[`)
	first := true
	for _, rt := range g.routes {
		ids, aliases := g.listed(rt, kr)
		for _, m := range ids {
			status := rt.status(f, m)
			if !rt.listable(status) {
				continue
			}
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendModel(b, m, rt, status, aliases...)
		}
	}
	for _, id := range g.poolIDs(kr) {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendPool(b, id, g.pools[id].status(f))
	}
	b = append(b, "]}\n"...)
	writeJSON(w, r, b)
}

// poolIDs are the model ids pools answer to (those the key may use): each
// pool's name, and "auto" when the default pool has another name.
func (g *Gateway) poolIDs(kr *keys.Rules) []string {
	var ids []string
	for _, p := range g.poolList {
		if kr.Allows(p.cfg.Name) {
			ids = append(ids, p.cfg.Name)
		}
	}
	if d := g.pools[config.DefaultPool]; d != nil && d.cfg.Name != config.DefaultPool && kr.Allows(config.DefaultPool) {
		ids = append(ids, config.DefaultPool)
	}
	return ids
}

// status is a pool's model status: the best of its members' (loaded,
// then loading, then unloaded), so that a fleet's front door lists the
// model its nodes serve with the state they report.
func (p *pool) status(f *fleet) string {
	best := "unloaded"
	for _, m := range p.all() {
		switch m.rt.status(f, m.model) {
		case "loaded":
			return "loaded"
		case "loading":
			best = "loading"
		}
	}
	return best
}

func appendPool(b []byte, id, status string) []byte {
	b = append(b, `{"id":`...)
	b = jsonmember.AppendString(b, id)
	b = append(b, `,"object":"model","created":0,"owned_by":"pool","status":{"value":"`...)
	b = append(b, status...)
	return append(b, `"}}`...)
}

// serveModel answers GET /v1/models/{id} and returns the status.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, id string, kr *keys.Rules) int {
	if wantsAnthropic(r) {
		return g.serveAnthropicModel(w, r, id, kr)
	}
	if g.pools[id] != nil && kr.Allows(id) {
		writeJSON(w, r, append(appendPool(nil, id, g.pools[id].status(g.listingFleet(r.Context()))), '\n'))
		return http.StatusOK
	}
	rt, status, ok := g.modelStatus(r, id, kr)
	if !ok {
		e := g.unknownModel(id, kr)
		e.Write(w)
		return e.Status
	}
	writeJSON(w, r, append(appendModel(nil, id, rt, status), '\n'))
	return http.StatusOK
}

// modelStatus is the engine and status of a model the key may use, and
// whether it is listed now.
func (g *Gateway) modelStatus(r *http.Request, id string, kr *keys.Rules) (*route, string, bool) {
	rt := g.byModel[id]
	if rt == nil || !kr.Allows(id) {
		return nil, "", false
	}
	status := rt.status(g.listingFleet(r.Context()), id)
	return rt, status, rt.listable(status)
}

func writeJSON(w http.ResponseWriter, r *http.Request, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}

func (g *Gateway) unknownModel(model string, kr *keys.Rules) *apierror.Error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "model_not_found", Message: fmt.Sprintf("the model %q is not served here; served models: %s", shorten(model, maxEcho), strings.Join(kr.Only(g.modelNames()), ", "))}
}

// modelNames lists every model name and alias, then the pools, in config
// order.
func (g *Gateway) modelNames() []string {
	return append(g.engineModels(), g.poolIDs(nil)...)
}

// engineModels lists the models and aliases of the engines (no pools).
func (g *Gateway) engineModels() []string {
	var names []string
	for _, rt := range g.routes {
		names = append(names, rt.cfg.Models...)
	}
	return names
}
