package translate

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Responses streams: named events, each with its type and a rising
// sequence_number in the data, no [DONE]: response.created, then per
// output item output_item.added, its deltas (output_text,
// function_call_arguments, reasoning summary or text) and output_item.done,
// then response.completed, .incomplete or .failed; error anywhere
// (docs/translation-facts.md#streams). A block is an output item, keyed by output_index.

// decodeResponses reads one Responses event.
func (s *Stream) decodeResponses(dst, data []byte) []byte {
	var typ, delta, code, msg []byte
	index, item, response, errv, summary := -1, -1, -1, -1, 0
	for it := stObject(data, 0); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ, _ = stStr(data, v, end)
		case "output_index":
			index = stIndex(data, v, end)
		case "item":
			item = v
		case "delta":
			delta, _ = stStr(data, v, end)
		case "response":
			response = v
		case "summary_index":
			summary = stInt(data, v, end)
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
		return s.delta(dst, stTextPiece, index, delta)
	case "response.function_call_arguments.delta":
		return s.delta(dst, stArgs, index, delta)
	case "response.reasoning_summary_text.delta", "response.reasoning_text.delta":
		return s.delta(dst, stThought, index, delta)
	case "response.reasoning_summary_part.added":
		if summary > 0 && s.find(index) != nil {
			return s.delta(dst, stThought, index, []byte(`\n\n`)) // summaries are paragraphs
		}
	case "response.output_item.added":
		if t, _ := stFindStr(data, item, "type"); string(t) == "function_call" {
			id, _ := stFindStr(data, item, "call_id") // the id its output pairs with, not the item's
			name, _ := stFindStr(data, item, "name")
			return s.open(dst, stTool, index, id, name)
		}
	case "response.output_item.done":
		if sig, ok := stFindStr(data, item, "encrypted_content"); ok {
			dst = s.delta(dst, stSignature, index, sig)
		}
		return s.closeKey(dst, index)
	case "response.created":
		id, _ := stFindStr(data, response, "id")
		model, _ := stFindStr(data, response, "model")
		created := stFindRaw(data, response, "created_at")
		return s.begin(dst, id, model, int64(stInt(created, 0, len(created))))
	case "response.completed", "response.incomplete", "response.failed":
		return s.responsesEnd(dst, data, response)
	case "error":
		if errv >= 0 && msg == nil {
			code, msg = stFindRaw(data, errv, "code"), stFindRaw(data, errv, "message")
		}
		return s.fail(dst, nil, code, msg)
	}
	return dst
}

// responsesEnd reads the terminal event's response: its status and usage.
func (s *Stream) responsesEnd(dst, data []byte, response int) []byte {
	var status, reason []byte
	errv := -1
	for it := stObject(data, response); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "status":
			status, _ = stStr(data, v, end)
		case "incomplete_details":
			reason, _ = stFindStr(data, v, "reason")
		case "error":
			errv = v
		case "usage":
			s.readUsage(api.Responses, data, v)
		}
	}
	if string(status) == "failed" {
		return s.fail(dst, nil, stFindRaw(data, errv, "code"), stFindRaw(data, errv, "message"))
	}
	s.stop = ResponsesStop(string(status), string(reason), s.nTools > 0)
	if s.stop == StopNone {
		s.stop = StopEnd
	}
	return s.finish(dst)
}
