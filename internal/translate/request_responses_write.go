package translate

import (
	"encoding/json"
	"github.com/llmgateway/caddy-llm-gateway/api"
	"strings"
)

// Writing an OpenAI Responses request.

type rqRespOut struct {
	Model           json.RawMessage `json:"model,omitempty"`
	Instructions    string          `json:"instructions,omitempty"`
	Input           []any           `json:"input"`
	Tools           []rqRespToolOut `json:"tools,omitempty"`
	ToolChoice      any             `json:"tool_choice,omitempty"`
	Parallel        *bool           `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens *int            `json:"max_output_tokens,omitempty"`
	Temperature     *float64        `json:"temperature,omitempty"`
	TopP            *float64        `json:"top_p,omitempty"`
	Text            *rqRespTextOut  `json:"text,omitempty"`
	Reasoning       *rqRespEffort   `json:"reasoning,omitempty"`
	User            string          `json:"user,omitempty"`
	Metadata        json.RawMessage `json:"metadata,omitempty"`
	Stream          bool            `json:"stream,omitempty"`
	Store           bool            `json:"store"`
}

type rqRespToolOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

type rqRespTextOut struct {
	Format    *rqRespFormatOut `json:"format,omitempty"`
	Verbosity json.RawMessage  `json:"verbosity,omitempty"`
}

type rqRespFormatOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

type rqRespEffort struct {
	Effort string `json:"effort"`
}

type rqRespMessageOut struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type rqRespPartOut struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitempty"`
	ImageURL string  `json:"image_url,omitempty"`
	Detail   string  `json:"detail,omitempty"`
}

// rqRespCallOut has no "id": Responses wants an item id to start with fc_,
// and pairs a call with its output by call_id alone (T6).
type rqRespCallOut struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

type rqRespOutputOut struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

func rqWriteResponses(r *rqRequest) ([]byte, error) {
	if r.n > 1 {
		return nil, &Error{Member: "n", Reason: "Responses answers one choice"}
	}
	// store false: a Chat or Messages client expects nothing kept at the
	// engine (Responses stores by default).
	out := rqRespOut{Model: r.model, Input: []any{}, MaxOutputTokens: r.maxTokens, Temperature: r.temperature,
		TopP: r.topP, User: r.user, Metadata: r.metadata, Stream: r.stream}
	var instructions []string
	leading := true
	for _, m := range r.messages {
		if m.role == rqSystem && leading {
			if text := rqTexts(m.parts, "\n\n"); text != "" {
				instructions = append(instructions, text)
			}
			continue
		}
		leading = false
		out.Input = rqRespItems(r, out.Input, m)
	}
	out.Instructions = strings.Join(instructions, "\n\n")
	for _, t := range r.tools {
		params := t.params
		if params == nil {
			params = rqEmptySchema
		}
		// Responses makes a function strict unless told otherwise, and a
		// strict schema must list every property as required: a tool
		// another API declared is strict only if it said so.
		out.Tools = append(out.Tools, rqRespToolOut{Type: "function", Name: t.name, Description: t.description,
			Parameters: params, Strict: t.strict != nil && *t.strict})
	}
	if len(out.Tools) > 0 {
		out.Parallel = r.parallel
	}
	switch r.choice {
	case rqChoiceAuto, rqChoiceNone, rqChoiceRequired:
		out.ToolChoice = string(r.choice)
	case rqChoiceNamed:
		out.ToolChoice = map[string]string{"type": "function", "name": r.choiceName}
	}
	if r.effort != "" {
		out.Reasoning = &rqRespEffort{Effort: r.effort}
	}
	extra := map[string]json.RawMessage{}
	for k, v := range r.openai {
		if k == "verbosity" {
			out.Text = &rqRespTextOut{Verbosity: v}
		} else {
			extra[k] = v
		}
	}
	if f := r.format; f != nil {
		if out.Text == nil {
			out.Text = &rqRespTextOut{}
		}
		if f.kind == "json_object" {
			out.Text.Format = &rqRespFormatOut{Type: "json_object"}
		} else {
			out.Text.Format = &rqRespFormatOut{Type: "json_schema", Name: rqFormatName(f),
				Description: f.description, Schema: f.schema, Strict: f.strict}
		}
	}
	if len(r.stop) > 0 {
		member := "stop"
		if r.from == api.Messages {
			member = "stop_sequences"
		}
		r.drops.add("stop", member)
	}
	b, err := rqMarshal(out)
	if err != nil {
		return nil, err
	}
	return rqWithExtra(b, extra), nil
}

