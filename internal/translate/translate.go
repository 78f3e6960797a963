// Package translate carries one exchange between the three APIs an LLM
// client speaks: OpenAI's Chat Completions, OpenAI's Responses and
// Anthropic's Messages. It translates a request body into the engine's
// API, and the engine's answer back into the client's: a JSON answer
// whole, an event stream event by event (never buffering an answer, so
// the first token leaves as soon as it came), and an error body. It knows
// nothing of requests, keys or engines: bytes in, bytes out.
//
// The facts it follows, with their sources, are collected in
// TRANSLATION.md (shared with the product's spec); the table of what
// carries and what does not is docs/translation.md.
package translate

import (
	"fmt"
)

// API is one of the three request grammars.
type API uint8

const (
	Chat      API = iota + 1 // POST /v1/chat/completions
	Messages                 // POST /v1/messages (Anthropic)
	Responses                // POST /v1/responses
	// Converse is AWS Bedrock's Converse API (an engine's only: no client
	// speaks it to the gateway); its path names the model
	// (/model/{id}/converse, /converse-stream) and its stream is AWS's
	// binary event stream, which the provider turns into SSE events
	// ("event: <type>\ndata: <payload>") before translation reads them.
	Converse
	// Gemini is Google's generateContent (the Gemini API and Vertex AI),
	// an engine's only too; its path names the model and the method
	// (:generateContent, :streamGenerateContent?alt=sse).
	Gemini
)

// APIs are the three, in the order a translation prefers a target: Chat
// Completions is what most engines speak best.
var APIs = [...]API{Chat, Messages, Responses}

func (a API) String() string {
	switch a {
	case Chat:
		return "chat"
	case Messages:
		return "messages"
	case Responses:
		return "responses"
	case Converse:
		return "converse"
	case Gemini:
		return "gemini"
	}
	return "none"
}

// Path is the API's path under an engine's base URL; a provider's API
// (Converse, Gemini) has its path from the provider, which knows the model.
func (a API) Path() string {
	switch a {
	case Messages:
		return "/v1/messages"
	case Responses:
		return "/v1/responses"
	}
	return "/v1/chat/completions"
}

// Error is a request member the target API cannot carry: the gateway
// answers it with a 400 naming the member (and the engine).
type Error struct {
	Member string // the member's path in the client's request, e.g. "n" or "tools[2].type"
	Reason string // why it cannot be carried, e.g. "Messages answers one choice"
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s cannot be carried: %s", e.Member, e.Reason)
}

// DefaultMaxTokens is max_tokens of a request translated to Messages,
// which requires it, when the client set no limit and the engine's
// defaults none: a length the answers of coding agents fit in, which a
// model that can write less stops short of anyway (LiteLLM's 256 cut
// answers short; a model's own maximum is not known to the gateway).
const DefaultMaxTokens = 8192
