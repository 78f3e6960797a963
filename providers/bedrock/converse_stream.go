package bedrock

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Converse streams (AWS Bedrock's ConverseStream) reach translation as SSE
// events whose name is the Converse event type and whose data is its JSON
// payload: the provider (events.go) unframes AWS's
// binary event stream into them. The payload does not repeat its type, so the decoder
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

// converseDecode reads one Converse event, ev whole (for its name) and
// data its payload. The stream names no id and no model: the answer is
// begun with the model the request was sent (RequestModel) and an id of
// its own.
func converseDecode(s *translate.Stream, dst, ev, data []byte) []byte {
	name := translate.EventName(ev)
	if bytes.HasSuffix(name, []byte("Exception")) {
		return converseException(s, dst, name, data)
	}
	if !s.Begun() {
		dst = s.Begin(dst, nil, s.RequestModel(), 0)
	}
	switch string(name) {
	case "contentBlockDelta":
		return converseDelta(s, dst, data)
	case "contentBlockStart":
		return converseBlockStart(s, dst, data)
	case "contentBlockStop":
		if v, end, ok := jsonmember.Find(data, 0, "contentBlockIndex"); ok {
			return s.CloseKey(dst, jsonmember.Index(data, v, end))
		}
	case "messageStop":
		s.SetStop(translate.StopEnd) // a messageStop without a reason still ends the answer
		if r, ok := jsonmember.FindStr(data, 0, "stopReason"); ok {
			s.SetStop(converseStop(string(r)))
		}
	case "metadata":
		if v, _, ok := jsonmember.Find(data, 0, "usage"); ok {
			s.ReadUsage(api.Converse, data, v)
		}
		if s.Stopped() != translate.StopNone {
			return s.Finish(dst)
		}
	}
	return dst // messageStart: begun above; unknown events are to be ignored
}

// converseBlockStart reads contentBlockStart: a tool call opens with its id and
// name; text and reasoning blocks open with their first piece.
func converseBlockStart(s *translate.Stream, dst, data []byte) []byte {
	index, start := blockMember(data, "start")
	tool, _, ok := jsonmember.Find(data, start, "toolUse")
	if !ok {
		return dst
	}
	id, _ := jsonmember.FindStr(data, tool, "toolUseId")
	name, _ := jsonmember.FindStr(data, tool, "name")
	return s.Open(dst, translate.BlockTool, index, id, name)
}

// converseDelta reads contentBlockDelta. Redacted reasoning has no counterpart
// in a streamed answer of the other APIs (the Messages decoder drops
// redacted_thinking blocks too).
func converseDelta(s *translate.Stream, dst, data []byte) []byte {
	index, delta := blockMember(data, "delta")
	for it := jsonmember.Object(data, delta); ; {
		key, v, end, ok := it.Next()
		if !ok {
			return dst
		}
		switch string(key) {
		case "text":
			text, _ := jsonmember.Str(data, v, end)
			return s.Delta(dst, translate.PieceText, index, text)
		case "toolUse":
			input, _ := jsonmember.FindStr(data, v, "input")
			return s.Delta(dst, translate.PieceArgs, index, input)
		case "reasoningContent":
			for it := jsonmember.Object(data, v); ; {
				key, v, end, ok := it.Next()
				if !ok {
					return dst
				}
				text, _ := jsonmember.Str(data, v, end)
				switch string(key) {
				case "text":
					return s.Delta(dst, translate.PieceThinking, index, text)
				case "signature":
					return s.Delta(dst, translate.PieceSignature, index, text)
				}
			}
		}
	}
}

// converseException reads an in-stream exception: the client's error event,
// with the type and code its API uses for the same trouble.
func converseException(s *translate.Stream, dst, name, data []byte) []byte {
	msg := jsonmember.FindRaw(data, 0, "message")
	if len(msg) == 0 {
		msg = jsonmember.FindRaw(data, 0, "Message")
	}
	switch string(name) {
	case "throttlingException":
		return s.Fail(dst, []byte(`"rate_limit_error"`), []byte(`"rate_limit_exceeded"`), msg)
	case "serviceUnavailableException":
		return s.Fail(dst, []byte(`"server_error"`), []byte(`"server_is_overloaded"`), msg)
	case "validationException":
		return s.Fail(dst, []byte(`"invalid_request_error"`), nil, msg)
	}
	return s.Fail(dst, []byte(`"server_error"`), nil, msg)
}

// blockMember reads a content block's event: its contentBlockIndex, and
// where the value of its member name starts (-1 for either when absent).
func blockMember(data []byte, name string) (index, at int) {
	index, at = -1, -1
	for it := jsonmember.Object(data, 0); ; {
		key, v, end, ok := it.Next()
		if !ok {
			return index, at
		}
		switch string(key) {
		case "contentBlockIndex":
			index = jsonmember.Index(data, v, end)
		case name:
			at = v
		}
	}
}
