package handler

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"sync"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Any client, any engine (docs/translation.md): a conversation in Chat Completions,
// Responses or Messages reaches an engine that speaks another of the three
// through internal/translate. This is translation's one hook in a request's
// path, at the attempt's edges: try translates the body before anything is
// started (a member the engine cannot carry is a 400 naming it, if no other
// candidate reads the request); send sends it to the engine's own path; and
// the answer is turned back into the client's API before anything reads
// it, so the hold before the first content, the relay, usage, the charge,
// the transcript and resume all see the client's grammar as if the engine
// spoke it. An engine that speaks the request's API always gets it
// natively, byte for byte.

// maxTranslatedAnswer bounds a JSON answer read whole to translate it.
const maxTranslatedAnswer = 16 << 20

// translation is what an attempt through translation keeps: the API its
// engine reads, and what the client's request said that shapes the answer.
type translation struct {
	on     bool    // the engine reads the request in via, not natively
	via    api.API // the API the engine is spoken to in
	client api.API
	body   []byte               // the request in via's API
	custom []string             // a Responses client's custom (freeform) tools
	ns     map[string][2]string // a Responses client's namespace tools: flattened name → {namespace, name}
	count  counter              // a request the gateway answers itself: count_tokens (counttokens.go)
}

// counter is a request the gateway answers itself from what it asks the
// engine (count_tokens from its tokenizer: counttokens.go): where it asks,
// and the call that makes the answer.
type counter interface {
	target(up *http.Request, base *url.URL)
	roundTrip(rt http.RoundTripper, up *http.Request) (*http.Response, error)
}

// translateRequest decides which API a route's engine reads the request
// in and, when it is not the request's own, translates the body with the
// model the attempt sends (sent). An error is a member the engine's API
// cannot carry (outcomeUntranslatable). The request is read once, and
// each (API, model) written once, however many attempts ask: a retry, a
// failover and a hedge take the same bytes (translations, below).
func (g *Gateway) translateRequest(req *request, rt *route, sent string) (translation, error) {
	var t translation
	cfg := &rt.cfg
	in, _ := req.op.readsNow(&rt.cfg, rt.eng)
	if in == req.op.api() || !req.json() {
		return t, nil
	}
	t.on, t.via, t.client = true, in, req.op.api()
	ts := req.translations
	if ts == nil {
		ts = &translations{} // a request made without one keeps nothing
	}
	w, err := ts.written(req, in, sent)
	if err != nil {
		return t, err
	}
	if w.first {
		for _, m := range w.dropped {
			g.log.Info("dropped a request member the engine's API cannot carry", zap.String("engine", cfg.Name),
				zap.Stringer("api", t.via), zap.String("member", m))
			if g.Hooks.Untranslated != nil {
				g.Hooks.Untranslated(cfg.Name, memberKind(m))
			}
		}
	}
	t.body, t.custom, t.ns = w.body, w.conv.Custom, w.conv.Namespaces
	return t, nil
}

// translations are a request's translations: the client's body read once
// into the neutral form, and the bodies written from it, one per API and
// model sent. The attempts of a race ask side by side: a mutex guards it.
type translations struct {
	mu      sync.Mutex
	conv    *translate.Request
	readErr error
	bodies  []written
}

// written is one body a request was translated into.
type written struct {
	to      api.API
	model   string
	body    []byte
	dropped []string
	err     error
	conv    *translate.Request
	first   bool // this ask wrote it: its drops are logged once
}

// written is the request in API to for model, written the first time it
// is asked for.
func (ts *translations) written(req *request, to api.API, model string) (written, error) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if ts.conv == nil && ts.readErr == nil {
		ts.conv, ts.readErr = translate.ReadRequest(req.op.api(), req.body)
	}
	if ts.readErr != nil {
		return written{}, ts.readErr
	}
	for _, w := range ts.bodies {
		if w.to == to && w.model == model {
			return w, w.err
		}
	}
	w := written{to: to, model: model, conv: ts.conv}
	w.body, w.dropped, w.err = ts.conv.Write(to, translate.RequestOptions{Model: model})
	ts.bodies = append(ts.bodies, w)
	w.first = true
	return w, w.err
}

// indexes are the array indexes in a member's path: a metric counts kinds
// of members, not each tool of each request.
var indexes = regexp.MustCompile(`\[[0-9]+\]`)

// memberKind is a dropped member's path without its indexes.
func memberKind(m string) string { return indexes.ReplaceAllString(m, "[]") }

// retarget points a translated request at the path of the engine's API
// (the client's query, Claude Code's ?beta=true, is the client's API's)
// with the headers that API needs: Messages requires anthropic-version,
// and the other two have no use for a Messages client's anthropic-*.
func retarget(up *http.Request, base *url.URL, via api.API) {
	up.URL.Path = upstream.JoinPath(base.Path, via.Path())
	up.URL.RawQuery = base.RawQuery
	dropAnthropicHeaders(up.Header)
	if via == api.Messages {
		up.Header.Set("Anthropic-Version", api.AnthropicVersion)
	}
}

// answer turns a good answer of the engine into the client's API: an
// event stream event by event as the relay reads it, a JSON answer whole,
// here, so that one the translation cannot read (bad) is the attempt's
// failure (outcomeBadAnswer) while another candidate may still answer. A
// read that fails (read) is the attempt's to classify.
func (t *translation) answer(resp *http.Response, req *request, sent string) (bad, read error) {
	if t.count != nil {
		return nil, nil // made in the client's API (counttokens.go)
	}
	h := resp.Header
	switch {
	case isEventStream(h.Get("Content-Type")):
		s := translate.NewStream(t.via, t.client, translate.StreamOptions{IncludeUsage: includesUsage(req), CustomTools: t.custom, Namespaces: t.ns, Model: sent})
		resp.Body = translate.NewReader(resp.Body, s)
		h.Del("Content-Length")
	case isJSON(h):
		body, err := io.ReadAll(io.LimitReader(resp.Body, maxTranslatedAnswer+1))
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		if len(body) > maxTranslatedAnswer {
			return fmt.Errorf("an answer over %d MiB is too large to translate", maxTranslatedAnswer>>20), nil
		}
		if body, err = translate.AnswerBody(t.via, t.client, body, translate.AnswerOptions{CustomTools: t.custom, Namespaces: t.ns, Model: sent}); err != nil {
			return err, nil
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		h.Set("Content-Length", strconv.Itoa(len(body)))
		resp.ContentLength = int64(len(body))
	}
	return nil, nil
}

// errorBody gives an engine's error answer the client's API's shape,
// keeping its status and message.
func (t *translation) errorBody(resp *http.Response, body []byte) []byte {
	if t.count != nil {
		return body // a count has no error of its engine's (counttokens.go)
	}
	resp.Header.Set("Content-Type", "application/json")
	resp.Header.Del("Content-Length")
	return translate.ErrorBody(t.via, t.client, resp.StatusCode, body)
}

// includesUsage reports whether a Chat client's stream asked for its usage
// chunk (or the gateway asked for it, to charge a token budget).
func includesUsage(req *request) bool {
	return jsonmember.IsTrue(req.body, jsonmember.Nested(req.body, "stream_options", "include_usage"))
}
