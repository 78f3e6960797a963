// Package translate carries one exchange between the three APIs an LLM
// client speaks: OpenAI's Chat Completions, OpenAI's Responses and
// Anthropic's Messages. It translates a request body into the engine's
// API, and the engine's answer back into the client's: a JSON answer
// whole, an event stream event by event (never buffering an answer, so
// the first token leaves as soon as it came), and an error body. It knows
// nothing of requests, keys or engines: bytes in, bytes out.
//
// The APIs are package api's. The facts it follows, with their sources,
// are in docs/translation-facts.md; the table of what carries and what
// does not is docs/translation.md.
package translate

import (
	"fmt"
)

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