// rqRespItems appends m as input items: a user turn's tool results as
// function_call_output items before its message, an assistant turn's text
// and calls in their order.
func rqRespItems(r *rqRequest, items []any, m rqMessage) []any {
	switch m.role {
	case rqSystem:
		if text := rqTexts(m.parts, "\n\n"); text != "" {
			items = append(items, rqRespMessageOut{Type: "message", Role: "system", Content: text})
		}
	case rqAssistant:
		var text strings.Builder
		flush := func() {
			if text.Len() > 0 {
				items = append(items, rqRespMessageOut{Type: "message", Role: "assistant", Content: text.String()})
				text.Reset()
			}
		}
		for _, p := range m.parts {
			switch p.kind {
			case rqText:
				text.WriteString(p.text)
			case rqCall:
				flush()
				args := p.args
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				items = append(items, rqRespCallOut{Type: "function_call", CallID: p.id, Name: p.name, Arguments: args})
			case rqThinking, rqRedacted:
				// Responses replays reasoning only as its own encrypted items.
				r.drops.add("thinking", p.member+" (thinking)")
			}
		}
		flush()
	case rqUser:
		var rest []rqRespPartOut
		for _, p := range m.parts {
			switch p.kind {
			case rqResult:
				items = append(items, rqRespOutputOut{Type: "function_call_output", CallID: p.id, Output: rqRespOutput(p)})
			case rqText:
				rest = append(rest, rqRespPartOut{Type: "input_text", Text: &p.text})
			case rqImage:
				rest = append(rest, rqRespPartOut{Type: "input_image", ImageURL: p.url, Detail: p.detail})
			}
		}
		if len(rest) > 0 {
			items = append(items, rqRespMessageOut{Type: "message", Role: "user", Content: rest})
		}
	}
	return items
}

// rqRespOutput is a tool result's output: its text, or input_text and
// input_image parts when the tool returned images.
func rqRespOutput(p rqPart) any {
	images := false
	for _, c := range p.content {
		images = images || c.kind == rqImage
	}
	if !images {
		return rqResultText(p)
	}
	var parts []rqRespPartOut
	if p.isError {
		e := "Error:"
		parts = append(parts, rqRespPartOut{Type: "input_text", Text: &e})
	}
	for _, c := range p.content {
		switch c.kind {
		case rqText:
			parts = append(parts, rqRespPartOut{Type: "input_text", Text: &c.text})
		case rqImage:
			parts = append(parts, rqRespPartOut{Type: "input_image", ImageURL: c.url, Detail: c.detail})
		}
	}
	return parts
}

// CustomTools are the names of the custom tools (free-form input, such as
// Codex's apply_patch) a Responses request declares, as the functions
// Request wrote them as: an engine's call of one comes back as a function
// call whose arguments are {"input": "…"}, which the answer's translation
// turns into a custom_tool_call with that input. nil for the other APIs.
func CustomTools(from api.API, body []byte) []string {
	if from != api.Responses {
		return nil
	}
	var top struct {
		Tools []rqRespToolIn `json:"tools"`
	}
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	var names []string
	for _, t := range top.Tools {
		if t.Type == "custom" {
			names = append(names, t.Name)
		}
		if t.Type == "namespace" {
			for _, c := range t.Tools {
				if c.Type == "custom" {
					names = append(names, rqFlatName(t.Name, c.Name))
				}
			}
		}
	}
	return names
}

// NamespaceTools maps the function names Request gave the tools of a
// Responses request's namespaces (Codex's MCP servers) to their namespace
// and name: Codex runs a call only as {namespace, name}, so the answer's
// translation splits a call of a flattened name back. nil when there are
// none or from is not Responses.
func NamespaceTools(from api.API, body []byte) map[string][2]string {
	if from != api.Responses {
		return nil
	}
	var top struct {
		Tools []rqRespToolIn `json:"tools"`
	}
	if json.Unmarshal(body, &top) != nil {
		return nil
	}
	var m map[string][2]string
	for _, t := range top.Tools {
		if t.Type != "namespace" {
			continue
		}
		for _, c := range t.Tools {
			if c.Type != "function" && c.Type != "custom" {
				continue
			}
			if m == nil {
				m = map[string][2]string{}
			}
			m[rqFlatName(t.Name, c.Name)] = [2]string{t.Name, c.Name}
		}
	}
	return m
}
