package translate

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// One upstream event, handed to its API's decoder. The dispatch sits apart
// from the Stream's steps (stream.go), which every decoder calls: the
// decoders depend on the steps, never the steps on the decoders.

// Event appends to dst the client's events (complete SSE events, each ending in a blank line) for one upstream event ev (one complete SSE event as internal/sse.Reader returns it: lines plus the blank line; comments and keep-alives included), and returns dst.
func (s *Stream) Event(dst, ev []byte) []byte {
	if s.from == s.to {
		return append(dst, ev...)
	}
	if s.dead {
		return dst
	}
	s.evStart = len(dst)
	dst = stComments(dst, ev)
	data, ok := sse.Data(ev)
	if !ok {
		return dst
	}
	data = bytes.TrimSpace(data)
	if s.from == api.Chat && string(data) == "[DONE]" {
		return s.chatDone(dst)
	}
	if !stValidObject(data) {
		return dst // not JSON: the gateway counts it, the client never sees it
	}
	switch s.from {
	case api.Chat:
		return s.decodeChat(dst, data)
	case api.Messages:
		return s.decodeMessages(dst, data)
	case api.Responses:
		return s.decodeResponses(dst, data)
	case api.Gemini:
		return s.decodeGemini(dst, data)
	case api.Converse:
		return s.decodeConverse(dst, ev, data)
	}
	return dst
}
