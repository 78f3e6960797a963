package handler

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/retry"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// Cloud providers in their own words (docs/providers.md, package providers):
// where a request goes (Bedrock, Gemini and Vertex name the model in the
// path, Azure the deployment) and with which credentials, and a streamed
// answer read as SSE whatever its framing. The hook sits where the upstream
// request is final (send) and where its answer comes back, before
// translation reads it; an engine without a provider goes where `to` and
// the path say, a translated request to the path of its engine's API.

// target points up at the engine: a provider's path and credentials, or a
// translated request's path; body is up's, as sent, for the model sent.
// An error says the provider's credentials could not be had
// (outcomeAuth).
func (t *translation) target(rt *route, req *request, up *http.Request, base *url.URL, sent string, body []byte) error {
	if t.count != nil {
		t.count.target(up, base) // count_tokens from the engine's tokenizer (counttokens.go)
		return nil
	}
	p := rt.provider
	if p == nil {
		if t.on {
			retarget(up, base, t.via)
		}
		return nil
	}
	in, _ := req.op.readsNow(&rt.cfg, rt.eng)
	path := req.r.URL.Path
	if t.on {
		path = t.via.Path()
		up.URL.RawQuery = base.RawQuery
		dropAnthropicHeaders(up.Header)
	}
	p.Target(up.URL, providers.Request{Base: base, API: in, Path: path, Model: sent, Stream: req.stream})
	return rt.authorize(up, body)
}

// readFailure lets the route's provider read an error answer in its own
// words, before translation gives its body the client's shape: the status
// and the wait the verdict table judges it by (attempt.judgement). nil for
// a provider that reads its failures as any engine's, and for an engine
// without one.
func (rt *route) readFailure(resp *http.Response, body []byte, now time.Time) *providers.Failure {
	r, ok := rt.provider.(providers.FailureReader)
	if !ok {
		return nil
	}
	f := &providers.Failure{Status: resp.StatusCode, RetryAfter: retry.After(resp.Header, now), Header: resp.Header, Body: body}
	r.ReadFailure(f)
	f.Header, f.Body = nil, nil // kept for the verdict only
	return f
}

// authorize sets the credentials of the route's provider beyond the
// engine's key (a SigV4 signature, a Vertex token), once up's body is
// final; nothing for a provider that has none.
func (rt *route) authorize(up *http.Request, body []byte) error {
	if a, ok := rt.provider.(providers.Authorizer); ok {
		return a.Authorize(up.Context(), up, body)
	}
	return nil
}

// events is a good answer's body as SSE events, for a provider that frames
// its streams otherwise (Bedrock); any other body as it is.
func (rt *route) events(h http.Header, body io.ReadCloser) io.ReadCloser {
	if r, ok := rt.provider.(providers.EventReader); ok {
		return r.Events(h, body)
	}
	return body
}

// passer is what the route's provider lets through /upstream/: nil for an
// engine without a provider, or whose provider has no routes.
func (rt *route) passer() providers.Passer {
	p, _ := rt.provider.(providers.Passer)
	return p
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
