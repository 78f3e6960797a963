package translate

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Chat Completions streams: data lines only, no event names; the answer's
// parts are told in choices[0].delta, tool calls in fragments keyed by
// their index among tool calls, and the end by finish_reason, a usage
// chunk (choices []) and [DONE] (docs/translation-facts.md#streams).

// decodeChat reads one Chat chunk (or error payload). Every chunk repeats
// id, model and created, and Begin keeps the first. A payload with error
// and no choices is an engine failing mid-stream in the shape OpenAI's
// clients read (api.OpenAIErrors). The finish_reason chunk does not finish
// the answer: the usage chunk comes after it, so the finish step waits for
// [DONE] (done), or for End when the engine closes without one
// (docs/translation-facts.md#streams).
func (s *Stream) decodeChat(dst, data []byte) []byte {
	var id, model []byte
	var created int64
	choices, usage, errv, errEnd := -1, -1, -1, -1
	for it := jsonmember.Object(data, 0); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "id":
			id, _ = jsonmember.Str(data, v, end)
		case "model":
			model, _ = jsonmember.Str(data, v, end)
		case "created":
			created = int64(jsonmember.Count(data, v, end))
		case "choices":
			choices = v
		case "usage":
			usage = v
		case "error":
			errv, errEnd = v, end
		case "__verbose":
			// llama-server's debugging copy of its native answer, on the
			// first chunk of its last batch: the one place it names the
			// stop string it matched
			if w, ok := jsonmember.FindStr(data, v, "stopping_word"); ok {
				s.matchedStop(w)
			}
		}
	}
	if errv >= 0 && choices < 0 {
		return s.chatError(dst, data, errv, errEnd)
	}
	dst = s.Begin(dst, id, model, created)
	for it := jsonmember.Array(data, choices); ; {
		_, v, _, ok := it.Next()
		if !ok {
			break
		}
		if c, ok := s.chatChoice(data, v); ok {
			dst = s.decodeChatChoice(dst, data, c)
			break // the request side refuses n > 1: choice 0 is the answer
		}
	}
	// usage is null on every chunk but the last, unless the engine repeats
	// its counts on each (vLLM's continuous usage), which Update takes.
	if usage >= 0 && data[usage] == '{' {
		s.ReadUsage(api.Chat, data, usage)
	}
	return dst
}

// chatChunkChoice is where a choice's members are.
type chatChunkChoice struct {
	delta  int
	finish []byte
	seq    []byte // vLLM's stop_reason, SGLang's matched_stop, when it names a stop string (not a token id)
}

// chatChoice reads the choice at v, and whether it is choice 0: a choice
// that leaves out its index is taken as the first, as there is only one.
func (s *Stream) chatChoice(data []byte, v int) (chatChunkChoice, bool) {
	c := chatChunkChoice{delta: -1}
	first := true
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			return c, first
		}
		switch string(key) {
		case "index":
			first = jsonmember.Count(data, v, end) == 0
		case "delta":
			c.delta = v
		case "finish_reason":
			c.finish, _ = jsonmember.Str(data, v, end)
		case "stop_reason", "matched_stop":
			if q, ok := jsonmember.Str(data, v, end); ok {
				c.seq = q
			}
		}
	}
}

