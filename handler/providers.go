package handler

import (
	"net/http"
	"net/url"
	"strings"
)

// Cloud providers in their own words (docs/translation.md#cloud-providers-own-apis, handler/provider): where a
// request goes (Bedrock, Gemini and Vertex name the model in the path,
// Azure the deployment) and with which credentials, and a streamed answer
// read as SSE whatever its framing. The hook sits where the upstream
// request is final (send) and where its answer comes back, before
// translation reads it; an engine without a provider goes where `to` and
// the path say, a translated request to the path of its engine's API.

// target points up at the engine: a provider's path and credentials, or a
// translated request's path; body is up's, as sent, for the model sent.
// An error says the provider's credentials could not be had
// (outcomeAuth).
func (t *translation) target(rt *route, req *request, up *http.Request, base *url.URL, sent string, body []byte) error {
	p := rt.provider
	if p == nil {
		if t.on {
			retarget(up, base, t.via)
		}
		return nil
	}
	in, _ := req.op.reads(&rt.cfg)
	tail := req.r.URL.Path
	if t.on {
		tail = t.via.Path()
		up.URL.RawQuery = base.RawQuery
		dropAnthropicHeaders(up.Header)
	}
	p.Target(up.URL, base, in, tail, sent, req.stream)
	return p.Authorize(up.Context(), up, body)
}

// dropAnthropicHeaders removes a Messages client's anthropic-* headers from
// a request translated into another API.
func dropAnthropicHeaders(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "Anthropic-") {
			delete(h, k)
		}
	}
}
