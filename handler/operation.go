package handler

import (
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// What a request is, decided once (SPEC §15): ServeHTTP reads its path into
// an operation, and everything after asks the operation, never the path
// again. Each operation knows its API family (which engines can serve it,
// and the shape of the gateway's own errors), how its stream says it is
// whole, whether it can be asked for its usage, whether a transcript can
// follow it, and where its caller's user is:
//
//	operation         paths                             family      end rule  usage asked  transcript
//	opChat            /v1/chat/completions              openai      finish    yes          yes
//	opCompletion      /v1/completions, /completions     openai      finish    yes          no
//	opEmbeddings      /v1/embeddings, /embeddings,      embeddings  —         no           no
//	                  /embedding
//	opResponses       /v1/responses                     openai      response  no           no
//	opMessages        /v1/messages                      anthropic   message   no           yes
//	opAnthropicOther  /v1/messages/… (count_tokens)     anthropic   —         no           no
//	opUpload          the form routes (takesForm)       openai      —         no           no
//	opOther           any other /v1/ POST, extra_paths  openai      —         no           no
//	opPassthrough     /upstream/<model>/…               openai      —         no           no
//
// An end rule of — ends with the connection.
type operation uint8

const (
	opOther operation = iota
	opChat
	opCompletion
	opEmbeddings
	opResponses
	opMessages
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
	case strings.HasPrefix(p, "/v1/messages/"):
		return opAnthropicOther
	case takesForm(p):
		return opUpload
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

// api is the family whose shape the gateway's own errors take.
func (o operation) api() apierror.API {
	if o == opMessages || o == opAnthropicOther {
		return apierror.Anthropic
	}
	return apierror.OpenAI
}

// family is the API an engine must speak to serve the operation natively.
func (o operation) family() engines.API {
	switch o {
	case opChat:
		return engines.APIChat
	case opCompletion:
		return engines.APICompletions
	case opResponses:
		return engines.APIResponses
	case opMessages, opAnthropicOther:
		return engines.APIMessages
	case opEmbeddings:
		return engines.APIEmbeddings
	}
	return engines.APIOther
}

// reads says whether an engine can read a request of the operation, and
// in which API: its own, or through translation (translate.go) for the
// three conversations. Messages' count_tokens has no translation: it goes
// only to engines that speak Messages.
func (o operation) reads(cfg *engines.Config) (engines.API, bool) {
	if o == opChat || o == opMessages || o == opResponses {
		return cfg.Reads(o.family())
	}
	return o.family(), cfg.Speaks(o.family())
}

// grammar is how the operation's streams are read: their events, and how
// they say they are whole, besides OpenAI's [DONE].
func (o operation) grammar() grammar.Grammar {
	g := grammar.Grammar{Anthropic: o.api() == apierror.Anthropic, End: grammar.EndConnection}
	switch o {
	case opChat, opCompletion:
		g.End = grammar.EndFinish
	case opResponses:
		g.End = grammar.EndResponse
	case opMessages:
		g.End = grammar.EndMessage
	}
	return g
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
	if o.api() == apierror.Anthropic {
		return jsonmember.Nested(body, "metadata", "user_id")
	}
	return f.User
}
