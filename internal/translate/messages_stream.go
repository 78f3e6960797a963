package translate

import (
	"bytes"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Messages streams: named events, each with its type in the data too:
// message_start, then per block content_block_start, _delta…, _stop (by
// index), then message_delta (stop_reason, cumulative usage) and
// message_stop; ping and error anywhere; unknown types are to be ignored
// (docs/translation-facts.md#streams).

// decodeMessages reads one Messages event by the type in its data (the
// event: line says the same). A block is keyed by its index; Anthropic
// opens one block at a time, but nothing here relies on it. The answer is
// finished by message_stop, not message_delta, so that a client's last
// events carry the usage message_delta brought. ping keeps the client's
// connection alive; an event type yet to come is ignored, as Anthropic
// asks (docs/translation-facts.md#streams).
func (s *Stream) decodeMessages(dst, data []byte) []byte {
	var typ []byte
	index, block, delta, message, usage, errv := -1, -1, -1, -1, -1, -1
	for it := jsonmember.Object(data, 0); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ, _ = jsonmember.Str(data, v, end)
		case "index":
			index = jsonmember.Index(data, v, end)
		case "content_block":
			block = v
		case "delta":
			delta = v
		case "message":
			message = v
		case "usage":
			usage = v
		case "error":
			errv = v
		}
	}
	switch string(typ) {
	case "content_block_delta":
		return s.messagesPiece(dst, data, index, delta)
	case "content_block_start":
		return s.messagesBlock(dst, data, index, block)
	case "content_block_stop":
		return s.CloseKey(dst, index)
	case "message_start":
		return s.messagesStart(dst, data, message)
	case "message_delta":
		if r, ok := jsonmember.FindStr(data, delta, "stop_reason"); ok {
			s.stop = MessagesStop(string(r))
		}
		if q, ok := jsonmember.FindStr(data, delta, "stop_sequence"); ok {
			s.matchedStop(q) // llama-server names it beside end_turn
		}
		if usage >= 0 {
			s.ReadUsage(api.Messages, data, usage)
		}
	case "message_stop":
		return s.Finish(dst)
	case "ping":
		return append(dst, ": ping\n\n"...) // keeps the client's proxies from timing out
	case "error":
		// Anthropic's overloaded_error arrives this way after a 200
		// (docs/translation-facts.md#streams).
		typ, msg := jsonmember.FindRaw(data, errv, "type"), jsonmember.FindRaw(data, errv, "message")
		return s.Fail(dst, typ, nil, msg)
	}
	return dst
}

// messagesStart reads message_start: the answer's id and model, and the
// prompt's usage, which Messages says here (its output in message_delta).
func (s *Stream) messagesStart(dst, data []byte, message int) []byte {
	var id, model []byte
	for it := jsonmember.Object(data, message); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "id":
			id, _ = jsonmember.Str(data, v, end)
		case "model":
			model, _ = jsonmember.Str(data, v, end)
		case "usage":
			s.ReadUsage(api.Messages, data, v)
		}
	}
	return s.Begin(dst, id, model, 0)
}

// messagesBlock reads content_block_start. Text and thinking open with
// their first piece (never a block for nothing); tool_use opens with its
// id and name; server tools and redacted thinking have no counterpart and
// stay closed, so their pieces are dropped.
func (s *Stream) messagesBlock(dst, data []byte, index, block int) []byte {
	var typ, id, name, text, thinking []byte
	for it := jsonmember.Object(data, block); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ, _ = jsonmember.Str(data, v, end)
		case "id":
			id, _ = jsonmember.Str(data, v, end)
		case "name":
			name, _ = jsonmember.Str(data, v, end)
		case "text":
			text, _ = jsonmember.Str(data, v, end)
		case "thinking":
			thinking, _ = jsonmember.Str(data, v, end)
		}
	}
	switch string(typ) {
	case "tool_use":
		return s.Open(dst, BlockTool, index, id, name)
	case "text":
		return s.Delta(dst, PieceText, index, text)
	case "thinking":
		return s.Delta(dst, PieceThinking, index, thinking)
	}
	return dst
}

// messagesPiece reads content_block_delta: a piece of text, of a tool's
// arguments (partial_json, a fragment of the input object's JSON), of
// thinking, or the thinking's signature, which comes whole before the
// block stops.
func (s *Stream) messagesPiece(dst, data []byte, index, delta int) []byte {
	var typ, text []byte
	for it := jsonmember.Object(data, delta); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ, _ = jsonmember.Str(data, v, end)
		case "text", "partial_json", "thinking", "signature":
			text, _ = jsonmember.Str(data, v, end)
		}
	}
	switch string(typ) {
	case "text_delta":
		return s.Delta(dst, PieceText, index, text)
	case "input_json_delta":
		return s.Delta(dst, PieceArgs, index, text)
	case "thinking_delta":
		return s.Delta(dst, PieceThinking, index, text)
	case "signature_delta":
		return s.Delta(dst, PieceSignature, index, text)
	}
	return dst // citations_delta and what comes next
}

// A Messages client hears message_start with the first block, not with
// the upstream's first event: the input count a Chat or Responses engine
// gives only at the end is not known either way, and an engine that fails
// before its first token then answers with an error event alone. Then
// each block: content_block_start with its index (blocks counted from 0,
// whatever their kind), its deltas, content_block_stop; and message_delta
// (stop reason, usage) and message_stop (docs/translation-facts.md#streams).

