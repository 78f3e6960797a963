// Package api is what the gateway knows of each API a client or an engine
// speaks, in one place: its name (in the config, the metrics and the
// history), the path an engine serves it on, the shape of the errors said
// in it, how its streams say they are whole, whether a conversation in it
// can be translated, the one order in which translation prefers a target,
// and how its answers report their usage (usage.go). The handler decides a
// request's API once, when it reads its path; engines declare the APIs
// they speak with these names; internal/translate and internal/grammar
// read and write each API's bytes by it. It knows nothing of requests.
//
// It is not under internal/: a provider written outside this module (a
// Caddy guest module of its own, built in with xcaddy) names the APIs it
// speaks with these values.
//
// The facts behind each row, with their sources, are in
// docs/translation-facts.md.
package api

import "strings"

// API is one API a request speaks, or one an engine may be spoken to in.
type API uint8

// The APIs. Other is OpenAI's routes the gateway relays without reading
// their answers (audio, images, rerank, …); Converse and Gemini are cloud
// providers' own, which no client speaks to the gateway: only translation
// speaks them, to a provider's engine.
const (
	Other       API = iota // OpenAI's other routes
	Chat                   // Chat Completions: /v1/chat/completions
	Completions            // text completions: /v1/completions
	Responses              // OpenAI's Responses: /v1/responses
	Messages               // Anthropic's Messages: /v1/messages (and count_tokens)
	Embeddings             // embeddings: /v1/embeddings
	Converse               // AWS Bedrock's Converse (provider bedrock)
	Gemini                 // Google's generateContent (providers gemini and vertex)
	count
)

// ErrorShape is how an API's clients read an error: the body of an error
// answer, and an error that arrives inside a stream whose status went
// out long ago.
type ErrorShape uint8

const (
	// OpenAIErrors: {"error":{"message","type","code"}}; in a stream a
	// data-only event of the same object.
	OpenAIErrors ErrorShape = iota
	// AnthropicErrors: {"type":"error","error":{"type","message"}}, with
	// Anthropic's statuses (529 overloaded_error); in a stream
	// `event: error` with the same body.
	AnthropicErrors
	// ResponsesErrors: a body as OpenAI's; in a stream `event: error`
	// with {"type":"error","code","message","param","sequence_number"},
	// the event the Responses SDKs raise.
	ResponsesErrors
)

// End is how a stream of an API says its answer is whole, besides
// OpenAI's `data: [DONE]`.
type End uint8

const (
	EndConnection End = iota // the answer ends with the connection
	EndFinish                // a choice's finish_reason (chat, text completions)
	EndResponse              // response.completed, .incomplete or .failed
	EndMessage               // message_stop
)

// spec is one API's row.
type spec struct {
	name string
	// path is where an engine that speaks the API serves it, under its
	// base URL; a provider's API has its path from the provider, which
	// knows the model ("").
	path   string
	errors ErrorShape
	end    End
	// conversation: a request of the API can be translated into another
	// conversation API, and its answer back.
	conversation bool
	// readUsage reads the API's usage object; writeUsage writes one
	// (nil: Chat's, as OpenAI's other routes say it).
	readUsage  func(b []byte, v int) (Usage, bool)
	writeUsage func(u Usage, b []byte) []byte
}

var specs = [count]spec{
	Other:       {name: "openai", errors: OpenAIErrors, readUsage: otherUsage},
	Chat:        {name: "chat", path: "/v1/chat/completions", errors: OpenAIErrors, end: EndFinish, conversation: true, readUsage: chatUsage},
	Completions: {name: "completions", path: "/v1/completions", errors: OpenAIErrors, end: EndFinish, readUsage: chatUsage},
	Responses:   {name: "responses", path: "/v1/responses", errors: ResponsesErrors, end: EndResponse, conversation: true, readUsage: responsesUsage, writeUsage: Usage.appendResponses},
	Messages:    {name: "messages", path: "/v1/messages", errors: AnthropicErrors, end: EndMessage, conversation: true, readUsage: messagesUsage, writeUsage: Usage.appendMessages},
	Embeddings:  {name: "embeddings", path: "/v1/embeddings", errors: OpenAIErrors, readUsage: chatUsage},
	Converse:    {name: "converse", errors: OpenAIErrors, conversation: true, readUsage: converseUsage},
	Gemini:      {name: "gemini", errors: OpenAIErrors, conversation: true, readUsage: geminiUsage},
}

// String is the API's name, as `api` lines, metrics and history say it.
func (a API) String() string { return a.spec().name }

func (a API) spec() *spec {
	if a >= count {
		return &specs[Other]
	}
	return &specs[a]
}

// Path is where an engine that speaks the API serves it, under its base
// URL: "" for a provider's API (its provider makes the path) and Other.
func (a API) Path() string { return a.spec().path }

// Errors is how the API's clients read an error.
func (a API) Errors() ErrorShape { return a.spec().errors }

// End is how the API's streams say they are whole.
func (a API) End() End { return a.spec().end }

// Conversation reports whether a request of the API can be translated
// into another conversation API.
func (a API) Conversation() bool { return a.spec().conversation }

// Clients are the APIs a client speaks to the gateway, in the order an
// engine's `api` line lists them.
var Clients = [...]API{Chat, Completions, Responses, Messages, Embeddings, Other}

// Preference is the order in which a translation chooses the API an
// engine is spoken to in, of those it speaks: Chat Completions is what
// most engines speak best and every OpenAI-compatible one speaks; a cloud
// provider's own API only where the engine speaks nothing else.
var Preference = [...]API{Chat, Messages, Responses, Converse, Gemini}

// AnthropicVersion is the anthropic-version a Messages request is sent
// with when its client named none: the Messages API requires the header,
// and 2023-06-01 is the version every current model answers.
const AnthropicVersion = "2023-06-01"

// names are the names an engine's `api` line takes, each the set of APIs
// it declares: "openai" is every route of an OpenAI-compatible server.
var names = map[string][]API{
	"openai":      {Chat, Completions, Responses, Embeddings, Other},
	"chat":        {Chat},
	"completions": {Completions},
	"responses":   {Responses},
	"anthropic":   {Messages},
	"messages":    {Messages},
	"embeddings":  {Embeddings},
	"converse":    {Converse},
	"gemini":      {Gemini},
}

// Named is the set of APIs an `api` name declares; ok is false for a name
// `api` does not take.
func Named(name string) (apis []API, ok bool) {
	apis, ok = names[strings.ToLower(name)]
	return apis, ok
}

// Names are the names `api` takes, for its error.
const Names = "openai, chat, completions, responses, anthropic (or messages), embeddings, converse and gemini"
