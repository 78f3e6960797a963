package handler

import (
	"net/http"
	"net/url"
	"strings"
)

// Cloud providers in their own words (SPEC §16, handler/provider): where a
// request goes (Bedrock, Gemini and Vertex name the model in the path,
// Azure the deployment) and with which credentials, and a streamed answer
// read as SSE whatever its framing. The hook sits where the upstream
// request is final (send) and where its answer comes back, before
// translation reads it; an engine without a provider goes where `to` and
// the path say, a translated request to the path of its engine's API.

// target points up at the engine: a provider's path and credentials, or a
// translated request's path; body is up's, as sent. It reports false when
// the provider's credentials could not be had (outcomeAuth).
func (g *Gateway) target(a *attempt, up *http.Request, base *url.URL, body []byte) bool {
	p := a.c.rt.provider
	if p == nil {
		if a.tr.via != 0 {
			retarget(up, base, a.tr.via)
		}
		return true
	}
	in, _ := a.req.op.reads(&a.c.rt.cfg)
	tail := a.req.r.URL.Path
	if a.tr.via != 0 {
		tail = a.tr.via.Path()
		up.URL.RawQuery = base.RawQuery
		dropAnthropicHeaders(up.Header)
	}
	p.Target(up.URL, base, in, tail, a.sent, a.req.stream)
	if err := p.Authorize(up.Context(), up, body); err != nil {
		a.outcome, a.err = outcomeAuth, err
		return false
	}
	return true
}

// fromProvider reads a good answer's stream as SSE events, whatever the
// provider's framing (Bedrock's event stream).
func fromProvider(a *attempt) {
	if p := a.c.rt.provider; p != nil {
		a.resp.Body = p.Events(a.resp.Header, a.resp.Body)
	}
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