// messagesAnnounce writes message_start, once: empty content, no stop yet,
// and the usage known so far with no output. From a Chat or Responses
// engine that is 0 tokens, and message_delta says them all
// (docs/translation-facts.md#t10).
func (s *Stream) messagesAnnounce(dst []byte) []byte {
	if s.announced {
		return dst
	}
	s.announced = true
	dst = append(dst, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_"...)
	dst = append(dst, s.id...)
	dst = append(dst, `","type":"message","role":"assistant","model":"`...)
	dst = append(dst, s.model...)
	dst = append(dst, `","content":[],"stop_reason":null,"stop_sequence":null,"usage":`...)
	u := s.usage
	u.Output = 0
	dst = api.Messages.AppendUsage(dst, u)
	return append(dst, "}}\n\n"...)
}

// messagesEvent starts an event of typ about block index: its event: line,
// and the data's type and index, up to the member that follows.
func (s *Stream) messagesEvent(dst []byte, typ string, index int) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	dst = append(dst, `","index":`...)
	return strconv.AppendInt(dst, int64(index), 10)
}

// messagesOpen writes content_block_start with the block's content as
// Anthropic starts it: a tool_use with input {} (its arguments follow as
// input_json_delta), a thinking with empty thinking and signature, a text
// with empty text.
func (s *Stream) messagesOpen(dst []byte, b *streamBlock) []byte {
	dst = s.messagesAnnounce(dst)
	dst = s.messagesEvent(dst, "content_block_start", b.idx)
	switch b.kind {
	case BlockTool:
		dst = append(dst, `,"content_block":{"type":"tool_use","id":"`...)
		dst = append(dst, b.id...)
		dst = append(dst, `","name":"`...)
		dst = append(dst, b.name...)
		dst = append(dst, `","input":{}`...)
	case BlockThinking:
		dst = append(dst, `,"content_block":{"type":"thinking","thinking":"","signature":""`...)
	default:
		dst = append(dst, `,"content_block":{"type":"text","text":""`...)
	}
	return append(dst, "}}\n\n"...)
}

// messagesDelta writes one content_block_delta, of the delta type for its
// piece.
func (s *Stream) messagesDelta(dst []byte, b *streamBlock, p Piece, text []byte) []byte {
	dst = s.messagesEvent(dst, "content_block_delta", b.idx)
	switch p {
	case PieceArgs:
		dst = append(dst, `,"delta":{"type":"input_json_delta","partial_json":"`...)
	case PieceThinking:
		dst = append(dst, `,"delta":{"type":"thinking_delta","thinking":"`...)
	case PieceSignature:
		dst = append(dst, `,"delta":{"type":"signature_delta","signature":"`...)
	default:
		dst = append(dst, `,"delta":{"type":"text_delta","text":"`...)
	}
	dst = append(dst, text...)
	return append(dst, "\"}}\n\n"...)
}

func (s *Stream) messagesClose(dst []byte, b *streamBlock) []byte {
	dst = s.messagesEvent(dst, "content_block_stop", b.idx)
	return append(dst, "}\n\n"...)
}

// messagesFinish writes message_delta, with the stop reason, the stop
// sequence when the engine named the one it matched
// (docs/translation-facts.md#t12) and the whole usage (message_delta's
// counts are cumulative), then message_stop, which ends a Messages stream.
// message_start comes first if no block did.
func (s *Stream) messagesFinish(dst []byte) []byte {
	dst = s.messagesAnnounce(dst)
	dst = append(dst, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\""...)
	dst = append(dst, s.stop.Messages()...)
	if s.stop == StopSequence && len(s.stopSeq) > 0 {
		dst = append(dst, `","stop_sequence":"`...)
		dst = append(dst, s.stopSeq...)
		dst = append(dst, `"},"usage":`...)
	} else {
		dst = append(dst, `","stop_sequence":null},"usage":`...)
	}
	dst = api.Messages.AppendUsage(dst, s.usage)
	dst = append(dst, "}\n\n"...)
	return append(dst, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"...)
}

// messagesFail writes event: error with Anthropic's error body
// (api.AnthropicErrors), its type the Messages type closest to what the
// engine said (messagesErrorType): a client tells an overload or a rate
// limit from a failure by it.
func (s *Stream) messagesFail(dst, typ, code, msg []byte) []byte {
	dst = append(dst, "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\""...)
	dst = append(dst, messagesErrorType(typ, code)...)
	dst = append(dst, `","message":`...)
	dst = append(dst, msg...)
	return append(dst, "}}\n\n"...)
}

// messagesErrorType is the Messages error type closest to an OpenAI
// error's type and code (JSON strings, or nil).
func messagesErrorType(typ, code []byte) string {
	for _, v := range [...][]byte{typ, code} {
		switch {
		case len(v) == 0:
		case bytes.Contains(v, []byte("overload")):
			return "overloaded_error"
		case bytes.Contains(v, []byte("rate_limit")):
			return "rate_limit_error"
		case bytes.Contains(v, []byte("invalid_request")):
			return "invalid_request_error"
		case bytes.Contains(v, []byte("authentication")):
			return "authentication_error"
		case bytes.Contains(v, []byte("permission")):
			return "permission_error"
		case bytes.Contains(v, []byte("not_found")):
			return "not_found_error"
		}
	}
	return "api_error"
}
