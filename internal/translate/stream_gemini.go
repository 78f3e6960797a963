package translate

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Gemini streams (:streamGenerateContent?alt=sse): data lines only, each
// a whole GenerateContentResponse holding this chunk's parts of
// candidates[0].content; a function call comes whole in one part, the
// finishReason with the last parts or in a chunk of its own, the
// cumulative usageMetadata on the last chunks, and the stream ends with
// the connection: there is no [DONE] (docs/translation-facts.md#cloud-providers). The answer is
// whole once a finishReason was seen; End tells the client so.
//
// Text and thought parts are each one running block (the Chat decoder's
// keys); each function call is a block of its own, keyed by its place
// among the answer's calls (s.chatCalls counts them), opened, given its
// arguments in one piece and closed at once.

// decodeGemini reads one GenerateContentResponse chunk (or error payload).
func (s *Stream) decodeGemini(dst, data []byte) []byte {
	var id, model []byte
	candidates, usage, feedback, errv := -1, -1, -1, -1
	for it := stObject(data, 0); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "responseId":
			id, _ = stStr(data, v, end)
		case "modelVersion":
			model, _ = stStr(data, v, end)
		case "candidates":
			candidates = v
		case "usageMetadata":
			usage = v
		case "promptFeedback":
			feedback = v
		case "error":
			errv = v
		}
	}
	if errv >= 0 && candidates < 0 {
		return s.sgError(dst, data, errv)
	}
	if len(model) == 0 && !s.begun && s.opt.Model != "" {
		model = stEscape(nil, s.opt.Model) // once per stream
	}
	dst = s.begin(dst, id, model, 0)
	for it := stArray(data, candidates); ; {
		_, v, _, ok := it.next()
		if !ok {
			break
		}
		if n, ok := stFindNumber(data, v, "index"); !ok || n == 0 {
			dst = s.sgCandidate(dst, data, v)
			break // the request side asks one candidate: candidate 0 is the answer
		}
	}
	if usage >= 0 {
		s.readUsage(api.Gemini, data, usage)
	}
	if candidates < 0 {
		if r, ok := stFindStr(data, feedback, "blockReason"); ok && len(r) > 0 {
			// A blocked prompt: no candidates, an answer filtered whole.
			s.stop = StopFilter
		}
	}
	return dst
}

// stFindNumber is the integer member name of the object at v, and whether
// it is there.
func stFindNumber(data []byte, v int, name string) (int, bool) {
	r := stFindRaw(data, v, name)
	if len(r) == 0 {
		return 0, false
	}
	return stInt(r, 0, len(r)), true
}

// sgCandidate reads candidates[0]: its parts, then its finishReason.
func (s *Stream) sgCandidate(dst, data []byte, v int) []byte {
	var finish []byte
	content := -1
	for it := stObject(data, v); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "content":
			content = v
		case "finishReason":
			finish, _ = stStr(data, v, end)
		}
	}
	for it := stArray(data, stFindValue(data, content, "parts")); ; {
		_, v, _, ok := it.next()
		if !ok {
			break
		}
		dst = s.sgPart(dst, data, v)
	}
	if len(finish) > 0 {
		s.stop = GeminiStop(string(finish))
		for i := range s.blocks {
			if s.blocks[i].open {
				dst = s.close(dst, &s.blocks[i])
			}
		}
	}
	return dst
}

// stFindValue is where the value of the member name of the object at v
// starts, or -1.
func stFindValue(data []byte, v int, name string) int {
	for it := stObject(data, v); ; {
		key, v, _, ok := it.next()
		if !ok {
			return -1
		}
		if string(key) == name {
			return v
		}
	}
}