// decodeChatChoice reads choice 0's delta. Chat has no blocks: its reasoning
// and its text are each one running block (KeyThinking, KeyText), and a
// piece of one closes the other, so that a Messages or Responses client
// hears a thinking block, then a text block, as its own API streams them.
// reasoning_content is DeepSeek's and llama-server's name, reasoning
// vLLM's newer one.
func (s *Stream) decodeChatChoice(dst, data []byte, c chatChunkChoice) []byte {
	var content, reasoning []byte
	calls := -1
	for it := jsonmember.Object(data, c.delta); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "content":
			content, _ = jsonmember.Str(data, v, end)
		case "reasoning_content", "reasoning":
			if r, ok := jsonmember.Str(data, v, end); ok && len(r) > 0 {
				reasoning = r
			}
		case "tool_calls":
			calls = v
		}
	}
	if len(reasoning) > 0 {
		dst = s.CloseKey(dst, KeyText)
		dst = s.Delta(dst, PieceThinking, KeyThinking, reasoning)
	}
	if len(content) > 0 {
		dst = s.CloseKey(dst, KeyThinking)
		dst = s.Delta(dst, PieceText, KeyText, content)
	}
	for it := jsonmember.Array(data, calls); ; {
		_, v, _, ok := it.Next()
		if !ok {
			break
		}
		dst = s.decodeChatCall(dst, data, v)
	}
	if len(c.finish) > 0 {
		// the answer is whole; its usage chunk and [DONE] follow
		s.stop = ChatStop(string(c.finish))
		s.matchedStop(c.seq)
		for i := range s.blocks {
			if s.blocks[i].open {
				dst = s.close(dst, &s.blocks[i])
			}
		}
	}
	return dst
}

// decodeChatCall reads one tool call fragment: the first names the call,
// the rest carry pieces of its arguments, each keyed by the call's index,
// so that the fragments of parallel calls, even interleaved, reach their
// own block (docs/translation-facts.md#t7). A call that starts after the
// answer finished is dropped: the client was told the answer is whole.
func (s *Stream) decodeChatCall(dst, data []byte, v int) []byte {
	var id, name, args []byte
	index := -1
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "index":
			index = jsonmember.Index(data, v, end)
		case "id":
			id, _ = jsonmember.Str(data, v, end)
		case "function":
			for f := jsonmember.Object(data, v); ; {
				key, v, end, ok := f.Next()
				if !ok {
					break
				}
				switch string(key) {
				case "name":
					name, _ = jsonmember.Str(data, v, end)
				case "arguments":
					args, _ = jsonmember.Str(data, v, end)
				}
			}
		}
	}
	if index < 0 {
		// an engine that leaves out the index sends its calls one after
		// the other: a fragment with an id starts the next one
		index = s.calls - 1
		if len(id) > 0 || index < 0 {
			index = s.calls
		}
	}
	if s.find(index) == nil && !s.finished {
		dst = s.CloseKey(dst, KeyText)
		dst = s.CloseKey(dst, KeyThinking)
		dst = s.Open(dst, BlockTool, index, id, name)
		s.calls = max(s.calls, index+1)
	}
	return s.Delta(dst, PieceArgs, index, args)
}

// chatError reads an error payload ({"error":{"message","type","code"}}
// or {"error":"text"}). Type and code are kept as the engine wrote them:
// the client's writer maps them (messagesErrorType) or keeps them.
func (s *Stream) chatError(dst, data []byte, v, end int) []byte {
	if data[v] == '"' {
		return s.Fail(dst, nil, nil, data[v:end])
	}
	var typ, code, msg []byte
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "type":
			typ = data[v:end]
		case "code":
			code = data[v:end]
		case "message":
			msg = data[v:end]
		}
	}
	return s.Fail(dst, typ, code, msg)
}

// A Chat client's stream: data lines only, each chunk `data: ` + the head
// (id, object, created, model, the same on every chunk) + one choice with
// one delta. Chat says no block boundaries: only a tool call's first
// fragment is an opening, and a close has no word (client.close is nil).
// The head is written once, at the start step, into s.head.

// chatAnnounce writes the role chunk ({role: assistant, content: ""}) that
// OpenAI's streams begin with, at the start step, as a Chat engine's own
// would come; the gateway's commit point holds it, as any announcement
// (internal/grammar), until content follows.
func (s *Stream) chatAnnounce(dst []byte) []byte {
	s.announced = true
	s.head = append(s.head[:0], `{"id":"chatcmpl-`...)
	s.head = append(s.head, s.id...)
	s.head = append(s.head, `","object":"chat.completion.chunk","created":`...)
	s.head = strconv.AppendInt(s.head, s.created, 10)
	s.head = append(s.head, `,"model":"`...)
	s.head = append(s.head, s.model...)
	s.head = append(s.head, '"')
	dst = s.chatChunk(dst)
	return append(dst, `{"role":"assistant","content":""}`+chatTail...)
}

