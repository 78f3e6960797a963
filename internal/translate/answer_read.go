package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The readers take what the three APIs' answers say into an anAnswer.
// They are lenient where engines are known to differ from the API's owner
// (arguments as an object, content as parts, a float for a time) and
// strict where a wrong shape means there is no answer: a missing
// choices/content/output, or a member of the wrong type.

// anChatAnswer is a Chat Completions answer, the members read.
type anChatAnswer struct {
	ID      string          `json:"id"`
	Created json.Number     `json:"created"`
	Model   string          `json:"model"`
	Choices *[]anChatChoice `json:"choices"`
	Usage   json.RawMessage `json:"usage"` // read by api.Chat
	Error   json.RawMessage `json:"error"`
	// llama-server's debugging copy of its native answer (-lv 10 and
	// above), the one place its OpenAI answers name the stop string.
	Verbose *struct {
		StoppingWord string `json:"stopping_word"`
	} `json:"__verbose"`
}

type anChatChoice struct {
	Message struct {
		Content   json.RawMessage `json:"content"`
		Refusal   *string         `json:"refusal"`
		Reasoning *string         `json:"reasoning_content"`
		// vLLM's newer servers and OpenRouter say "reasoning".
		ReasoningAlt json.RawMessage `json:"reasoning"`
		ToolCalls    []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		FunctionCall *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function_call"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
	// vLLM's stop_reason and SGLang's matched_stop: the stop string, or
	// the id of a stop token (a number, not a sequence the client asked
	// for).
	StopReason  json.RawMessage `json:"stop_reason"`
	MatchedStop json.RawMessage `json:"matched_stop"`
}

func anReadChat(body []byte) (anAnswer, error) {
	var c anChatAnswer
	if err := json.Unmarshal(body, &c); err != nil {
		return anAnswer{}, err
	}
	if c.Choices == nil {
		return anAnswer{}, anNoAnswer("choices", c.Error)
	}
	if len(*c.Choices) == 0 {
		return anAnswer{}, errors.New("no choice in choices")
	}
	// Messages and Responses answer one choice; the request translator
	// refuses n > 1, so a second choice is an engine's extra.
	ch := (*c.Choices)[0]
	m := ch.Message
	a := anAnswer{id: c.ID, model: c.Model, created: anUnix(c.Created)}
	if ch.FinishReason != nil {
		a.stop = ChatStop(*ch.FinishReason)
	}
	a.seq = anFirst(anStopString(ch.StopReason), anStopString(ch.MatchedStop))
	if c.Verbose != nil && a.seq == "" {
		a.seq = c.Verbose.StoppingWord
	}
	reasoning := ""
	if m.Reasoning != nil {
		reasoning = *m.Reasoning
	} else if len(m.ReasoningAlt) > 0 && m.ReasoningAlt[0] == '"' {
		_ = json.Unmarshal(m.ReasoningAlt, &reasoning)
	}
	if reasoning != "" {
		a.parts = append(a.parts, anPart{kind: anThinking, text: reasoning})
	}
	text, err := anChatContent(m.Content)
	if err != nil {
		return anAnswer{}, fmt.Errorf("choices[0].message.content: %w", err)
	}
	if text != "" {
		a.parts = append(a.parts, anPart{kind: anText, text: text})
	}
	if m.Refusal != nil && *m.Refusal != "" {
		a.parts = append(a.parts, anPart{kind: anRefusal, text: *m.Refusal})
	}
	for i, tc := range m.ToolCalls {
		args, err := anArgsText(tc.Function.Arguments)
		if err != nil {
			return anAnswer{}, fmt.Errorf("choices[0].message.tool_calls[%d].function.arguments: %w", i, err)
		}
		a.parts = append(a.parts, anPart{kind: anTool, id: tc.ID, name: tc.Function.Name, args: args})
	}
	if fc := m.FunctionCall; fc != nil && len(m.ToolCalls) == 0 && fc.Name != "" {
		args, err := anArgsText(fc.Arguments)
		if err != nil {
			return anAnswer{}, fmt.Errorf("choices[0].message.function_call.arguments: %w", err)
		}
		a.parts = append(a.parts, anPart{kind: anTool, name: fc.Name, args: args})
	}
	a.usage, _ = api.Chat.UsageOf(c.Usage)
	return a, nil
}

// anChatContent is a Chat message's content: a string, null, or (from
// some engines) an array of text parts.
func anChatContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// anMessagesAnswer is a Messages answer, the members read.
type anMessagesAnswer struct {
	ID         string            `json:"id"`
	Type       string            `json:"type"`
	Model      string            `json:"model"`
	Content    *[]anMessageBlock `json:"content"`
	StopReason *string           `json:"stop_reason"`
	// The matched stop sequence; llama-server names it beside an
	// end_turn stop_reason.
	StopSequence *string         `json:"stop_sequence"`
	Usage        json.RawMessage `json:"usage"` // read by api.Messages
	StopDetails  *struct {
		Explanation *string `json:"explanation"`
	} `json:"stop_details"`
	Error json.RawMessage `json:"error"`
}

type anMessageBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

func anReadMessages(body []byte) (anAnswer, error) {
	var m anMessagesAnswer
	if err := json.Unmarshal(body, &m); err != nil {
		return anAnswer{}, err
	}
	if m.Content == nil || m.Type == "error" {
		return anAnswer{}, anNoAnswer("content", m.Error)
	}
	a := anAnswer{id: m.ID, model: m.Model}
	if m.StopReason != nil {
		a.stop = MessagesStop(*m.StopReason)
	}
	if m.StopSequence != nil {
		a.seq = *m.StopSequence
	}
	a.usage, _ = api.Messages.UsageOf(m.Usage)
	// A refusal's text is what the model said instead of answering: Chat
	// and Responses have a place for exactly that.
	textKind := anText
	if a.stop == StopFilter {
		textKind = anRefusal
	}
	for i, b := range *m.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				a.parts = append(a.parts, anPart{kind: textKind, text: b.Text})
			}
		case "tool_use":
			var args bytes.Buffer
			if len(b.Input) > 0 && string(b.Input) != "null" {
				if err := json.Compact(&args, b.Input); err != nil {
					return anAnswer{}, fmt.Errorf("content[%d].input: %w", i, err)
				}
			}
			a.parts = append(a.parts, anPart{kind: anTool, id: b.ID, name: b.Name, args: args.String()})
		case "thinking":
			a.parts = append(a.parts, anPart{kind: anThinking, text: b.Thinking, sig: b.Signature})
		case "redacted_thinking":
			a.parts = append(a.parts, anPart{kind: anRedacted, sig: b.Data})
		}
		// Server tools' blocks (server_tool_use, web_search_tool_result…)
		// ran on Anthropic's side and have no counterpart: dropped.
	}
	if a.stop == StopFilter && !a.anHas(anRefusal) && m.StopDetails != nil && m.StopDetails.Explanation != nil {
		a.parts = append(a.parts, anPart{kind: anRefusal, text: *m.StopDetails.Explanation})
	}
	return a, nil
}

