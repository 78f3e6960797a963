// Package translate carries one exchange between the three APIs an LLM
// client speaks: OpenAI's Chat Completions, OpenAI's Responses and
// Anthropic's Messages. It translates a request body into the engine's
// API, and the engine's answer back into the client's: a JSON answer
// whole, an event stream event by event (never buffering an answer, so
// the first token leaves as soon as it came), and an error body. It knows
// nothing of requests, keys or engines: bytes in, bytes out.
//
// A hub with spokes. The hub is the neutral form of each thing that
// crosses: a Request (request.go), an Answer of Blocks (answer.go), the
// steps of a Stream (stream.go: start, open, delta, close, finish, fail,
// bounded by stream_bound.go), an error's shape (errors.go), a Stop
// (stop.go), and the JSON plumbing they share (json.go, and
// internal/jsonmember). Each API is a spoke that reads its words into the
// hub and writes them out of it, in one layout: <api>.go its codec (the
// functions below, its media members), <api>_request.go, <api>_answer.go
// and <api>_stream.go. A spoke refers to the hub and to its own API's
// files, never to another API's: a rule of one API lives in the one
// spoke that needs it, whatever the other side speaks. The translations
// look the codecs up (Register, codecOf); nothing switches on an API.
//
// The clients' APIs (chat, messages, responses) are spokes here. An API
// that only a provider's engines speak is a spoke in that provider's
// package, written against the hub's exported names alone, and registered
// from its init: providers/bedrock's Converse, providers/gemini's
// generateContent (which providers/vertex speaks too). A binary that
// translates to them imports the provider's package, as the caddy module
// does with every provider it builds in. Their tests check them with
// translatetest, as this package's tests do.
//
// The APIs are package api's. The facts it follows, with their sources,
// are in docs/translation-facts.md; the table of what carries and what
// does not is docs/translation.md.
package translate

import (
	"encoding/json"
	"fmt"

	"github.com/llmgateway/caddy-llm-gateway/api"
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
// which requires it, when the client set no limit (and the caller gave
// none in RequestOptions.MaxTokens, which the gateway leaves unset): a
// length the answers of coding agents fit in, which a model that can write
// less stops short of anyway (LiteLLM's 256 cut answers short; a model's
// own maximum is not known to the gateway: docs/translation-facts.md#t14).
const DefaultMaxTokens = 8192

// A Codec is what translation knows of one API's words: the hub (the
// neutral Request, Answer and Stream steps) in the middle, and for each
// API the functions that read its words into the hub and write them out
// of it. The codecs of the three APIs clients speak (chat, messages,
// responses) are in this package, registered by its <api>.go and written
// in <api>_request.go, <api>_answer.go and <api>_stream.go. A provider's
// package brings the codec of an API only its engines speak (Converse in
// providers/bedrock, Gemini in providers/gemini): it has no ReadRequest,
// no WriteAnswer and no client. Nothing here switches on an API: it looks
// up the codec.
type Codec struct {
	// ReadRequest reads a client's request, by its top-level members,
	// into r. Nil for an API no client speaks to the gateway.
	ReadRequest func(r *Request, top map[string]json.RawMessage) error
	// WriteRequest writes r in the API: the body an engine is sent. It
	// records what it cannot carry with r.Drop, or fails with an *Error.
	WriteRequest func(r *Request, o RequestOptions) ([]byte, error)
	// ReadAnswer reads an engine's whole JSON answer into the neutral
	// Answer; a body that is not one is an error (the gateway's 502).
	ReadAnswer func(body []byte, o AnswerOptions) (Answer, error)
	// WriteAnswer writes a for a client. Nil for an API no client speaks.
	WriteAnswer func(a *Answer, o AnswerOptions) ([]byte, error)
	// ReadError, when the API's errors need it, reads an engine's error
	// answer before the hub reshapes it (errors.go): the status its body
	// says more precisely than the HTTP one, the body unwrapped.
	ReadError func(status int, body []byte) (int, []byte)
	// Decode reads one event of an engine's stream (ev whole, its data
	// payload a JSON object) into the stream's steps (Stream.Begin,
	// Open, Delta, CloseKey, Finish, Fail, ReadUsage), appending what the
	// client is to be sent to dst.
	Decode func(s *Stream, dst, ev, data []byte) []byte

	// Paths are the paths of the members the API says elsewhere than at
	// Chat's name (Responses' text.verbosity, Messages' stop_sequences),
	// by that name: what ClientMember answers for a client of the API.
	Paths map[string]string
	// Media reads a request's media references (the object at top of
	// c's body) with c, for the rule that only public or inline media
	// leave for a provider (media.go).
	Media func(c *MediaCheck, top int)

	client *client // how a client of the API is written to (nil: none speaks it)
}

// codecs are the APIs' codecs, registered at init.
var codecs = map[api.API]*Codec{}

// Register gives API a its codec. It is called at init, by this package
// for the clients' APIs and by a provider's package for the API it
// brings; a second codec for one API is a programming error.
func Register(a api.API, c *Codec) {
	if codecs[a] != nil {
		panic(fmt.Sprintf("translate: a second codec for %s", a))
	}
	codecs[a] = c
}

// codecOf is a's codec, nil when none is registered.
func codecOf(a api.API) *Codec { return codecs[a] }
