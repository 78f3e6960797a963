package api

import (
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Usage is an answer's token counts, whatever API reported them: the one
// reading that charging, the history, metrics, traces and translation all
// use, so that one upstream answer costs the same whatever API the client
// spoke.
//
// Input counts every prompt token, cached or not, as OpenAI's
// prompt_tokens does. The APIs disagree here: Messages' input_tokens (and
// Converse's inputTokens) leave out the tokens read from and written to
// the prompt cache, which they report beside it; OpenAI's and Gemini's
// include the cached ones. Reading each API by its own rule is what keeps
// a Messages answer with 1,000 cached tokens from costing 15 tokens to a
// Messages client and 1,015 to a Chat client
// (docs/translation-facts.md#usage).
type Usage struct {
	Input      int // prompt tokens, cache reads and writes included
	CacheRead  int // of Input, read from a prompt cache
	CacheWrite int // of Input, written to a prompt cache (Messages, Converse)
	Output     int // completion tokens, reasoning included
	Reasoning  int // of Output, reasoning
}

// Total is what a token budget counts: every prompt token, cached or not,
// and every output token.
func (u Usage) Total() int { return u.Input + u.Output }

// Update is u with what a later report of the same answer says: a stream
// may report its prompt and its output in different events (Messages'
// message_start and message_delta), or cumulative counts in every chunk
// (vLLM, Gemini), so a later non-zero count replaces an earlier one.
func (u Usage) Update(later Usage) Usage {
	if later.Input > 0 {
		u.Input, u.CacheRead, u.CacheWrite = later.Input, later.CacheRead, later.CacheWrite
	}
	if later.Output > 0 {
		u.Output, u.Reasoning = later.Output, later.Reasoning
	}
	return u
}

// ReadUsage reads the usage object of an answer (or a stream's event) of
// the API at b[v], a document a validating scan accepted: Chat's usage,
// Messages' usage, Gemini's usageMetadata, …; ok is false when b[v] is not
// an object or it holds none of the API's counts.
func (a API) ReadUsage(b []byte, v int) (u Usage, ok bool) {
	if v < 0 || v >= len(b) || b[v] != '{' {
		return Usage{}, false
	}
	return a.spec().readUsage(b, v)
}

// UsageOf reads a usage object of the API that is the whole of obj.
func (a API) UsageOf(obj []byte) (Usage, bool) {
	return a.ReadUsage(obj, jsonmember.SkipSpace(obj, 0))
}

// chatUsage reads OpenAI's usage object: Chat Completions, text
// completions and embeddings (which has prompt_tokens only). Its
// prompt_tokens_details.cache_write_tokens is no member of OpenAI's (its
// cache is written for free) but OpenRouter's, and the gateway's own when
// it translates an answer that wrote to a prompt cache (Messages,
// Converse): a token written to a cache is priced apart, so it must
// survive the translation to cost a Chat client what it costs a Messages
// one.
func chatUsage(b []byte, v int) (u Usage, ok bool) {
	for it := jsonmember.Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			return u, ok
		}
		switch string(key) {
		case "prompt_tokens":
			u.Input, ok = jsonmember.Count(b, s, e), true
		case "completion_tokens":
			u.Output, ok = jsonmember.Count(b, s, e), true
		case "prompt_tokens_details":
			u.CacheRead = nestedCount(b, s, "cached_tokens")
			u.CacheWrite = nestedCount(b, s, "cache_write_tokens")
		case "completion_tokens_details":
			u.Reasoning = nestedCount(b, s, "reasoning_tokens")
		}
	}
}

// responsesUsage reads the Responses API's usage object.
func responsesUsage(b []byte, v int) (u Usage, ok bool) {
	for it := jsonmember.Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			return u, ok
		}
		switch string(key) {
		case "input_tokens":
			u.Input, ok = jsonmember.Count(b, s, e), true
		case "output_tokens":
			u.Output, ok = jsonmember.Count(b, s, e), true
		case "input_tokens_details":
			u.CacheRead = nestedCount(b, s, "cached_tokens")
			u.CacheWrite = nestedCount(b, s, "cache_write_tokens")
		case "output_tokens_details":
			u.Reasoning = nestedCount(b, s, "reasoning_tokens")
		}
	}
}

