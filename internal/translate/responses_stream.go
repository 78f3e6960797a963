package translate

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Responses streams: named events, each with its type and a rising
// sequence_number in the data, no [DONE]: response.created, then per
// output item output_item.added, its deltas (output_text,
// function_call_arguments, reasoning summary or text) and output_item.done,
// then response.completed, .incomplete or .failed; error anywhere
// (docs/translation-facts.md#streams). A block is an output item, keyed by output_index.

// decodeResponses reads one Responses event by the type in its data. Only a
// function_call opens at output_item.added, which is where its call_id
// and name come; text and reasoning open with their first delta, so an
// item that says nothing opens no block. A refusal streams as text: a
// stream has no refusal piece. created_at, which openai-go reads as a
// float, is taken to the second (Count).
func (s *Stream) decodeResponses(dst, data []byte) []byte {
	var typ, delta, code, msg []byte
	index, item, response, errv, summary := -1, -1, -1, -1, 0
	for it := jsonmember.Object(data, 0); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ, _ = jsonmember.Str(data, v, end)
		case "output_index":
			index = jsonmember.Index(data, v, end)
		case "item":
			item = v
		case "delta":
			delta, _ = jsonmember.Str(data, v, end)
		case "response":
			response = v
		case "summary_index":
			summary = jsonmember.Count(data, v, end)
		case "code":
			code = data[v:end]
		case "message":
			msg = data[v:end]
		case "error":
			errv = v
		}
	}
	switch string(typ) {
	case "response.output_text.delta", "response.refusal.delta":
		return s.Delta(dst, PieceText, index, delta)
	case "response.function_call_arguments.delta":
		return s.Delta(dst, PieceArgs, index, delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return s.Delta(dst, PieceThinking, index, delta)
	case "response.reasoning_summary_part.added":
		if summary > 0 && s.find(index) != nil {
			return s.Delta(dst, PieceThinking, index, []byte(`\n\n`)) // summaries are paragraphs
		}
	case "response.output_item.added":
		if t, _ := jsonmember.FindStr(data, item, "type"); string(t) == "function_call" {
			id, _ := jsonmember.FindStr(data, item, "call_id") // the id its output pairs with, not the item's
			name, _ := jsonmember.FindStr(data, item, "name")
			return s.Open(dst, BlockTool, index, id, name)
		}
	case "response.output_item.done":
		// A reasoning item's encrypted_content, when the engine was asked
		// for it, comes only here: it is the signature a Messages client
		// keeps (docs/translation-facts.md#streams).
		if sig, ok := jsonmember.FindStr(data, item, "encrypted_content"); ok {
			dst = s.Delta(dst, PieceSignature, index, sig)
		}
		return s.CloseKey(dst, index)
	case "response.created":
		id, _ := jsonmember.FindStr(data, response, "id")
		model, _ := jsonmember.FindStr(data, response, "model")
		created := jsonmember.FindRaw(data, response, "created_at")
		return s.Begin(dst, id, model, int64(jsonmember.Count(created, 0, len(created))))
	case "response.completed", "response.incomplete", "response.failed":
		return s.responsesEnd(dst, data, response)
	case "error":
		// Responses puts code and message at the event's top level; a
		// server that nests them in an error object is read there.
		if errv >= 0 && msg == nil {
			code, msg = jsonmember.FindRaw(data, errv, "code"), jsonmember.FindRaw(data, errv, "message")
		}
		return s.Fail(dst, nil, code, msg)
	}
	return dst
}

// responsesEnd reads the terminal event's response: its status and usage. A
// failed response is the client's in-band error, not an end; an
// incomplete one ends with its reason; a status the reader does not know
// is a plain end, since the engine said the response is over.
func (s *Stream) responsesEnd(dst, data []byte, response int) []byte {
	var status, reason []byte
	errv := -1
	for it := jsonmember.Object(data, response); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "status":
			status, _ = jsonmember.Str(data, v, end)
		case "incomplete_details":
			reason, _ = jsonmember.FindStr(data, v, "reason")
		case "error":
			errv = v
		case "usage":
			s.ReadUsage(api.Responses, data, v)
		}
	}
	if string(status) == "failed" {
		return s.Fail(dst, nil, jsonmember.FindRaw(data, errv, "code"), jsonmember.FindRaw(data, errv, "message"))
	}
	s.stop = ResponsesStop(string(status), string(reason), s.nTools > 0)
	if s.stop == StopNone {
		s.stop = StopEnd
	}
	return s.Finish(dst)
}