// chatChunk starts a chunk, up to its delta's value.
func (s *Stream) chatChunk(dst []byte) []byte {
	dst = append(dst, "data: "...)
	dst = append(dst, s.head...)
	return append(dst, `,"choices":[{"index":0,"delta":`...)
}

// chatTail ends a chunk's choice: logprobs and finish_reason null, as every
// chunk but the finishing one has them.
const chatTail = `,"logprobs":null,"finish_reason":null}]}` + "\n\n"

// chatOpen writes a tool call's first fragment: its index among tool calls
// (not among blocks: a text before it must not shift it,
// docs/translation-facts.md#t7), id, type, name and empty arguments, as
// OpenAI's first fragment has them.
func (s *Stream) chatOpen(dst []byte, b *streamBlock) []byte {
	if b.kind != BlockTool {
		return dst // text and reasoning need no announcement
	}
	dst = s.chatChunk(dst)
	dst = append(dst, `{"tool_calls":[{"index":`...)
	dst = strconv.AppendInt(dst, int64(b.idx), 10)
	dst = append(dst, `,"id":"`...)
	dst = append(dst, b.id...)
	dst = append(dst, `","type":"function","function":{"name":"`...)
	dst = append(dst, b.name...)
	return append(dst, `","arguments":""}}]}`+chatTail...)
}

// chatDelta writes one piece as a chunk: arguments as a fragment under the
// call's index, thinking as reasoning_content (LiteLLM's convention, which
// the OpenAI-compatible clients that show reasoning read), text as
// content.
func (s *Stream) chatDelta(dst []byte, b *streamBlock, p Piece, text []byte) []byte {
	switch p {
	case PieceSignature:
		return dst // Chat has no field for it
	case PieceArgs:
		dst = s.chatChunk(dst)
		dst = append(dst, `{"tool_calls":[{"index":`...)
		dst = strconv.AppendInt(dst, int64(b.idx), 10)
		dst = append(dst, `,"function":{"arguments":"`...)
		dst = append(dst, text...)
		return append(dst, `"}}]}`+chatTail...)
	case PieceThinking:
		dst = append(s.chatChunk(dst), `{"reasoning_content":"`...)
	default:
		dst = append(s.chatChunk(dst), `{"content":"`...)
	}
	dst = append(dst, text...)
	return append(dst, `"}`+chatTail...)
}

// chatFinish writes the finish_reason chunk (an empty delta), the usage
// chunk (choices [], as OpenAI writes it) when the client asked for it with
// stream_options.include_usage, and [DONE], which is how a Chat stream says
// it is whole (an OpenAI SDK's stream ends there).
func (s *Stream) chatFinish(dst []byte) []byte {
	dst = append(s.chatChunk(dst), `{},"logprobs":null,"finish_reason":"`...)
	dst = append(dst, s.stop.Chat()...)
	dst = append(dst, "\"}]}\n\n"...)
	if s.opt.IncludeUsage {
		dst = append(dst, "data: "...)
		dst = append(dst, s.head...)
		dst = append(dst, `,"choices":[],"usage":`...)
		dst = api.Chat.AppendUsage(dst, s.usage)
		dst = append(dst, "}\n\n"...)
	}
	return append(dst, "data: [DONE]\n\n"...)
}

// chatFail writes an in-band error as a data-only {"error":{…}} chunk, what
// OpenAI's SDKs raise in a stream (api.OpenAIErrors), with server_error as
// the type when the engine said none. No [DONE] follows: the stream ends
// with the error.
func (s *Stream) chatFail(dst, typ, code, msg []byte) []byte {
	dst = append(dst, `data: {"error":{"message":`...)
	dst = append(dst, msg...)
	dst = append(dst, `,"type":`...)
	dst = orDefault(dst, typ, `"server_error"`)
	dst = append(dst, `,"param":null,"code":`...)
	dst = orDefault(dst, code, "null")
	return append(dst, "}}\n\n"...)
}
