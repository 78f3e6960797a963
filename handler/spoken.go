package handler

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"strings"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// What an engine speaks, learned (docs/translation.md#what-an-engine-speaks,
// engines/spoken.go). An engine with no `api` line is taken to speak every
// API; an older llama-server answers /v1/messages with its 404 "File Not
// Found", an older vLLM /v1/responses with FastAPI's {"detail":"Not
// Found"}, ollama before 0.14 /v1/messages with "404 page not found". When
// a request's own API path answers so, the engine's process is learned not
// to speak it, and this same request is sent once more, at once, through
// translation (or, for count_tokens, answered from the engine's tokenizer:
// counttokens.go): one extra call, on the lease the attempt holds, inside
// its header budget. The 404 is no failure: no verdict, no breaker, no
// retry, and the client never sees it. Later requests go translated from
// the start (operation.reads asks the engine), until the engine restarts.
//
// exchange is the hook: the attempt's round trip (send.go).

// maxNotFoundBody bounds what is read of a 404 to tell a missing route
// from a missing model: the engines' bodies for a route are a few words.
const maxNotFoundBody = 4 << 10

// exchange sends up through the attempt's engine and, when the engine
// answers that it has no route for the request's API, learns it and sends
// the request once more, translated.
func (g *Gateway) exchange(ctx context.Context, req *request, a *attempt, base *url.URL, up *http.Request) (*http.Response, error) {
	tr := a.c.rt.eng.Transport()
	resp, err := a.tr.roundTrip(tr, up)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != http.StatusNotFound && resp.StatusCode != http.StatusMethodNotAllowed {
		return resp, nil
	}
	learned, ok := unspokenRoute(req, a)
	if !ok {
		return resp, nil
	}
	head, _ := io.ReadAll(io.LimitReader(resp.Body, maxNotFoundBody+1))
	if !pathNotFound(resp.StatusCode, head) {
		resp.Body = struct {
			io.Reader
			io.Closer
		}{io.MultiReader(bytes.NewReader(head), resp.Body), resp.Body}
		return resp, nil
	}
	resp.Body.Close()
	e := a.c.rt.eng
	if e.Learn(learned) {
		g.log.Info("the engine does not speak this API: its requests go through translation until it restarts (an `api` line says what it speaks)",
			zap.String("engine", e.Name()), zap.String("path", up.URL.Path), zap.Int("status", resp.StatusCode),
			zap.Strings("unspoken", e.Unspoken().Names()))
	}
	t, terr := g.translationFor(req, a.c.rt, a.sent)
	if terr != nil || (!t.on && t.count == nil) {
		// nothing else reads it here: the engine's answer stands
		resp.Body = io.NopCloser(bytes.NewReader(head))
		return resp, nil
	}
	a.tr = t
	again, err := g.upstreamRequest(ctx, req, a, base)
	if err != nil {
		return nil, err
	}
	return a.tr.roundTrip(tr, again)
}

// unspokenRoute is the route a's request spoke natively, when its engine's
// process may be learned not to have it: a conversation's API on an engine
// with no `api` line (an `api` line says what it speaks, and stands), or
// count_tokens on any engine that reads it natively; ok is false for every
// other attempt (a translated one, a provider's, another route).
func unspokenRoute(req *request, a *attempt) (engines.Unspoken, bool) {
	cfg := &a.c.rt.cfg
	if a.tr.on || a.c.rt.provider != nil || a.c.rt.eng == nil {
		return 0, false
	}
	switch req.op {
	case opChat, opMessages, opResponses:
		return engines.UnspokenAPI(req.op.api()), len(cfg.APIs) == 0
	case opCountTokens:
		return engines.UnspokenCountTokens, true
	}
	return 0, false
}

// notFoundWords are what the engines say for a route they do not have
// (a 404) or a method a route does not take (a 405), as their bodies have
// them, lower case: llama-server's "File Not Found" (plain text before
// 2024, then the message of an OpenAI-shaped error), FastAPI's {"detail":
// "Not Found"} (vLLM, SGLang), Go's and gin's "404 page not found"
// (ollama), OpenAI's own "Invalid URL (POST /v1/messages)" (which
// OpenAI-compatible services copy), and the bare reasons of other
// servers. A 404 that names a model
// ("The model `x` does not exist", ollama's "model \"x\" not found") is
// about the model, not the route, and is passed on.
var notFoundWords = []string{"file not found", "not found", "404 page not found", "404 not found",
	"method not allowed", "405 method not allowed", "405 not allowed"}

// pathNotFound reports whether an engine's 404 or 405 body says that the
// route itself is missing: empty, one of notFoundWords, or a JSON object
// whose detail, message or error (a string, or an object's message) is
// one.
func pathNotFound(status int, body []byte) bool {
	text := strings.ToLower(strings.TrimSpace(string(body)))
	if status != http.StatusNotFound && status != http.StatusMethodNotAllowed || len(body) > maxNotFoundBody {
		return false
	}
	if text == "" || isNotFoundWord(text) {
		return true
	}
	var doc struct {
		Detail  json.RawMessage `json:"detail"`
		Message json.RawMessage `json:"message"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &doc) != nil {
		return false
	}
	var inner struct {
		Message json.RawMessage `json:"message"`
	}
	if json.Unmarshal(doc.Error, &inner) == nil && inner.Message != nil {
		doc.Error = inner.Message
	}
	for _, m := range [...]json.RawMessage{doc.Detail, doc.Message, doc.Error} {
		var s string
		if json.Unmarshal(m, &s) == nil && isNotFoundWord(strings.ToLower(strings.TrimSpace(s))) {
			return true
		}
	}
	return false
}

func isNotFoundWord(s string) bool {
	if strings.HasPrefix(s, "invalid url (") {
		return true
	}
	for _, w := range notFoundWords {
		if s == w {
			return true
		}
	}
	return false
}
