package handler

import (
	"bytes"
	"encoding/json"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// The two stream grammars, OpenAI's chunks and Anthropic's typed events:
// what an event is (comment, preamble, content, end, error, malformed) and
// how an answer says it is whole.

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

// How each route's answer says it is whole, besides OpenAI's [DONE]: a
// chat or text completion's choice gets a finish_reason; a Responses API
// stream ends with response.completed (or .incomplete, .failed);
// Anthropic's with message_stop. Other routes end when the connection
// does.
const (
	endConnection = iota
	endFinish
	endResponse
	endMessage
)

var (
	markFinish   = []byte(`"finish_reason"`)
	markResponse = []byte(`"type":"response.`)
	markMessage  = []byte(`message_stop`)
	responseEnds = [][]byte{[]byte(`response.completed`), []byte(`response.incomplete`), []byte(`response.failed`)}
)

// endRule is how the answer to req says it is whole.
func endRule(req *request) int {
	p := req.r.URL.Path
	switch {
	case strings.HasSuffix(p, "/completions"): // chat and text
		return endFinish
	case strings.HasSuffix(p, "/responses"):
		return endResponse
	case strings.HasSuffix(p, "/messages"):
		return endMessage
	}
	return endConnection
}

// hasFinishReason reports whether an event sets a finish_reason (to a
// string, not null): one search per event.
func hasFinishReason(ev []byte) bool {
	for {
		i := bytes.Index(ev, markFinish)
		if i < 0 {
			return false
		}
		ev = ev[i+len(markFinish):]
		j := jsonmember.SkipSpace(ev, 0)
		if j < len(ev) && ev[j] == ':' {
			if k := jsonmember.SkipSpace(ev, j+1); k < len(ev) && ev[k] == '"' {
				return true
			}
		}
	}
}

// emptyChoices reports whether a chunk's choices are an empty array: the
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