// A Responses client's stream: response.created and .in_progress first,
// with the first block, not with the upstream's first event (as a Messages
// client's message_start): an engine that fails before its first token
// answers with an error event alone, and the gateway's probe holds the
// announcement until content follows (internal/grammar);
// each block an output item (message, function_call, custom_tool_call or
// reasoning) from output_item.added to output_item.done; then
// response.completed or .incomplete with every item and the usage. Every
// event has its type and a sequence_number rising from 0.
//
// Reasoning goes out as a reasoning item's summary
// (reasoning_summary_text), which Codex shows by default, where
// reasoning_text is shown only on request; a Messages signature rides along
// as the item's encrypted_content, the field a client returns unchanged.

// respEvent starts an event: its event: line and the type in its data,
// which both name it.
func (s *Stream) respEvent(dst []byte, typ string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, typ...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, typ...)
	return append(dst, '"')
}

// respEnd ends an event with its sequence_number, one more than the last.
func (s *Stream) respEnd(dst []byte) []byte {
	dst = append(dst, `,"sequence_number":`...)
	dst = strconv.AppendInt(dst, int64(s.seq), 10)
	s.seq++
	return append(dst, "}\n\n"...)
}

// respResponse appends the response object; final adds its output items
// and usage. The request's settings are not known here: parallel_tool_calls,
// tool_choice and tools are written as their defaults, as a whole answer's
// are (responsesAnswerOut).
func (s *Stream) respResponse(dst []byte, final bool) []byte {
	status, reason := "in_progress", ""
	if final {
		status, reason = s.stop.Responses()
	}
	dst = append(dst, `,"response":{"id":"resp_`...)
	dst = append(dst, s.id...)
	dst = append(dst, `","object":"response","created_at":`...)
	dst = strconv.AppendInt(dst, s.created, 10)
	dst = append(dst, `,"status":"`...)
	dst = append(dst, status...)
	dst = append(dst, `","error":null,"incomplete_details":`...)
	if reason != "" {
		dst = append(append(append(dst, `{"reason":"`...), reason...), `"}`...)
	} else {
		dst = append(dst, "null"...)
	}
	dst = append(dst, `,"model":"`...)
	dst = append(dst, s.model...)
	dst = append(dst, `","output":[`...)
	if final {
		for i := range s.blocks {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = s.respItem(dst, &s.blocks[i], true)
		}
	}
	dst = append(dst, `],"parallel_tool_calls":true,"tool_choice":"auto","tools":[],"usage":`...)
	if final {
		dst = api.Responses.AppendUsage(dst, s.usage)
	} else {
		dst = append(dst, "null"...)
	}
	return append(dst, '}')
}

// respAnnounce writes response.created and response.in_progress, both with
// status in_progress and no output, as OpenAI's streams begin.
func (s *Stream) respAnnounce(dst []byte) []byte {
	s.announced = true
	dst = s.respResponse(s.respEvent(dst, "response.created"), false)
	dst = s.respEnd(dst)
	dst = s.respResponse(s.respEvent(dst, "response.in_progress"), false)
	return s.respEnd(dst)
}

// respItemID appends the block's item id: its kind's prefix, the stream's
// token and its output_index.
func (s *Stream) respItemID(dst []byte, b *streamBlock) []byte {
	switch {
	case b.custom:
		dst = append(dst, "ctc_"...)
	case b.kind == BlockTool:
		dst = append(dst, "fc_"...)
	case b.kind == BlockThinking:
		dst = append(dst, "rs_"...)
	default:
		dst = append(dst, "msg_"...)
	}
	dst = append(dst, s.token...)
	return strconv.AppendInt(append(dst, '_'), int64(b.idx), 10)
}

// respItem appends the block as an output item, whole when done.
func (s *Stream) respItem(dst []byte, b *streamBlock, done bool) []byte {
	status := `","status":"in_progress"`
	if done {
		status = `","status":"completed"`
	}
	dst = s.respItemID(append(dst, `{"id":"`...), b)
	switch {
	case b.custom:
		dst = append(dst, `","type":"custom_tool_call`...)
		dst = append(dst, status...)
		dst = s.respCall(dst, b)
		dst = append(dst, `,"input":`...)
		if done {
			return append(append(dst, b.input...), '}')
		}
		return append(dst, `""}`...)
	case b.kind == BlockTool:
		dst = append(dst, `","type":"function_call`...)
		dst = append(dst, status...)
		dst = s.respCall(dst, b)
		dst = append(dst, `,"arguments":"`...)
		if done {
			dst = responsesArguments(dst, b.text)
		}
		return append(dst, `"}`...)
	case b.kind == BlockThinking:
		dst = append(dst, `","type":"reasoning","summary":[`...)
		if done && len(b.text) > 0 {
			dst = append(dst, `{"type":"summary_text","text":"`...)
			dst = append(append(dst, b.text...), `"}`...)
		}
		dst = append(dst, ']')
		if done && len(b.sig) > 0 {
			dst = append(dst, `,"encrypted_content":"`...)
			dst = append(append(dst, b.sig...), '"')
		}
		return append(dst, '}')
	}
	dst = append(dst, `","type":"message`...)
	dst = append(dst, status...)
	dst = append(dst, `,"role":"assistant","content":[`...)
	if done {
		dst = s.respTextPart(dst, b, true)
	}
	return append(dst, "]}"...)
}

