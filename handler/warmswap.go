package handler

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
)

// Warm swaps, the request's side: on an engine with `slots
// save`, a request is pinned to the slot of its session (engines/slots.go
// decides which, and restores the session's saved slot first when the
// engine was stopped or slept since its last turn), by sending llama-server
// the slot in "id_slot". The session is recognised as pool affinity
// recognises it: the X-Session-Id header, else the caller's
// prompt_cache_key, else the conversation's prompt blocks (internal/prefix),
// each within the caller's scope (req.session, pool.go): another key's
// same session never takes, restores or overwrites this key's slot.

// sessionHeader names a session for slots save, as for pools' sticky
// sessions.
const sessionHeader = "X-Session-Id"

// warmSlot returns body pinned to its session's slot on the attempt's
// engine, its saved slot restored first; body as it was when the engine
// saves no slots, the body is a form, or the request has no session.
func (g *Gateway) warmSlot(req *request, a *attempt, body []byte) []byte {
	if a.lease == nil || !a.c.rt.cfg.SavesSlots() || !req.json() {
		return body
	}
	key := req.r.Header.Get(sessionHeader)
	if key == "" {
		if v, ok := jsonmember.StringValue(req.body, req.fields.PromptCacheKey); ok && len(v) > 0 {
			key = "prompt_cache_key:" + string(v)
		}
	}
	key, blocks := req.session(key, prefix.DefaultBlock)
	slot, ok := a.lease.Slot(req.r.Context(), key, blocks)
	if !ok {
		return body
	}
	pin := jsonmember.Filter{Path: []string{"id_slot"}, Value: strconv.AppendInt(nil, int64(slot), 10)}
	return jsonmember.ApplyFilters(body, []jsonmember.Filter{pin})
}
