package grammar

import (
	"bytes"
	"encoding/json"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// The classifiers Scan replaced, kept as the fuzz test's
// oracle: each read an event again, and probe decoded it.

// classify says what an event is. With probe, a data event is decoded
// far enough to tell a role-only chunk from content (only done before the
// commit point, for a handful of events); without, every valid data event
// is content and only validity is checked.
func classify(ev []byte, probe bool) Kind {
	data, ok := sse.Data(ev)
	if !ok {
		return Comment
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return Done
	}
	if len(data) == 0 {
		return Comment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return Malformed
	}
	if !probe {
		return Content
	}
	return probeChunk(data)
}

// classifyAnthropic says what an event of Anthropic's Messages API stream
// is, before commit. The commit point is the first content_block_delta
// (text, thinking or tool input): message_start, ping and the start and
// stop of a block say nothing yet, so a failure before the first delta
// may still go elsewhere; an error event is an error.
func classifyAnthropic(ev []byte) Kind {
	data, ok := sse.Data(ev)
	if !ok {
		return Comment
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return Comment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return Malformed
	}
	var t struct {
		Type string `json:"type"`
	}
	if data[0] != '{' || json.Unmarshal(data, &t) != nil {
		return Content // valid JSON of another shape: not ours to judge
	}
	switch t.Type {
	case "message_start", "ping", "content_block_start", "content_block_stop":
		return Preamble
	case "error":
		return ErrorEvent
	}
	return Content
}

// inspect is classify for a committed stream, which also wants
// the token usage an event may carry: one validating scan of an object's
// top level finds both, so counting tokens costs no second pass.
func inspect(ev []byte) (Info, error) {
	data, ok := sse.Data(ev)
	if !ok {
		return Info{Kind: Comment}, nil
	}
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "[DONE]":
		return Info{Kind: Done}, nil
	case len(data) == 0:
		return Info{Kind: Comment}, nil
	case data[0] == '{':
		f, err := jsonmember.ScanAnswer(data)
		if err != nil {
			return Info{Kind: Malformed}, err
		}
		u, has := usageAt(api.Chat, data, f.Usage)
		return Info{Kind: Content, Usage: u, HasUsage: has, Finished: f.Finished}, nil
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return Info{Kind: Malformed}, err
	}
	return Info{Kind: Content}, nil
}

// Info is what the relay learns of one event in one scan.
type Info struct {
	Kind     Kind
	Usage    api.Usage
	HasUsage bool
	Finished bool // a choice got its finish_reason
}

// chunkProbe decodes just enough of a streamed chunk to see whether it
// carries content.
type chunkProbe struct {
	Error   json.RawMessage `json:"error"`
	Choices []struct {
		Delta *struct {
			Content          *string         `json:"content"`
			ReasoningContent *string         `json:"reasoning_content"`
			Reasoning        *string         `json:"reasoning"`
			Refusal          *string         `json:"refusal"`
			ToolCalls        json.RawMessage `json:"tool_calls"`
			FunctionCall     json.RawMessage `json:"function_call"`
		} `json:"delta"`
		Text         *string `json:"text"`
		FinishReason *string `json:"finish_reason"`
	} `json:"choices"`
}

func probeChunk(data []byte) Kind {
	// only a chunk that names a role can be role-only, and only one that
	// says "error" an error: anything else is content without decoding
	if !bytes.Contains(data, []byte(`"role"`)) && !bytes.Contains(data, []byte(`"error"`)) {
		return Content
	}
	var p chunkProbe
	if data[0] != '{' || json.Unmarshal(data, &p) != nil {
		return Content // valid JSON of another shape: not ours to judge
	}
	if len(p.Error) > 0 && string(p.Error) != "null" {
		return ErrorEvent
	}
	if p.Choices == nil {
		return Content // another API's event, usage, …
	}
	for _, c := range p.Choices {
		if c.FinishReason != nil || (c.Text != nil && *c.Text != "") {
			return Content
		}
		d := c.Delta
		if d == nil {
			continue
		}
		if nonEmpty(d.Content) || nonEmpty(d.ReasoningContent) || nonEmpty(d.Reasoning) || nonEmpty(d.Refusal) ||
			IsSet(d.ToolCalls) || IsSet(d.FunctionCall) {
			return Content
		}
	}
	if len(p.Choices) == 0 {
		return Content // a usage-only chunk ends an answer
	}
	return Preamble
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

// EmptyChoices reports whether a chunk's choices are an empty array: the
// usage chunk of stream_options.include_usage.
func emptyChoices(ev []byte) bool {
	i := bytes.Index(ev, []byte(`"choices"`))
	if i < 0 {
		return false
	}
	j := jsonmember.SkipSpace(ev, i+len(`"choices"`))
	if j >= len(ev) || ev[j] != ':' {
		return false
	}
	j = jsonmember.SkipSpace(ev, j+1)
	if j >= len(ev) || ev[j] != '[' {
		return false
	}
	j = jsonmember.SkipSpace(ev, j+1)
	return j < len(ev) && ev[j] == ']'
}

// MessageStartUsage reads the usage of an Anthropic message_start event,
// which sits in its "message" (the prompt's input_tokens; message_delta
// reports the output at the top level).
func messageStartUsage(ev []byte) (api.Usage, bool) {
	if !bytes.Contains(ev, []byte(`message_start`)) {
		return api.Usage{}, false
	}
	data, ok := sse.Data(ev)
	if !ok {
		return api.Usage{}, false
	}
	var e struct {
		Type    string `json:"type"`
		Message struct {
			Usage *struct {
				Input      uint32 `json:"input_tokens"`
				CacheRead  uint32 `json:"cache_read_input_tokens"`
				CacheWrite uint32 `json:"cache_creation_input_tokens"`
				Output     uint32 `json:"output_tokens"`
			} `json:"usage"`
		} `json:"message"`
	}
	if json.Unmarshal(data, &e) != nil || e.Type != "message_start" || e.Message.Usage == nil {
		return api.Usage{}, false
	}
	// Messages' input_tokens leaves out the cache's: the one Usage counts
	// every prompt token
	u := e.Message.Usage
	return api.Usage{Input: int(u.Input + u.CacheRead + u.CacheWrite), CacheRead: int(u.CacheRead), CacheWrite: int(u.CacheWrite), Output: int(u.Output)}, true
}