// respCall appends a call's call_id and name, and the namespace a
// namespace's tool was flattened from: Codex runs a call only as
// {namespace, name} (Request.Namespaces).
func (s *Stream) respCall(dst []byte, b *streamBlock) []byte {
	dst = append(dst, `,"call_id":"`...)
	dst = append(dst, b.id...)
	dst = append(dst, `","name":"`...)
	dst = append(dst, b.name...)
	if len(b.ns) > 0 {
		dst = append(dst, `","namespace":"`...)
		dst = append(dst, b.ns...)
	}
	return append(dst, '"')
}

// responsesArguments appends a call's arguments, "{}" for none: a call without
// parameters streams no arguments, and clients parse them as JSON.
func responsesArguments(dst, args []byte) []byte {
	if len(args) == 0 {
		return append(dst, "{}"...)
	}
	return append(dst, args...)
}

// respTextPart appends a message's output_text part, with its text when
// done.
func (s *Stream) respTextPart(dst []byte, b *streamBlock, done bool) []byte {
	dst = append(dst, `{"type":"output_text","text":"`...)
	if done {
		dst = append(dst, b.text...)
	}
	return append(dst, `","annotations":[]}`...)
}

// respAt appends the members that place an event: item_id and
// output_index.
func (s *Stream) respAt(dst []byte, b *streamBlock) []byte {
	dst = s.respItemID(append(dst, `,"item_id":"`...), b)
	dst = append(dst, `","output_index":`...)
	return strconv.AppendInt(dst, int64(b.idx), 10)
}

// respOpen writes output_item.added, and for a message its
// content_part.added, the events a Responses client builds its item from
// (docs/translation-facts.md#streams). A reasoning item's summary part is
// added with its first piece (respDelta); response.created goes first if
// it has not gone yet.
func (s *Stream) respOpen(dst []byte, b *streamBlock) []byte {
	if !s.announced {
		dst = s.respAnnounce(dst)
	}
	dst = s.respEvent(dst, "response.output_item.added")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(b.idx), 10)
	dst = s.respItem(append(dst, `,"item":`...), b, false)
	dst = s.respEnd(dst)
	if b.kind == BlockText {
		b.part = true
		dst = s.respAt(s.respEvent(dst, "response.content_part.added"), b)
		dst = s.respTextPart(append(dst, `,"content_index":0,"part":`...), b, false)
		dst = s.respEnd(dst)
	}
	return dst
}

// respDelta writes one piece's delta event and keeps the piece (stKeep): the
// closing events repeat a block whole, within the stream's bound
// (stream_bound.go). A signature has no delta event of its own: it goes out
// in output_item.done's encrypted_content.
func (s *Stream) respDelta(dst []byte, b *streamBlock, p Piece, text []byte) []byte {
	if !s.keep(b, len(text)) {
		return dst
	}
	switch p {
	case PieceSignature:
		b.sig = stKeep(b.sig, text)
		return dst
	case PieceArgs:
		b.text = stKeep(b.text, text)
		if b.custom {
			return dst // its input is known when its arguments are whole
		}
		dst = s.respAt(s.respEvent(dst, "response.function_call_arguments.delta"), b)
	case PieceThinking:
		if !b.part {
			b.part = true
			dst = s.respAt(s.respEvent(dst, "response.reasoning_summary_part.added"), b)
			dst = append(dst, `,"summary_index":0,"part":{"type":"summary_text","text":""}`...)
			dst = s.respEnd(dst)
		}
		b.text = stKeep(b.text, text)
		dst = s.respAt(s.respEvent(dst, "response.reasoning_summary_text.delta"), b)
		dst = append(dst, `,"summary_index":0`...)
	default:
		b.text = stKeep(b.text, text)
		dst = s.respAt(s.respEvent(dst, "response.output_text.delta"), b)
		dst = append(dst, `,"content_index":0,"logprobs":[]`...)
	}
	dst = append(dst, `,"delta":"`...)
	dst = append(dst, text...)
	return s.respEnd(append(dst, '"'))
}

