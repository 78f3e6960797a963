package handler

import (
	"net/http"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// modelStatus maps an engine's state to the model status llama.cpp's router
// mode and llama-swap report.
func modelStatus(s engines.State) string {
	switch s {
	case engines.Ready:
		return "loaded"
	case engines.Starting:
		return "loading"
	}
	return "unloaded"
}

// listable reports whether a route's models belong in /v1/models: those of
// running engines, and of stopped ones a request may wake.
func (rt *route) listable() bool {
	return rt.wake || rt.eng.State() != engines.Stopped
}

// appendModel appends one OpenAI model object.
func appendModel(b []byte, id string, rt *route) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, id)
	b = append(b, `,"object":"model","created":0,"owned_by":`...)
	b = appendJSONString(b, rt.cfg.Name)
	b = append(b, `,"status":{"value":"`...)
	b = append(b, modelStatus(rt.eng.State())...)
	return append(b, `"}}`...)
}

// serveModels answers GET /v1/models in OpenAI's list format.
func (g *Gateway) serveModels(w http.ResponseWriter, r *http.Request) {
	b := []byte(`{"object":"list","data":[`)
	first := true
	for _, rt := range g.routes {
		if !rt.listable() {
			continue
		}
		for _, m := range rt.cfg.Models {
			if !first {
				b = append(b, ',')
			}
			first = false
			b = appendModel(b, m, rt)
		}
	}
	for _, id := range g.poolIDs() {
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendPool(b, id)
	}
	b = append(b, "]}\n"...)
	writeJSON(w, r, b)
}

// poolIDs are the model ids pools answer to: each pool's name, and "auto"
// when the default pool has another name.
func (g *Gateway) poolIDs() []string {
	var ids []string
	for _, p := range g.poolList {
		ids = append(ids, p.cfg.Name)
	}
	if d := g.pools[DefaultPool]; d != nil && d.cfg.Name != DefaultPool {
		ids = append(ids, DefaultPool)
	}
	return ids
}

func appendPool(b []byte, id string) []byte {
	b = append(b, `{"id":`...)
	b = appendJSONString(b, id)
	return append(b, `,"object":"model","created":0,"owned_by":"pool"}`...)
}

// serveModel answers GET /v1/models/{id} and returns the status.
func (g *Gateway) serveModel(w http.ResponseWriter, r *http.Request, id string) int {
	if g.pools[id] != nil {
		writeJSON(w, r, append(appendPool(nil, id), '\n'))
		return http.StatusOK
	}
	rt := g.byModel[id]
	if rt == nil || !rt.listable() {
		e := g.unknownModel(id)
		e.write(w)
		return e.Status
	}
	writeJSON(w, r, append(appendModel(nil, id, rt), '\n'))
	return http.StatusOK
}

func writeJSON(w http.ResponseWriter, r *http.Request, b []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(b)
	}
}
