package translate

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Converse streams (AWS Bedrock's ConverseStream) reach translation as SSE
// events whose name is the Converse event type and whose data is its JSON
// payload: the provider (handler/provider) unframes AWS's binary event
// stream into them. The payload does not repeat its type, so the decoder
// reads the event name. Events (docs/translation-facts.md#cloud-providers):
//
//	messageStart        {role}
//	contentBlockStart   {contentBlockIndex, start:{toolUse:{toolUseId,name}}}
//	contentBlockDelta   {contentBlockIndex, delta:{text}|{toolUse:{input}}|{reasoningContent:{text|signature|redactedContent}}}
//	contentBlockStop    {contentBlockIndex}
//	messageStop         {stopReason, additionalModelResponseFields}
//	metadata            {usage, metrics, trace}
//	…Exception          {message}: internalServerException, throttlingException…
//
// metadata, which alone has the usage, comes after messageStop: the
// client's last events (finish_reason and the usage chunk, message_delta,
// response.completed) wait for it, and End finishes a stream that said
// messageStop but whose metadata never came.

// decodeConverse reads one Converse event, ev whole (for its name) and
// data its payload.
func (s *Stream) decodeConverse(dst, ev, data []byte) []byte {
	name := scEventName(ev)
	if bytes.HasSuffix(name, []byte("Exception")) {
		return s.scException(dst, name, data)
	}
	if !s.begun {
		dst = s.begin(dst, nil, s.scModel(), 0)
	}
	switch string(name) {
	case "contentBlockDelta":
		return s.scDelta(dst, data)
	case "contentBlockStart":
		return s.scBlockStart(dst, data)
	case "contentBlockStop":
		if v, end, ok := scMember(data, 0, "contentBlockIndex"); ok {
			return s.closeKey(dst, stIndex(data, v, end))
		}
	case "messageStop":
		s.stop = StopEnd // a messageStop without a reason still ends the answer
		if r, ok := stFindStr(data, 0, "stopReason"); ok {
			s.stop = converseStop(string(r))
		}
	case "metadata":
		if v, _, ok := scMember(data, 0, "usage"); ok {
			s.usage, _ = api.Converse.ReadUsage(data, v)
		}
		if s.stop != StopNone {
			return s.finish(dst)
		}
	}
	return dst // messageStart: begun above; unknown events are to be ignored
}

// scBlockStart reads contentBlockStart: a tool call opens with its id and
// name; text and reasoning blocks open with their first piece.
func (s *Stream) scBlockStart(dst, data []byte) []byte {
	index, start := -1, -1
	for it := stObject(data, 0); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "contentBlockIndex":
			index = stIndex(data, v, end)
		case "start":
			start = v
		}
	}
	tool, _, ok := scMember(data, start, "toolUse")
	if !ok {
		return dst
	}
	id, _ := stFindStr(data, tool, "toolUseId")
	name, _ := stFindStr(data, tool, "name")
	return s.open(dst, stTool, index, id, name)
}

// scDelta reads contentBlockDelta. Redacted reasoning has no counterpart
// in a streamed answer of the other APIs (the Messages decoder drops
// redacted_thinking blocks too).
func (s *Stream) scDelta(dst, data []byte) []byte {
	index, delta := -1, -1
	for it := stObject(data, 0); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "contentBlockIndex":
			index = stIndex(data, v, end)
		case "delta":
			delta = v
		}
	}
	for it := stObject(data, delta); ; {
		key, v, end, ok := it.next()
		if !ok {
			return dst
		}
		switch string(key) {
		case "text":
			text, _ := stStr(data, v, end)
			return s.delta(dst, stTextPiece, index, text)
		case "toolUse":
			input, _ := stFindStr(data, v, "input")
			return s.delta(dst, stArgs, index, input)
		case "reasoningContent":
			for it := stObject(data, v); ; {
				key, v, end, ok := it.next()
				if !ok {
					return dst
				}
				text, _ := stStr(data, v, end)
				switch string(key) {
				case "text":
					return s.delta(dst, stThought, index, text)
				case "signature":
					return s.delta(dst, stSignature, index, text)
				}
			}
		}
	}
}

// scException reads an in-stream exception: the client's error event,
// with the type and code its API uses for the same trouble.
func (s *Stream) scException(dst, name, data []byte) []byte {
	msg := stFindRaw(data, 0, "message")
	if len(msg) == 0 {
		msg = stFindRaw(data, 0, "Message")
	}
	switch string(name) {
	case "throttlingException":
		return s.fail(dst, []byte(`"rate_limit_error"`), []byte(`"rate_limit_exceeded"`), msg)
	case "serviceUnavailableException":
		return s.fail(dst, []byte(`"server_error"`), []byte(`"server_is_overloaded"`), msg)
	case "validationException":
		return s.fail(dst, []byte(`"invalid_request_error"`), nil, msg)
	}
	return s.fail(dst, []byte(`"server_error"`), nil, msg)
}

// scModel is the model the request sent, JSON-escaped: a Converse stream
// never names it.
func (s *Stream) scModel() []byte {
	s.scratch = stEscape(s.scratch[:0], s.opt.Model)
	return s.scratch
}

// scEventName is the value of ev's event: line, nil for none.
func scEventName(ev []byte) []byte {
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		if v, ok := bytes.CutPrefix(line, []byte("event:")); ok {
			return bytes.TrimSpace(v)
		}
	}
	return nil
}

// scMember is the span of the member name of the object at b[v].
func scMember(b []byte, v int, name string) (int, int, bool) {
	for it := stObject(b, v); ; {
		key, v, end, ok := it.next()
		if !ok {
			return 0, 0, false
		}
		if string(key) == name {
			return v, end, true
		}
	}
}