// anResponsesAnswer is a Responses answer, the members read.
type anResponsesAnswer struct {
	ID         string      `json:"id"`
	CreatedAt  json.Number `json:"created_at"`
	Model      string      `json:"model"`
	Status     string      `json:"status"`
	Incomplete *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output *[]anResponsesItem `json:"output"`
	Usage  json.RawMessage    `json:"usage"` // read by api.Responses
	Error  json.RawMessage    `json:"error"`
}

type anResponsesItem struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Content []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     string          `json:"input"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent *string `json:"encrypted_content"`
}

func anReadResponses(body []byte) (anAnswer, error) {
	var r anResponsesAnswer
	if err := json.Unmarshal(body, &r); err != nil {
		return anAnswer{}, err
	}
	switch r.Status {
	case "failed", "cancelled", "queued", "in_progress":
		// No answer to give: a failure (or a background response not yet
		// done) the client must hear of as one.
		if msg := anErrorMessage(r.Error); msg != "" {
			return anAnswer{}, fmt.Errorf("the response is %s: %s", r.Status, msg)
		}
		return anAnswer{}, fmt.Errorf("the response is %s", r.Status)
	}
	if r.Output == nil {
		return anAnswer{}, anNoAnswer("output", r.Error)
	}
	a := anAnswer{id: r.ID, model: r.Model, created: anUnix(r.CreatedAt)}
	tools := false
	for i, it := range *r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch {
				case c.Type == "output_text" && c.Text != "":
					a.parts = append(a.parts, anPart{kind: anText, text: c.Text})
				case c.Type == "refusal" && c.Refusal != "":
					a.parts = append(a.parts, anPart{kind: anRefusal, text: c.Refusal})
				}
			}
		case "function_call":
			args, err := anArgsText(it.Arguments)
			if err != nil {
				return anAnswer{}, fmt.Errorf("output[%d].arguments: %w", i, err)
			}
			a.parts = append(a.parts, anPart{kind: anTool, id: anFirst(it.CallID, it.ID), name: it.Name, args: args})
			tools = true
		case "custom_tool_call":
			// The other APIs know function tools only: the freeform input
			// becomes the one string parameter the request translator
			// declared for it.
			args, _ := anMarshal(map[string]string{"input": it.Input})
			a.parts = append(a.parts, anPart{kind: anTool, id: anFirst(it.CallID, it.ID), name: it.Name, args: string(args)})
			tools = true
		case "reasoning":
			a.parts = append(a.parts, anReasoningPart(it))
		}
		// Built-in tools' items (web_search_call, file_search_call…) ran
		// on OpenAI's side and have no counterpart: dropped.
	}
	reason := ""
	if r.Incomplete != nil {
		reason = r.Incomplete.Reason
	}
	a.stop = ResponsesStop(r.Status, reason, tools)
	a.usage, _ = api.Responses.UsageOf(r.Usage)

	return a, nil
}

// anReasoningPart is a Responses reasoning item as a part. Its summary is
// what OpenAI shows; open-weight servers (gpt-oss behind vLLM) put the
// text in content instead. An item with summary parts is a thinking
// block, even if their text is empty (Messages' signature-only thinking,
// docs/translation-facts.md#t8); one with none and encrypted content only is redacted.
func anReasoningPart(it anResponsesItem) anPart {
	var texts []string
	for _, s := range it.Summary {
		texts = append(texts, s.Text)
	}
	if len(texts) == 0 {
		for _, c := range it.Content {
			if c.Type == "reasoning_text" {
				texts = append(texts, c.Text)
			}
		}
	}
	sig := ""
	if it.EncryptedContent != nil {
		sig = *it.EncryptedContent
	}
	if len(texts) == 0 && sig != "" {
		return anPart{kind: anRedacted, sig: sig}
	}
	return anPart{kind: anThinking, text: strings.Join(texts, "\n\n"), sig: sig}
}

// anNoAnswer is the error for a body without the member that holds an
// answer, with the engine's own error message when it sent one instead.
func anNoAnswer(member string, errMember json.RawMessage) error {
	if msg := anErrorMessage(errMember); msg != "" {
		return fmt.Errorf("no %s, an error: %s", member, msg)
	}
	return fmt.Errorf("no %s", member)
}

// anErrorMessage is the message of an error member: a string, or an
// object with a string message.
func anErrorMessage(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return anBound(s)
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return anBound(o.Message)
	}
	return ""
}

// anUnix reads a time in seconds that the API says is an integer but
// openai-go reads as a float (Responses' created_at): both are taken.
func anUnix(n json.Number) int64 {
	if n == "" {
		return 0
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > math.MaxInt32*4 {
		return 0
	}
	return int64(f)
}

// anStopString is a stop_reason member that names a stop string, else "".
func anStopString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func anFirst(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
