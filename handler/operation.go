package handler

import (
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// What a request is, decided once (docs/translation.md): ServeHTTP reads its path into
// an operation, and everything after asks the operation, never the path
// again. Each operation knows its API (api: which engines can
// serve it, the shape of the gateway's own errors, how its stream says it
// is whole, how its usage reads), whether it can be asked for its usage,
// whether a transcript can follow it, and where its caller's user is:
//
//	operation         paths                             API          usage asked  transcript
//	opChat            /v1/chat/completions              chat         yes          yes
//	opCompletion      /v1/completions, /completions     completions  yes          no
//	opEmbeddings      /v1/embeddings, /embeddings,      embeddings   no           no
//	                  /embedding
//	opResponses       /v1/responses                     responses    no           no
//	opMessages        /v1/messages                      messages     no           yes
//	opCountTokens     /v1/messages/count_tokens         messages     no           no
//	opAnthropicOther  a /v1/messages/… route an engine  messages     no           no
//	                  names (v1routes.go)
//	opUpload          the form routes (takesForm)       openai       no           no
//	opOther           OpenAI's other routes (rerank,    openai       no           no
//	                  audio/speech, …: api.Routes), a
//	                  /v1/ route an engine names,
//	                  extra_paths
//	opPassthrough     /upstream/<model>/…               openai       no           no
type operation uint8

const (
	opOther operation = iota
	opChat
	opCompletion
	opEmbeddings
	opResponses
	opMessages
	opCountTokens
	opAnthropicOther
	opUpload
	opPassthrough
)

// operationOf is the operation of a request for path p (of a kind the
// gateway serves: pathKind decided that, and whether it is /upstream/).
func operationOf(p string, passthrough bool) operation {
	switch {
	case passthrough:
		return opPassthrough
	case p == "/v1/messages":
		return opMessages
	case p == "/v1/messages/count_tokens":
		return opCountTokens
	case strings.HasPrefix(p, "/v1/messages/"):
		return opAnthropicOther
	case takesForm(p):
		return opUpload
	}
	if _, ok := api.RouteOf(p); !ok && strings.HasPrefix(p, "/v1/") {
		return opOther // a route an engine names (v1routes.go): by its name, never by its end
	}
	// by the path's end, as an extra path such as /api/v1/chat/completions
	// is the same operation as OpenAI's
	switch {
	case strings.HasSuffix(p, "/chat/completions"):
		return opChat
	case strings.HasSuffix(p, "/completions"):
		return opCompletion
	case strings.HasSuffix(p, "/embeddings"), p == "/embedding":
		return opEmbeddings
	case strings.HasSuffix(p, "/responses"):
		return opResponses
	}
	return opOther
}

// formPaths are the routes whose bodies are forms: OpenAI's uploads. Under
// /v1/, or as extra_paths of the same name without it.
var formPaths = map[string]bool{
	"/audio/transcriptions": true, "/audio/translations": true,
	"/images/edits": true, "/images/variations": true,
}

// takesForm reports whether the route at path reads a multipart form.
func takesForm(path string) bool {
	return formPaths[strings.TrimPrefix(path, "/v1")]
}

// api is the operation's API: the one an engine must speak to serve it
// natively, and the one whose shape the gateway's own errors take.
func (o operation) api() api.API {
	switch o {
	case opChat:
		return api.Chat
	case opCompletion:
		return api.Completions
	case opResponses:
		return api.Responses
	case opMessages, opCountTokens, opAnthropicOther:
		return api.Messages
	case opEmbeddings:
		return api.Embeddings
	}
	return api.Other
}

// reads says whether an engine (cfg) can read a request of the
// operation, and in which API: its own, or through translation
// (translate.go) for the three conversations. Messages' count_tokens is
// answered natively by an engine that speaks Messages, else by every
// engine that allows translation, from its tokenizer (counttokens.go).
// What an attempt is sent in asks the engine's process (readsOn,
// spoken.go).
func (o operation) reads(cfg *engines.Config) (api.API, bool) {
	switch o {
	case opChat, opMessages, opResponses:
		return cfg.Reads(o.api())
	case opCountTokens:
		if cfg.Speaks(api.Messages) {
			return api.Messages, true
		}
		return api.Chat, cfg.Translates()
	}
	return o.api(), cfg.Speaks(o.api())
}

// readsNow is reads for an engine as its process is known to speak (eng,
// nil for none: engines/spoken.go): what an attempt is sent in, and which
// candidates a plan walks. An API it was learned not to speak is read
// through translation, a count_tokens it was learned not to have is
// counted from its tokenizer.
func (o operation) readsNow(cfg *engines.Config, eng *engines.Engine) (api.API, bool) {
	switch {
	case eng == nil || eng.Unspoken() == 0:
		return o.reads(cfg)
	case o == opChat || o == opMessages || o == opResponses:
		return eng.Reads(o.api())
	case o == opCountTokens:
		if eng.Speaks(api.Messages) && !eng.Unspoken().Has(engines.UnspokenCountTokens) {
			return api.Messages, true
		}
		return api.Chat, cfg.Translates()
	}
	return o.reads(cfg)
}

// grammar is how the operation's streams are read: their events, how they
// say they are whole, besides OpenAI's [DONE], and how they report usage.
// Messages' count_tokens answers in JSON: its stream, were there one,
// would end with the connection, as every route's but the conversations'.
func (o operation) grammar() grammar.Grammar {
	if o == opCountTokens || o == opAnthropicOther {
		return grammar.Grammar{API: api.Other}
	}
	return grammar.Grammar{API: o.api()}
}

// asksUsage reports whether a stream of the operation can be asked to
// report its usage (stream_options.include_usage): chat and text
// completions.
func (o operation) asksUsage() bool { return o == opChat || o == opCompletion }

// transcribed reports whether a transcript can follow the operation's
// streams (resume, trace_content): the conversations, chat and messages.
func (o operation) transcribed() bool { return o == opChat || o == opMessages }

// user is where a request body of the operation names its caller's user,
// for sticky sessions: the Messages API's metadata.user_id, else "user".
func (o operation) user(body []byte, f *jsonmember.Fields) jsonmember.Member {
	if o.api() == api.Messages {
		return jsonmember.Nested(body, "metadata", "user_id")
	}
	return f.User
}