// respClose writes the …done events of the block's kind with its text or
// arguments whole, then output_item.done with the item whole, from which
// Codex takes a call's arguments and runs it. A custom tool call's input is
// known only once its arguments are whole, so it goes out in one delta and
// its done; a reasoning block that never had a piece has no summary part
// to close.
func (s *Stream) respClose(dst []byte, b *streamBlock) []byte {
	switch {
	case b.custom:
		b.input = s.customInput(b.input[:0], b.text)
		if !s.keep(b, len(b.input)) {
			return dst
		}
		dst = s.respAt(s.respEvent(dst, "response.custom_tool_call_input.delta"), b)
		dst = s.respEnd(append(append(dst, `,"delta":`...), b.input...))
		dst = s.respAt(s.respEvent(dst, "response.custom_tool_call_input.done"), b)
		dst = s.respEnd(append(append(dst, `,"input":`...), b.input...))
	case b.kind == BlockTool:
		dst = s.respAt(s.respEvent(dst, "response.function_call_arguments.done"), b)
		dst = append(append(dst, `,"name":"`...), b.name...)
		dst = responsesArguments(append(dst, `","arguments":"`...), b.text)
		dst = s.respEnd(append(dst, '"'))
	case b.kind == BlockThinking && b.part:
		dst = s.respAt(s.respEvent(dst, "response.reasoning_summary_text.done"), b)
		dst = append(append(dst, `,"summary_index":0,"text":"`...), b.text...)
		dst = s.respEnd(append(dst, '"'))
		dst = s.respAt(s.respEvent(dst, "response.reasoning_summary_part.done"), b)
		dst = append(append(dst, `,"summary_index":0,"part":{"type":"summary_text","text":"`...), b.text...)
		dst = s.respEnd(append(dst, `"}`...))
	case b.kind == BlockText:
		dst = s.respAt(s.respEvent(dst, "response.output_text.done"), b)
		dst = append(append(dst, `,"content_index":0,"logprobs":[],"text":"`...), b.text...)
		dst = s.respEnd(append(dst, '"'))
		dst = s.respAt(s.respEvent(dst, "response.content_part.done"), b)
		dst = s.respEnd(s.respTextPart(append(dst, `,"content_index":0,"part":`...), b, true))
	}
	dst = s.respEvent(dst, "response.output_item.done")
	dst = append(dst, `,"output_index":`...)
	dst = strconv.AppendInt(dst, int64(b.idx), 10)
	dst = s.respItem(append(dst, `,"item":`...), b, true)
	return s.respEnd(dst)
}

// customInput appends a custom tool call's input, a JSON string: the
// argument "input" of the function call it went upstream as, or, when an
// engine wrote something else, its arguments as they are.
func (s *Stream) customInput(dst, args []byte) []byte {
	s.scratch = jsonmember.AppendUnescaped(s.scratch[:0], args)
	if validObject(s.scratch) {
		if in := jsonmember.FindRaw(s.scratch, 0, "input"); len(in) > 0 && in[0] == '"' {
			return append(dst, in...)
		}
	}
	return append(append(append(dst, '"'), args...), '"')
}

// respFinish writes response.completed, or response.incomplete for an answer
// cut short, with every output item and the usage: the event the SDKs'
// stream helpers hand the application as the response.
func (s *Stream) respFinish(dst []byte) []byte {
	if !s.announced {
		dst = s.respAnnounce(dst)
	}
	typ := "response.completed"
	if status, _ := s.stop.Responses(); status == "incomplete" {
		typ = "response.incomplete"
	}
	return s.respEnd(s.respResponse(s.respEvent(dst, typ), true))
}

// respFail writes the error event Responses' SDKs raise in a stream
// (api.ResponsesErrors): its code is the engine's code, else its type,
// else server_error.
func (s *Stream) respFail(dst, typ, code, msg []byte) []byte {
	dst = s.respEvent(dst, "error")
	dst = append(dst, `,"code":`...)
	if len(code) > 1 && code[0] == '"' {
		dst = append(dst, code...)
	} else {
		dst = orDefault(dst, typ, `"server_error"`)
	}
	dst = append(append(dst, `,"message":`...), msg...)
	return s.respEnd(append(dst, `,"param":null`...))
}
