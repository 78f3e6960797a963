package handler

import (
	"bytes"
	"encoding/json"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// eventKind is what an event means to the gateway.
type eventKind int

const (
	eventComment   eventKind = iota // only comments or no data: keep-alives
	eventPreamble                   // data that is not content yet: a role-only first chunk
	eventContent                    // data the client's answer consists of
	eventDone                       // data: [DONE]
	eventError                      // data: {"error": …} from the upstream
	eventMalformed                  // a data payload that is not JSON
)

// classifyEvent says what an event is. With probe, a data event is decoded
// far enough to tell a role-only chunk from content (only done before the
// commit point, for a handful of events); without, every valid data event
// is content and only validity is checked.
func classifyEvent(ev []byte, probe bool) eventKind {
	data, ok := sse.Data(ev)
	if !ok {
		return eventComment
	}
	data = bytes.TrimSpace(data)
	if string(data) == "[DONE]" {
		return eventDone
	}
	if len(data) == 0 {
		return eventComment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventMalformed
	}
	if !probe {
		return eventContent
	}
	return probeChunk(data)
}

// classifyAnthropic says what an event of Anthropic's Messages API stream
// is, before commit. The commit point is the first content_block_delta
// (text, thinking or tool input): message_start, ping and the start and
// stop of a block say nothing yet, so a failure before the first delta
// may still go elsewhere; an error event is an error.
func classifyAnthropic(ev []byte) eventKind {
	data, ok := sse.Data(ev)
	if !ok {
		return eventComment
	}
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return eventComment
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventMalformed
	}
	var t struct {
		Type string `json:"type"`
	}
	if data[0] != '{' || json.Unmarshal(data, &t) != nil {
		return eventContent // valid JSON of another shape: not ours to judge
	}
	switch t.Type {
	case "message_start", "ping", "content_block_start", "content_block_stop":
		return eventPreamble
	case "error":
		return eventError
	}
	return eventContent
}

// inspectEvent is classifyEvent for a committed stream, which also wants
// the token usage an event may carry: one validating scan of an object's
// top level finds both, so counting tokens costs no second pass.
func inspectEvent(ev []byte) (eventInfo, error) {
	data, ok := sse.Data(ev)
	if !ok {
		return eventInfo{kind: eventComment}, nil
	}
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "[DONE]":
		return eventInfo{kind: eventDone}, nil
	case len(data) == 0:
		return eventInfo{kind: eventComment}, nil
	case data[0] == '{':
		f, err := jsonmember.ScanAnswer(data)
		if err != nil {
			return eventInfo{kind: eventMalformed}, err
		}
		u, has := usageIn(data, f)
		return eventInfo{kind: eventContent, usage: u, hasUsage: has, finished: f.Finished}, nil
	}
	if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
		return eventInfo{kind: eventMalformed}, err
	}
	return eventInfo{kind: eventContent}, nil
}

// eventInfo is what the relay learns of one event in one scan.
type eventInfo struct {
	kind     eventKind
	usage    Usage
	hasUsage bool
	finished bool // a choice got its finish_reason
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

func probeChunk(data []byte) eventKind {
	// only a chunk that names a role can be role-only, and only one that
	// says "error" an error: anything else is content without decoding
	if !bytes.Contains(data, []byte(`"role"`)) && !bytes.Contains(data, []byte(`"error"`)) {
		return eventContent
	}
	var p chunkProbe
	if data[0] != '{' || json.Unmarshal(data, &p) != nil {
		return eventContent // valid JSON of another shape: not ours to judge
	}
	if len(p.Error) > 0 && string(p.Error) != "null" {
		return eventError
	}
	if p.Choices == nil {
		return eventContent // another API's event, usage, …
	}
	for _, c := range p.Choices {
		if c.FinishReason != nil || (c.Text != nil && *c.Text != "") {
			return eventContent
		}
		d := c.Delta
		if d == nil {
			continue
		}
		if nonEmpty(d.Content) || nonEmpty(d.ReasoningContent) || nonEmpty(d.Reasoning) || nonEmpty(d.Refusal) ||
			isSet(d.ToolCalls) || isSet(d.FunctionCall) {
			return eventContent
		}
	}
	if len(p.Choices) == 0 {
		return eventContent // a usage-only chunk ends an answer
	}
	return eventPreamble
}

func nonEmpty(s *string) bool { return s != nil && *s != "" }

func isSet(raw json.RawMessage) bool { return len(raw) > 0 && string(raw) != "null" }
