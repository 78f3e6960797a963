package translate

import "strconv"

// Usage is an answer's token counts, read from any of the three APIs and
// written in any. Input counts every prompt token, cached or not, as
// OpenAI's do; Messages counts its input_tokens without the cache's, so
// reading and writing it moves the cache counts in and out (TRANSLATION.md
// §2, trap T11).
type Usage struct {
	Input      int // prompt tokens, cache reads and writes included
	CacheRead  int // of Input, read from a prompt cache
	CacheWrite int // of Input, written to a prompt cache (Messages only)
	Output     int // completion tokens, reasoning included
	Reasoning  int // of Output, reasoning (OpenAI's APIs only)
}

// MessagesUsage is a Messages usage object's counts: input_tokens excludes
// the cache's.
func MessagesUsage(input, cacheRead, cacheWrite, output int) Usage {
	return Usage{Input: input + cacheRead + cacheWrite, CacheRead: cacheRead, CacheWrite: cacheWrite, Output: output}
}

// AppendChat appends u as a Chat Completions usage object.
func (u Usage) AppendChat(b []byte) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Output), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input+u.Output), 10)
	b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = append(b, `},"completion_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Reasoning), 10)
	return append(b, `}}`...)
}

// AppendMessages appends u as a Messages usage object.
func (u Usage) AppendMessages(b []byte) []byte {
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

// AppendResponses appends u as a Responses usage object.
func (u Usage) AppendResponses(b []byte) []byte {
	b = append(b, `{"input_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input), 10)
	b = append(b, `,"input_tokens_details":{"cached_tokens":`...)
	b = strconv.AppendInt(b, int64(u.CacheRead), 10)
	b = append(b, `},"output_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Output), 10)
	b = append(b, `,"output_tokens_details":{"reasoning_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Reasoning), 10)
	b = append(b, `},"total_tokens":`...)
	b = strconv.AppendInt(b, int64(u.Input+u.Output), 10)
	return append(b, '}')
}

// Update is u with what a later report of a stream says: Messages reports
// input in message_start and cumulative output in message_delta.
func (u Usage) Update(later Usage) Usage {
	if later.Input > 0 {
		u.Input, u.CacheRead, u.CacheWrite = later.Input, later.CacheRead, later.CacheWrite
	}
	if later.Output > 0 {
		u.Output, u.Reasoning = later.Output, later.Reasoning
	}
	return u
}
