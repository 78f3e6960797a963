package gemini

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Gemini streams (:streamGenerateContent?alt=sse): data lines only, each
// a whole GenerateContentResponse holding this chunk's parts of
// candidates[0].content; a function call comes whole in one part, the
// finishReason with the last parts or in a chunk of its own, the
// cumulative usageMetadata on the last chunks, and the stream ends with
// the connection: there is no [DONE] (docs/translation-facts.md#cloud-providers). The answer is
// whole once a finishReason was seen; End tells the client so.
//
// Text and thought parts are each one running block (KeyText, KeyThinking,
// as for a Chat engine); each function call is a block of its own, keyed
// by its place among the answer's calls (NextCall counts them), opened,
// given its arguments in one piece and closed at once.

// geminiDecode reads one GenerateContentResponse chunk (or error payload).
// responseId and modelVersion may come on every chunk, and Begin keeps the
// first; a stream whose first chunk has no modelVersion begins with the
// model the request was sent.
func geminiDecode(s *translate.Stream, dst, _, data []byte) []byte {
	var id, model []byte
	candidates, usage, feedback, errv := -1, -1, -1, -1
	for it := jsonmember.Object(data, 0); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "responseId":
			id, _ = jsonmember.Str(data, v, end)
		case "modelVersion":
			model, _ = jsonmember.Str(data, v, end)
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
		return geminiStreamError(s, dst, data, errv)
	}
	if len(model) == 0 && !s.Begun() {
		model = s.RequestModel()
	}
	dst = s.Begin(dst, id, model, 0)
	for it := jsonmember.Array(data, candidates); ; {
		_, v, _, ok := it.Next()
		if !ok {
			break
		}
		if n, ok := jsonmember.FindInt(data, v, "index"); !ok || n == 0 {
			dst = geminiStreamCandidate(s, dst, data, v)
			break // the request side asks one candidate: candidate 0 is the answer
		}
	}
	if usage >= 0 {
		s.ReadUsage(api.Gemini, data, usage)
	}
	if candidates < 0 {
		if r, ok := jsonmember.FindStr(data, feedback, "blockReason"); ok && len(r) > 0 {
			// A blocked prompt: no candidates, an answer filtered whole.
			s.SetStop(translate.StopFilter)
		}
	}
	return dst
}

// geminiStreamCandidate reads candidates[0]: its parts, then its
// finishReason, which closes every block. STOP after calls, even calls of
// an earlier chunk, becomes StopTool at the finish step
// (docs/translation-facts.md#t15).
func geminiStreamCandidate(s *translate.Stream, dst, data []byte, v int) []byte {
	var finish []byte
	content := -1
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "content":
			content = v
		case "finishReason":
			finish, _ = jsonmember.Str(data, v, end)
		}
	}
	for it := jsonmember.Array(data, jsonmember.FindValue(data, content, "parts")); ; {
		_, v, _, ok := it.Next()
		if !ok {
			break
		}
		dst = geminiStreamPart(s, dst, data, v)
	}
	if len(finish) > 0 {
		s.SetStop(finishStop(string(finish)))
		dst = s.CloseAll(dst)
	}
	return dst
}

// geminiStreamPart reads one part: text, a thought (text with thought:true) or a
// function call; the rest (inline data, executable code) has no
// counterpart in the clients' APIs.
func geminiStreamPart(s *translate.Stream, dst, data []byte, v int) []byte {
	var text, sig []byte
	thought := false
	call := -1
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "text":
			text, _ = jsonmember.Str(data, v, end)
		case "thought":
			thought = string(data[v:end]) == "true"
		case "thoughtSignature":
			sig, _ = jsonmember.Str(data, v, end)
		case "functionCall":
			call = v
		}
	}
	switch {
	case call >= 0:
		return geminiStreamCall(s, dst, data, call, sig)
	case thought:
		dst = s.CloseKey(dst, translate.KeyText)
		return s.Delta(dst, translate.PieceThinking, translate.KeyThinking, text)
	}
	if len(text) > 0 {
		dst = s.CloseKey(dst, translate.KeyThinking)
	}
	return s.Delta(dst, translate.PieceText, translate.KeyText, text)
}

// geminiStreamCall reads a whole function call: a tool block opens with its
// id (the call's, or one made up, carrying the part's thought signature:
// see geminiAppendSig), takes its arguments in one piece and closes.
func geminiStreamCall(s *translate.Stream, dst, data []byte, v int, sig []byte) []byte {
	var id, name []byte
	args := -1
	argsEnd := -1
	for it := jsonmember.Object(data, v); ; {
		key, v, end, ok := it.Next()
		if !ok {
			break
		}
		switch string(key) {
		case "id":
			id, _ = jsonmember.Str(data, v, end)
		case "name":
			name, _ = jsonmember.Str(data, v, end)
		case "args":
			args, argsEnd = v, end
		}
	}
	if s.Finished() {
		return dst
	}
	dst = s.Begin(dst, nil, nil, 0)
	dst = s.CloseKey(dst, translate.KeyText)
	dst = s.CloseKey(dst, translate.KeyThinking)
	// The id is built whole (no escapes left, every byte one Messages
	// takes), so that Open, which unescapes and sanitizes only ids
	// holding a backslash, takes it as it is.
	buf := s.Buffer()
	if len(id) > 0 {
		buf = jsonmember.AppendUnescaped(buf, id)
		for i, c := range buf {
			if !translate.IDByte(c) {
				buf[i] = '_' // as appendSanitized, in place
			}
		}
	} else {
		buf = s.AppendToolID(buf)
	}
	buf = geminiAppendSig(buf, sig)
	key := s.NextCall()
	dst = s.Open(dst, translate.BlockTool, key, buf, name)
	if args >= 0 && data[args] == '{' {
		buf = jsonmember.AppendEscaped(buf[:0], data[args:argsEnd])
		dst = s.Delta(dst, translate.PieceArgs, key, buf)
	}
	s.KeepBuffer(buf)
	return s.CloseKey(dst, key)
}

// geminiStreamError reads an error payload, Google's
// {"error":{"code","message","status"}}: its status word becomes the type
// and code the clients' SDKs know.
func geminiStreamError(s *translate.Stream, dst, data []byte, v int) []byte {
	if data[v] == '"' {
		return s.Fail(dst, nil, nil, jsonmember.FindRaw(data, 0, "error"))
	}
	status, _ := jsonmember.FindStr(data, v, "status")
	st := geminiErrorStatus(string(status))
	if st == 0 {
		if st, _ = jsonmember.FindInt(data, v, "code"); st < 400 {
			st = 500
		}
	}
	typ, code := translate.OpenAIErrorType(st)
	t := []byte(`"` + typ + `"`)
	var c []byte
	if code != "" {
		c = []byte(`"` + code + `"`)
	}
	return s.Fail(dst, t, c, jsonmember.FindRaw(data, v, "message"))
}
