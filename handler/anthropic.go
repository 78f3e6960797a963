package handler

import (
	"net/http"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Anthropic's Messages API family: the shape of its errors and model
// listing, the usage its message_start reports, and its events in a
// resumable transcript. Its stream grammar sits beside OpenAI's in
// grammar.go.

// wantsAnthropic reports whether a models request comes from an Anthropic
// client, which sends anthropic-version on every call and expects its
// list shape.
func wantsAnthropic(r *http.Request) bool { return r.Header.Get("Anthropic-Version") != "" }

// serveAnthropicModel answers GET /v1/models/{id} in Anthropic's shape:
// a pool, or a model whose engine speaks the Messages API.
func (g *Gateway) serveAnthropicModel(w http.ResponseWriter, r *http.Request, id string, kr *keys.Rules) int {
	if g.pools[id] == nil || !kr.Allows(id) {
		if rt, _, ok := g.modelStatus(r, id, kr); !ok || !readsMessages(rt) {
			e := g.unknownModel(id, kr)
			e.WriteAs(w, api.Messages)
			return e.Status
		}
	}
	writeJSON(w, r, append(appendAnthropicModel(nil, id), '\n'))
	return http.StatusOK
}

// readsMessages reports whether a route's engine reads the Messages API,
// natively or through translation: its models are an Anthropic client's.
func readsMessages(rt *route) bool {
	_, ok := opMessages.readsNow(&rt.cfg, rt.eng)
	return ok
}

// appendAnthropicModel appends one model object of Anthropic's list.
func appendAnthropicModel(b []byte, id string) []byte {
	b = append(b, `{"type":"model","id":`...)
	b = jsonmember.AppendString(b, id)
	b = append(b, `,"display_name":`...)
	b = jsonmember.AppendString(b, id)
	return append(b, `,"created_at":"1970-01-01T00:00:00Z"}`...)
}

// serveAnthropicModels answers GET /v1/models in Anthropic's list shape:
// the models whose engines speak the Messages API, and the pools.
func (g *Gateway) serveAnthropicModels(w http.ResponseWriter, r *http.Request, kr *keys.Rules) {
	f := g.listingFleet(r.Context())
	var ids []string
	for _, rt := range g.routes {
		if !readsMessages(rt) {
			continue
		}
		listed, _ := g.listed(rt, kr)
		for _, m := range listed {
			if rt.listable(rt.status(f, m)) {
				ids = append(ids, m)
			}
		}
	}
	ids = append(ids, g.poolIDs(kr)...)
	b := []byte(`{"data":[`)
	for i, id := range ids {
		if i > 0 {
			b = append(b, ',')
		}
		b = appendAnthropicModel(b, id)
	}
	b = append(b, `],"has_more":false,"first_id":`...)
	if len(ids) > 0 {
		b = jsonmember.AppendString(b, ids[0])
		b = append(b, `,"last_id":`...)
		b = jsonmember.AppendString(b, ids[len(ids)-1])
	} else {
		b = append(b, `null,"last_id":null`...)
	}
	writeJSON(w, r, append(b, "}\n"...))
}

// addAnthropic records one Messages API event: the text deltas of block 0;
// any other block makes the stream not resumable.
func (t *transcript) addAnthropic(data []byte, e *grammar.Event) {
	obj := jsonmember.SkipSpace(data, 0)
	index0 := func() bool {
		m, ok := jsonmember.LastMember(data, obj, "index")
		return !ok || string(m.Raw(data)) == "0"
	}
	// the type of the object member name at obj, raw
	typeOf := func(name string) []byte {
		o, ok := jsonmember.LastMember(data, obj, name)
		if !ok || data[o.Value.Start] != '{' {
			return nil
		}
		m, ok := jsonmember.LastMember(data, o.Value.Start, "type")
		if !ok {
			return nil
		}
		return m.Raw(data)
	}
	switch string(e.Type.Raw(data)) {
	case `"content_block_start"`:
		if !index0() || string(typeOf("content_block")) != `"text"` {
			t.stop()
		}
	case `"content_block_delta"`:
		if !index0() || string(typeOf("delta")) != `"text_delta"` {
			t.stop()
			return
		}
		d, _ := jsonmember.LastMember(data, obj, "delta")
		m, ok := jsonmember.LastMember(data, d.Value.Start, "text")
		if !ok {
			t.stop()
			return
		}
		if t.text, ok = jsonmember.AppendStringValue(t.text, data, m); !ok {
			t.stop()
			return
		}
		if len(t.text) > maxTranscript {
			t.stop()
		}
	}
}
