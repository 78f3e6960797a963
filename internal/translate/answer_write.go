package translate

import (
	"encoding/json"
	"slices"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The writers write an anAnswer in each API's words, with every member its
// official SDKs read as required present (null where the gateway has
// nothing to say), in the order the API's owner writes them.

type anChatOut struct {
	ID      string             `json:"id"`
	Object  string             `json:"object"`
	Created int64              `json:"created"`
	Model   string             `json:"model"`
	Choices [1]anChatOutChoice `json:"choices"`
	Usage   json.RawMessage    `json:"usage"`
}

type anChatOutChoice struct {
	Index        int              `json:"index"`
	Message      anChatOutMessage `json:"message"`
	Logprobs     *struct{}        `json:"logprobs"`
	FinishReason string           `json:"finish_reason"`
}

type anChatOutMessage struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// LiteLLM's name for the reasoning, which the OpenAI-compatible
	// clients that show reasoning read (DeepSeek's, vLLM's).
	Reasoning   string            `json:"reasoning_content,omitempty"`
	ToolCalls   []anChatOutCall   `json:"tool_calls,omitempty"`
	Annotations []json.RawMessage `json:"annotations"`
}

type anChatOutCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func anWriteChat(a *anAnswer) ([]byte, error) {
	out := anChatOut{
		ID:      "chatcmpl-" + a.base,
		Object:  "chat.completion",
		Created: a.created,
		Model:   a.model,
		Usage:   anUsage(api.Chat, a.usage),
	}
	m := &out.Choices[0].Message
	m.Role = "assistant"
	m.Annotations = []json.RawMessage{}
	m.Reasoning = a.anJoin(anThinking)
	if a.anHas(anRefusal) {
		r := a.anJoin(anRefusal)
		m.Refusal = &r
	}
	for _, p := range a.parts {
		if p.kind != anTool {
			continue
		}
		c := anChatOutCall{ID: anToolID(api.Chat, p.id, a.base, len(m.ToolCalls)), Type: "function"}
		c.Function.Name = p.name
		c.Function.Arguments = anFirst(p.args, "{}")
		m.ToolCalls = append(m.ToolCalls, c)
	}
	// OpenAI's content is null beside tool calls or a refusal and a string
	// otherwise, even an empty one.
	if text := a.anJoin(anText); text != "" || (len(m.ToolCalls) == 0 && m.Refusal == nil) {
		m.Content = &text
	}
	out.Choices[0].FinishReason = a.stop.Chat()
	return anMarshal(out)
}

type anMessagesOut struct {
	ID           string              `json:"id"`
	Type         string              `json:"type"`
	Role         string              `json:"role"`
	Model        string              `json:"model"`
	Content      []anMessageOutBlock `json:"content"`
	StopReason   string              `json:"stop_reason"`
	StopSequence *string             `json:"stop_sequence"`
	StopDetails  *anRefusalDetails   `json:"stop_details"`
	Container    *struct{}           `json:"container"`
	Usage        json.RawMessage     `json:"usage"`
}

type anRefusalDetails struct {
	Type        string  `json:"type"`
	Category    *string `json:"category"`
	Explanation *string `json:"explanation"`
}

// anMessageOutBlock is one content block; its members are pointers so
// that each type writes exactly its own (thinking's empty signature, a
// text's empty citations are members the SDKs expect).
type anMessageOutBlock struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
}

func anWriteMessages(a *anAnswer) ([]byte, error) {
	out := anMessagesOut{
		ID:      "msg_" + a.base,
		Type:    "message",
		Role:    "assistant",
		Model:   a.model,
		Content: []anMessageOutBlock{},
		Usage:   anUsage(api.Messages, a.usage),
	}
	stop := a.stop
	if a.anHas(anRefusal) && (stop == StopEnd || stop == StopNone || stop == StopSequence) {
		// Messages says a refusal only by its stop reason.
		stop = StopFilter
	}
	tools := 0
	for i := range a.parts {
		p := &a.parts[i]
		switch p.kind {
		case anText, anRefusal:
			// Adjacent texts are one block, as Anthropic writes them.
			if n := len(out.Content); n > 0 && out.Content[n-1].Type == "text" {
				t := *out.Content[n-1].Text + p.text
				out.Content[n-1].Text = &t
				continue
			}
			out.Content = append(out.Content, anMessageOutBlock{Type: "text", Text: &p.text})
		case anTool:
			out.Content = append(out.Content, anMessageOutBlock{
				Type:  "tool_use",
				ID:    anToolID(api.Messages, p.id, a.base, tools),
				Name:  p.name,
				Input: anObjectArgs(p.args),
			})
			tools++
		case anThinking:
			// A thinking block from an API without signatures carries an
			// empty one: a client shows it and may replay it, and the SDKs
			// expect the member. Anthropic refuses an unsigned thinking
			// block replayed to it, so a request translated toward
			// Messages has to drop those (an OpenAI engine never needed
			// them back).
			out.Content = append(out.Content, anMessageOutBlock{Type: "thinking", Thinking: &p.text, Signature: &p.sig})
		case anRedacted:
			out.Content = append(out.Content, anMessageOutBlock{Type: "redacted_thinking", Data: &p.sig})
		}
	}
	out.StopReason = stop.Messages()
	if stop == StopSequence && a.seq != "" {
		out.StopSequence = &a.seq
	}
	if stop == StopFilter {
		out.StopDetails = &anRefusalDetails{Type: "refusal"}
	}
	return anMarshal(out)
}