// sgPart reads one part: text, a thought (text with thought:true) or a
// function call; the rest (inline data, executable code) has no
// counterpart in the clients' APIs.
func (s *Stream) sgPart(dst, data []byte, v int) []byte {
	var text, sig []byte
	thought := false
	call := -1
	for it := stObject(data, v); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "text":
			text, _ = stStr(data, v, end)
		case "thought":
			thought = string(data[v:end]) == "true"
		case "thoughtSignature":
			sig, _ = stStr(data, v, end)
		case "functionCall":
			call = v
		}
	}
	switch {
	case call >= 0:
		return s.sgCall(dst, data, call, sig)
	case thought:
		dst = s.closeKey(dst, stKeyText)
		return s.delta(dst, stThought, stKeyThinking, text)
	}
	if len(text) > 0 {
		dst = s.closeKey(dst, stKeyThinking)
	}
	return s.delta(dst, stTextPiece, stKeyText, text)
}

// sgCall reads a whole function call: a tool block opens with its id (the
// call's, or one made up, carrying the part's thought signature: see
// gmCallID), takes its arguments in one piece and closes.
func (s *Stream) sgCall(dst, data []byte, v int, sig []byte) []byte {
	var id, name []byte
	args := -1
	argsEnd := -1
	for it := stObject(data, v); ; {
		key, v, end, ok := it.next()
		if !ok {
			break
		}
		switch string(key) {
		case "id":
			id, _ = stStr(data, v, end)
		case "name":
			name, _ = stStr(data, v, end)
		case "args":
			args, argsEnd = v, end
		}
	}
	if s.finished {
		return dst
	}
	dst = s.begin(dst, nil, nil, 0)
	dst = s.closeKey(dst, stKeyText)
	dst = s.closeKey(dst, stKeyThinking)
	// The id is written into scratch whole (no escapes left), so that open
	// (which unescapes into scratch only ids holding a backslash) reads it
	// as is.
	s.scratch = s.scratch[:0]
	if len(id) > 0 {
		s.scratch = stUnescape(s.scratch, id)
		for i, c := range s.scratch {
			if !IDByte(c) {
				s.scratch[i] = '_' // as stSanitize, in place
			}
		}
	} else {
		if s.to == api.Messages {
			s.scratch = append(s.scratch, "toolu_"...)
		} else {
			s.scratch = append(s.scratch, "call_"...)
		}
		s.scratch = append(s.scratch, s.token...)
		s.scratch = strconv.AppendInt(append(s.scratch, '_'), int64(s.nTools), 10)
	}
	s.scratch = geminiAppendSig(s.scratch, sig)
	key := s.chatCalls
	s.chatCalls++
	dst = s.open(dst, stTool, key, s.scratch, name)
	if args >= 0 && data[args] == '{' {
		s.scratch = sgEscape(s.scratch[:0], data[args:argsEnd])
		dst = s.delta(dst, stArgs, key, s.scratch)
	}
	return s.closeKey(dst, key)
}

// sgEscape appends raw JSON as the bytes of a JSON string holding it:
// tool arguments travel as a string in every client's API.
func sgEscape(dst, raw []byte) []byte {
	const hex = "0123456789abcdef"
	for _, c := range raw {
		switch {
		case c == '"' || c == '\\':
			dst = append(dst, '\\', c)
		case c == '\n':
			dst = append(dst, '\\', 'n')
		case c == '\r':
			dst = append(dst, '\\', 'r')
		case c == '\t':
			dst = append(dst, '\\', 't')
		case c < 0x20:
			dst = append(dst, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
		default:
			dst = append(dst, c)
		}
	}
	return dst
}

// sgError reads an error payload, Google's
// {"error":{"code","message","status"}}: its status word becomes the type
// and code the clients' SDKs know.
func (s *Stream) sgError(dst, data []byte, v int) []byte {
	if data[v] == '"' {
		return s.fail(dst, nil, nil, stFindRaw(data, 0, "error"))
	}
	status, _ := stFindStr(data, v, "status")
	st := geminiErrorStatus(string(status))
	if st == 0 {
		if st, _ = stFindNumber(data, v, "code"); st < 400 {
			st = 500
		}
	}
	typ, code := OpenAIErrorType(st)
	t := []byte(`"` + typ + `"`)
	var c []byte
	if code != "" {
		c = []byte(`"` + code + `"`)
	}
	return s.fail(dst, t, c, stFindRaw(data, v, "message"))
}
