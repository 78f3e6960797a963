package translate

import (
	"encoding/json"
	"slices"
)

// Writing a Chat Completions request.

type rqChatOut struct {
	Model               json.RawMessage   `json:"model,omitempty"`
	Messages            []rqChatMsgOut    `json:"messages"`
	Tools               []rqChatToolOut   `json:"tools,omitempty"`
	ToolChoice          any               `json:"tool_choice,omitempty"`
	Parallel            *bool             `json:"parallel_tool_calls,omitempty"`
	MaxTokens           *int              `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int              `json:"max_completion_tokens,omitempty"`
	Temperature         *float64          `json:"temperature,omitempty"`
	TopP                *float64          `json:"top_p,omitempty"`
	Stop                []string          `json:"stop,omitempty"`
	ResponseFormat      any               `json:"response_format,omitempty"`
	ReasoningEffort     string            `json:"reasoning_effort,omitempty"`
	User                string            `json:"user,omitempty"`
	Metadata            json.RawMessage   `json:"metadata,omitempty"`
	Stream              bool              `json:"stream,omitempty"`
	StreamOptions       *rqChatStreamOpts `json:"stream_options,omitempty"`
	N                   int               `json:"n,omitempty"`
}

type rqChatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

type rqChatMsgOut struct {
	Role       string          `json:"role"`
	Content    any             `json:"content"`
	ToolCalls  []rqChatCallOut `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
}

type rqChatCallOut struct {
	ID       string         `json:"id"`
	Type     string         `json:"type"`
	Function rqChatFuncCall `json:"function"`
}

type rqChatFuncCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type rqChatPartOut struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text,omitempty"`
	ImageURL *rqChatImageOut `json:"image_url,omitempty"`
}

type rqChatImageOut struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

type rqChatToolOut struct {
	Type     string         `json:"type"`
	Function rqChatFuncDecl `json:"function"`
}

type rqChatFuncDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type rqChatFormatOut struct {
	Type       string           `json:"type"`
	JSONSchema *rqChatSchemaOut `json:"json_schema,omitempty"`
}

type rqChatSchemaOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

func rqWriteChat(r *rqRequest) ([]byte, error) {
	out := rqChatOut{Model: r.model, Messages: []rqChatMsgOut{}, Temperature: r.temperature, TopP: r.topP,
		Stop: r.stop, ReasoningEffort: r.effort, User: r.user, Metadata: r.metadata, Stream: r.stream}
	for _, m := range r.messages {
		out.Messages = rqChatMessages(r, out.Messages, m)
	}
	for _, t := range r.tools {
		out.Tools = append(out.Tools, rqChatToolOut{Type: "function", Function: rqChatFuncDecl{
			Name: t.name, Description: t.description, Parameters: t.params, Strict: t.strict}})
	}
	if len(out.Tools) > 0 {
		// OpenAI refuses parallel_tool_calls without tools.
		out.Parallel = r.parallel
	}
	switch r.choice {
	case rqChoiceAuto, rqChoiceNone, rqChoiceRequired:
		out.ToolChoice = string(r.choice)
	case rqChoiceNamed:
		out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": r.choiceName}}
	}
	// max_completion_tokens is what OpenAI's reasoning models accept and
	// max_tokens what every engine does (llama.cpp, vLLM, Ollama, OpenAI's
	// other models): a request that asks for reasoning gets the first.
	if r.effort != "" {
		out.MaxCompletionTokens = r.maxTokens
	} else {
		out.MaxTokens = r.maxTokens
	}
	if r.stream {
		// Without include_usage a Chat stream reports no usage at all (T10).
		out.StreamOptions = &rqChatStreamOpts{IncludeUsage: true}
	}
	if f := r.format; f != nil {
		if f.kind == "json_object" {
			out.ResponseFormat = rqChatFormatOut{Type: "json_object"}
		} else {
			out.ResponseFormat = rqChatFormatOut{Type: "json_schema", JSONSchema: &rqChatSchemaOut{
				Name: rqFormatName(f), Description: f.description, Schema: f.schema, Strict: f.strict}}
		}
	}
	if r.n > 0 {
		out.N = r.n
	}
	b, err := rqMarshal(out)
	if err != nil {
		return nil, err
	}
	return rqWithExtra(b, r.openai), nil
}

// rqFormatName is a schema's name, which Chat and Responses require and
// Messages does not have.
func rqFormatName(f *rqFormat) string {
	if f.name != "" {
		return f.name
	}
	return "response"
}

// rqWithExtra appends members to the JSON object obj, in key order.
func rqWithExtra(obj []byte, extra map[string]json.RawMessage) []byte {
	if len(extra) == 0 {
		return obj
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := obj[:len(obj)-1]
	for _, k := range keys {
		if len(b) > 1 {
			b = append(b, ',')
		}
		kb, _ := rqMarshal(k)
		b = append(append(append(b, kb...), ':'), rqCompact(extra[k])...)
	}
	return append(b, '}')
}

// rqChatMessages appends m as Chat messages: a turn's tool results become
// role tool messages ahead of the user's own words, and images a tool
// returned (Chat's tool messages carry text only) move into the user
// message after them.
func rqChatMessages(r *rqRequest, out []rqChatMsgOut, m rqMessage) []rqChatMsgOut {
	switch m.role {
	case rqSystem:
		if text := rqTexts(m.parts, "\n\n"); text != "" {
			out = append(out, rqChatMsgOut{Role: "system", Content: text})
		}
	case rqAssistant:
		msg := rqChatMsgOut{Role: "assistant"}
		for _, p := range m.parts {
			switch p.kind {
			case rqCall:
				msg.ToolCalls = append(msg.ToolCalls, rqChatCallOut{ID: p.id, Type: "function",
					Function: rqChatFuncCall{Name: p.name, Arguments: p.args}})
			case rqThinking, rqRedacted:
				// Reasoning of another API's model is not Chat history: it
				// has no member for it, and its signature is Messages' only.
				r.drops.add("thinking", p.member+" (thinking)")
			}
		}
		if text := rqTexts(m.parts, ""); text != "" {
			msg.Content = text
		}
		if msg.Content != nil || len(msg.ToolCalls) > 0 {
			out = append(out, msg)
		}
	case rqUser:
		var rest []rqPart
		for _, p := range m.parts {
			if p.kind != rqResult {
				rest = append(rest, p)
				continue
			}
			out = append(out, rqChatMsgOut{Role: "tool", ToolCallID: p.id, Content: rqResultText(p)})
			for _, c := range p.content {
				if c.kind == rqImage {
					rest = append(rest, c)
				}
			}
		}
		if content := rqChatUserContent(rest); content != nil {
			out = append(out, rqChatMsgOut{Role: "user", Content: content})
		}
	}
	return out
}

// rqResultText is a tool result's text. Chat and Responses have no is_error:
// an error's text is prefixed "Error: ", so the model still reads that the
// call failed.
func rqResultText(p rqPart) string {
	text := rqTexts(p.content, "\n")
	if p.isError {
		return "Error: " + text
	}
	return text
}

// rqChatUserContent is a user message's content: a string for text alone,
// else an array of parts; nil for nothing.
func rqChatUserContent(parts []rqPart) any {
	if len(parts) == 1 && parts[0].kind == rqText {
		return parts[0].text
	}
	var out []rqChatPartOut
	for _, p := range parts {
		switch p.kind {
		case rqText:
			out = append(out, rqChatPartOut{Type: "text", Text: &p.text})
		case rqImage:
			out = append(out, rqChatPartOut{Type: "image_url", ImageURL: &rqChatImageOut{URL: p.url, Detail: p.detail}})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