// anResponsesOut is a Responses answer with the members openai-go's
// responses.Response reads as required; the request's own settings
// (temperature, tools…) are not known here and are written as their
// defaults or null.
type anResponsesOut struct {
	ID                 string            `json:"id"`
	Object             string            `json:"object"`
	CreatedAt          int64             `json:"created_at"`
	Status             string            `json:"status"`
	Background         bool              `json:"background"`
	Error              *struct{}         `json:"error"`
	IncompleteDetails  *anIncomplete     `json:"incomplete_details"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int              `json:"max_output_tokens"`
	Model              string            `json:"model"`
	Output             []any             `json:"output"`
	ParallelToolCalls  bool              `json:"parallel_tool_calls"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Reasoning          map[string]any    `json:"reasoning"`
	Store              bool              `json:"store"`
	Temperature        *float64          `json:"temperature"`
	Text               map[string]any    `json:"text"`
	ToolChoice         string            `json:"tool_choice"`
	Tools              []json.RawMessage `json:"tools"`
	TopP               *float64          `json:"top_p"`
	Truncation         string            `json:"truncation"`
	Usage              json.RawMessage   `json:"usage"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
}

type anIncomplete struct {
	Reason string `json:"reason"`
}

type anOutMessage struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type anOutText struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

type anOutRefusal struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type anOutFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

type anOutCustomCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Input     string `json:"input"`
}

type anOutReasoning struct {
	Type             string          `json:"type"`
	ID               string          `json:"id"`
	Summary          []anSummaryText `json:"summary"`
	EncryptedContent *string         `json:"encrypted_content,omitempty"`
}

type anSummaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func anWriteResponses(a *anAnswer, o AnswerOptions) ([]byte, error) {
	status, reason := a.stop.Responses()
	out := anResponsesOut{
		ID:                "resp_" + a.base,
		Object:            "response",
		CreatedAt:         a.created,
		Status:            status,
		Model:             a.model,
		Output:            []any{},
		ParallelToolCalls: true,
		Reasoning:         map[string]any{"effort": nil, "summary": nil},
		Text:              map[string]any{"format": map[string]string{"type": "text"}},
		ToolChoice:        "auto",
		Tools:             []json.RawMessage{},
		Truncation:        "disabled",
		Usage:             anUsage(api.Responses, a.usage),
		Metadata:          map[string]string{},
	}
	if reason != "" {
		out.IncompleteDetails = &anIncomplete{Reason: reason}
	}
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	var msg *anOutMessage // the message item texts go into until a non-text item
	tools := 0
	for i := range a.parts {
		p := &a.parts[i]
		n := strconv.Itoa(len(out.Output))
		switch p.kind {
		case anText, anRefusal:
			if msg == nil {
				msg = &anOutMessage{Type: "message", ID: "msg_" + a.base + "_" + n, Status: itemStatus, Role: "assistant"}
				out.Output = append(out.Output, msg)
			}
			if p.kind == anRefusal {
				msg.Content = append(msg.Content, anOutRefusal{Type: "refusal", Refusal: p.text})
			} else {
				msg.Content = append(msg.Content, anOutText{Type: "output_text", Text: p.text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}})
			}
			continue
		case anTool:
			id := anToolID(api.Responses, p.id, a.base, tools)
			tools++
			// The item's id is its own, fc_…; the call's id is call_id
			// (docs/translation-facts.md#t6).
			// A namespace's tool went upstream under its flattened name;
			// Codex runs the call only as {namespace, name}.
			namespace, name := "", p.name
			if nn, ok := o.Namespaces[p.name]; ok {
				namespace, name = nn[0], nn[1]
			}
			if slices.Contains(o.CustomTools, p.name) {
				out.Output = append(out.Output, anOutCustomCall{Type: "custom_tool_call", ID: "ctc_" + anSanitizeID(id), CallID: id, Name: name, Namespace: namespace, Input: anCustomInput(p.args)})
			} else {
				out.Output = append(out.Output, anOutFunctionCall{Type: "function_call", ID: "fc_" + anSanitizeID(id), CallID: id, Name: name, Namespace: namespace, Arguments: anFirst(p.args, "{}"), Status: "completed"})
			}
		case anThinking, anRedacted:
			r := anOutReasoning{Type: "reasoning", ID: "rs_" + a.base + "_" + n, Summary: []anSummaryText{}}
			if p.kind == anThinking {
				r.Summary = append(r.Summary, anSummaryText{Type: "summary_text", Text: p.text})
			}
			// Messages' signature (or redacted data) rides in the one
			// opaque member Responses has, so that a Responses client's
			// next turn gives it back to the request translator.
			if p.sig != "" {
				r.EncryptedContent = &p.sig
			}
			out.Output = append(out.Output, r)
		}
		msg = nil
	}
	return anMarshal(out)
}

// anCustomInput is a custom tool's freeform input from the arguments of the
// function tool it went upstream as: its "input" string, or the arguments
// themselves when the model did not keep to that shape.
func anCustomInput(args string) string {
	var in struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &in) == nil && in.Input != nil {
		return *in.Input
	}
	return strings.TrimSpace(args)
}
