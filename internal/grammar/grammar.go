// Package grammar knows the two stream grammars, OpenAI's chunks and
// Anthropic's typed events, the usage an answer reports and the models a
// model list says are loaded: byte-level reading that knows nothing of
// requests.
package grammar

import (
	"encoding/json"
)

// The two stream grammars, OpenAI's chunks and Anthropic's typed events:
// what an event is (comment, preamble, content, end, error, malformed) and
// how an answer says it is whole.

// Kind is what an event means to the gateway.
type Kind int

const (
	Comment    Kind = iota // only comments or no data: keep-alives
	Preamble               // data that is not content yet: an announcement (a role-only chunk, message_start, response.created, …)
	Content                // data the client's answer consists of
	Done                   // data: [DONE]
	ErrorEvent             // data: {"error": …} from the upstream
	Malformed              // a data payload that is not JSON
)

// IsSet reports whether a raw JSON member is present and not null.
func IsSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