// messagesUsage reads the Messages API's usage object, whose input_tokens
// leaves out the cache's reads and writes: Input adds them back.
func messagesUsage(b []byte, v int) (u Usage, ok bool) {
	for it := jsonmember.Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			u.Input += u.CacheRead + u.CacheWrite
			return u, ok
		}
		switch string(key) {
		case "input_tokens":
			u.Input, ok = jsonmember.Count(b, s, e), true
		case "output_tokens":
			u.Output, ok = jsonmember.Count(b, s, e), true
		case "cache_read_input_tokens":
			u.CacheRead, ok = jsonmember.Count(b, s, e), true
		case "cache_creation_input_tokens":
			u.CacheWrite, ok = jsonmember.Count(b, s, e), true
		}
	}
}

// converseUsage reads Bedrock Converse's usage object: its inputTokens
// leaves out the cache's, as Messages' input_tokens does (its
// totalTokens is their sum with outputTokens).
func converseUsage(b []byte, v int) (u Usage, ok bool) {
	for it := jsonmember.Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			u.Input += u.CacheRead + u.CacheWrite
			return u, ok
		}
		switch string(key) {
		case "inputTokens":
			u.Input, ok = jsonmember.Count(b, s, e), true
		case "outputTokens":
			u.Output, ok = jsonmember.Count(b, s, e), true
		case "cacheReadInputTokens":
			u.CacheRead, ok = jsonmember.Count(b, s, e), true
		case "cacheWriteInputTokens":
			u.CacheWrite, ok = jsonmember.Count(b, s, e), true
		}
	}
}

// geminiUsage reads Gemini's usageMetadata: its promptTokenCount includes
// the cached content's tokens; it counts thoughts apart from the
// candidates, where the clients' APIs count them in the output; the tokens
// of a tool's prompt (search results) are input.
func geminiUsage(b []byte, v int) (u Usage, ok bool) {
	candidates := 0
	for it := jsonmember.Object(b, v); ; {
		key, s, e, more := it.Next()
		if !more {
			u.Output = candidates + u.Reasoning
			return u, ok
		}
		switch string(key) {
		case "promptTokenCount", "toolUsePromptTokenCount":
			u.Input += jsonmember.Count(b, s, e)
			ok = true
		case "cachedContentTokenCount":
			u.CacheRead = jsonmember.Count(b, s, e)
		case "candidatesTokenCount":
			candidates, ok = jsonmember.Count(b, s, e), true
		case "thoughtsTokenCount":
			u.Reasoning = jsonmember.Count(b, s, e)
		}
	}
}

// otherUsage reads the usage of an answer whose API the gateway does not
// know (an engine's own route, a passthrough): OpenAI's, the Responses
// API's or Anthropic's, told apart by their member names. Anthropic's
// cache members exist only where input_tokens leaves them out.
func otherUsage(b []byte, v int) (Usage, bool) {
	if _, _, ok := jsonmember.Find(b, v, "prompt_tokens"); ok {
		return chatUsage(b, v)
	}
	if _, _, ok := jsonmember.Find(b, v, "input_tokens_details"); ok {
		return responsesUsage(b, v)
	}
	return messagesUsage(b, v)
}

// nestedCount is the count name of the object at b[v]; 0 when absent.
func nestedCount(b []byte, v int, name string) int {
	if s, e, ok := jsonmember.Find(b, v, name); ok {
		return jsonmember.Count(b, s, e)
	}
	return 0
}

// AppendUsage appends u as the API's usage object: Chat's (and the other
// OpenAI routes'), Messages' or the Responses API's. Only those three are
// ever written: no client speaks a provider's own API.
func (a API) AppendUsage(b []byte, u Usage) []byte {
	if w := a.spec().writeUsage; w != nil {
		return w(u, b)
	}
	return u.appendChat(b)
}

func (u Usage) appendChat(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Output), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input+u.Output), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = u.appendCacheWrite(b)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Reasoning), 10)
	return append(b, `}}`...)
}

func (u Usage) appendMessages(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(max(0, u.Input-u.CacheRead-u.CacheWrite)), 10)
	b = append(b, `,"cache_creation_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheWrite), 10)
	b = append(b, `,"cache_read_input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = append(b, `,"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Output), 10)
	return append(b, '}')
}

func (u Usage) appendResponses(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = u.appendCacheWrite(b)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Output), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Reasoning), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input+u.Output), 10)
	return append(b, '}')
}

// appendCacheWrite appends the tokens written to a prompt cache inside
// OpenAI's details object (chatUsage says why), only when there are any:
// an answer that wrote none reads as OpenAI's own.
func (u Usage) appendCacheWrite(b []byte) []byte {
	if u.CacheWrite <= 0 {
		return b
	}
	b = append(b, `,"cache_write_tokens":`...)
	return strconv.AppendInt(b, int64(u.CacheWrite), 10)
}
