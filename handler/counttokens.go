package handler

import (
	"bytes"
	"io"
	"net/http"
	"net/url"
	"strconv"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/tokencount"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// count_tokens on every engine (docs/translation.md#count_tokens). Claude
// Code asks POST /v1/messages/count_tokens before its turns; an engine
// that speaks Messages answers it natively, and one that does not (a
// Chat-only engine, an older llama-server, ollama, whose Messages has no
// count_tokens) is answered here: the request is translated into Chat
// Completions, as a Messages request to the engine would be (its system,
// its tools and their results included), and counted by the engine's own
// tokenizer (POST /tokenize: vLLM renders the translated messages and
// tools with the model's chat template and counts them exactly;
// llama-server tokenizes their text, which misses only its template's own
// few tokens a message). An engine without a tokenizer (its /tokenize
// answers 404: ollama; a cloud provider's engine, which is not asked) gets
// an estimate, four bytes a token (tokencount.Prompt.Estimate). The answer
// says which: X-LLM-Token-Count is tokenizer or estimate.
//
// A count is free: the door counts it against the key's request rate and
// reserves and charges no tokens (admission.go). The hook is the
// translation's (translateRequest → countTranslation; the attempt's round
// trip → roundTrip).

// TokenCountHeader says how a count_tokens answer the gateway made was
// counted: "tokenizer" (the engine's) or "estimate".
const TokenCountHeader = "X-LLM-Token-Count"

// maxTokenizeAnswer bounds a /tokenize answer read whole: vLLM's lists
// every token id, a few bytes each.
const maxTokenizeAnswer = 16 << 20

// counting is a count_tokens request answered by the gateway: from the
// engine's tokenizer, or estimated.
type counting struct {
	eng      *engines.Engine
	log      *zap.Logger
	local    bool // no engine to ask: a provider's engine, or a request the translation could not read
	estimate int
}

// translationFor is the translation of a request for a route's engine:
// count_tokens that the engine does not answer is counted
// (countTranslation), every other request translated as translateRequest
// says.
func (g *Gateway) translationFor(req *request, rt *route, sent string) (translation, error) {
	if in, _ := req.op.readsNow(&rt.cfg, rt.eng); req.op == opCountTokens && in != api.Messages {
		return g.countTranslation(req, rt, sent), nil
	}
	return g.translateRequest(req, rt, sent)
}

// countTranslation is the translation of a count_tokens request for an
// engine that does not answer it: the /tokenize body of the request as
// the engine would be sent it in Chat Completions (with the engine's
// filters: a stripped member is not counted), and the estimate.
func (g *Gateway) countTranslation(req *request, rt *route, sent string) translation {
	c := &counting{eng: rt.eng, log: g.log, local: rt.provider != nil || rt.eng == nil}
	t := translation{on: true, via: api.Chat, client: api.Messages, count: c}
	body := req.bodyFor(sent)
	chat, _, err := translate.RequestBody(api.Messages, api.Chat, body, translate.RequestOptions{Model: sent})
	if err == nil && len(rt.filters) > 0 {
		chat = jsonmember.ApplyFilters(chat, rt.filters)
	}
	var p tokencount.Prompt
	if err == nil {
		p, err = tokencount.Read(chat)
	}
	if err != nil {
		// a body the translation cannot read (it was read as Messages
		// at the door): its bytes, estimated
		c.local, p = true, tokencount.Prompt{Text: string(body), Messages: 1}
	}
	c.estimate = p.Estimate()
	t.body = tokencount.TokenizeBody(sent, chat, p)
	return t
}

// target points a count at the engine's tokenizer.
func (c *counting) target(up *http.Request, base *url.URL) {
	up.URL.Path = upstream.JoinPath(base.Path, "/tokenize")
	up.URL.RawQuery = base.RawQuery
	dropAnthropicHeaders(up.Header)
}

// roundTrip is the attempt's one call of its engine: up as it is, or for
// a count, the engine's tokenizer (once it is known to have one, or not
// yet known not to) and the count_tokens answer made of what it said.
func (t *translation) roundTrip(rt http.RoundTripper, up *http.Request) (*http.Response, error) {
	if t.count == nil {
		return rt.RoundTrip(up)
	}
	return t.count.roundTrip(rt, up)
}

func (c *counting) roundTrip(rt http.RoundTripper, up *http.Request) (*http.Response, error) {
	if c.local || c.eng.Unspoken().Has(engines.UnspokenTokenize) {
		return c.answer(up, c.estimate, "estimate"), nil
	}
	resp, err := rt.RoundTrip(up)
	if err != nil {
		return nil, err // the engine's failure, judged as any attempt's
	}
	body, rerr := io.ReadAll(io.LimitReader(resp.Body, maxTokenizeAnswer+1))
	resp.Body.Close()
	if resp.StatusCode/100 == 2 && rerr == nil {
		if n, ok := tokencount.Tokenized(body); ok {
			return c.answer(up, n, "tokenizer"), nil
		}
	}
	if pathNotFound(resp.StatusCode, body) && c.eng.Learn(engines.UnspokenTokenize) {
		c.log.Info("the engine has no tokenizer at /tokenize: count_tokens is estimated until it restarts",
			zap.String("engine", c.eng.Name()), zap.Int("status", resp.StatusCode))
	}
	return c.answer(up, c.estimate, "estimate"), nil
}

// answer is count_tokens' answer of n tokens, counted by how.
func (c *counting) answer(up *http.Request, n int, how string) *http.Response {
	body := strconv.AppendInt([]byte(`{"input_tokens":`), int64(n), 10)
	body = append(body, '}')
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set(TokenCountHeader, how)
	return &http.Response{
		Status: "200 OK", StatusCode: http.StatusOK, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)), Request: up,
	}
}
