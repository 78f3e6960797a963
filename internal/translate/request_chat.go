package translate

import (
	"encoding/json"
	"strconv"
)

// Reading a Chat Completions request.

type rqChatMsgIn struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []rqChatCallIn  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent *string         `json:"reasoning_content"`
}

type rqChatCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type rqChatPartIn struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

type rqChatToolIn struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

type rqChatFormatIn struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// rqChatShared are Chat's members Responses has too, with the same meaning.
var rqChatShared = []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs", "verbosity"}

// rqChatOnly are Chat's members neither other API has: dropped, listed.
var rqChatOnly = []string{"logprobs", "seed", "frequency_penalty", "presence_penalty", "logit_bias",
	"audio", "modalities", "prediction", "web_search_options", "functions", "function_call"}

// rqChatKnown are the members the Chat reader reads (or drops on purpose).
var rqChatKnown = rqSet(append(append([]string{"model", "messages", "tools", "tool_choice",
	"parallel_tool_calls", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
	"response_format", "reasoning_effort", "user", "metadata", "stream", "stream_options", "n",
	"store"}, rqChatShared...), rqChatOnly...))

func rqSet(keys []string) map[string]bool {
	m := make(map[string]bool, len(keys))
	for _, k := range keys {
		m[k] = true
	}
	return m
}

func rqReadChat(r *rqRequest, top map[string]json.RawMessage) error {
	r.model = top["model"]
	var msgs []json.RawMessage
	if _, err := rqField(top, "messages", &msgs); err != nil {
		return err
	}
	for i, raw := range msgs {
		if err := rqReadChatMessage(r, i, raw); err != nil {
			return err
		}
	}
	if err := rqReadChatTools(r, top); err != nil {
		return err
	}
	if err := rqReadChatOptions(r, top); err != nil {
		return err
	}
	for _, k := range rqChatOnly {
		if raw, ok := top[k]; ok && !rqIsNull(raw) && string(raw) != "false" {
			r.drops.add(k, k)
		}
	}
	rqUnknown(r, top, rqChatKnown)
	return nil
}

func rqReadChatMessage(r *rqRequest, i int, raw json.RawMessage) error {
	member := "messages[" + strconv.Itoa(i) + "]"
	var m rqChatMsgIn
	if err := json.Unmarshal(raw, &m); err != nil {
		return &Error{Member: member, Reason: "not a valid message: " + err.Error()}
	}
	parts, err := rqReadChatContent(r, member, m.Content)
	if err != nil {
		return err
	}
	switch m.Role {
	case "system", "developer":
		r.messages = append(r.messages, rqMessage{role: rqSystem, parts: parts, member: member})
	case "user":
		r.messages = append(r.messages, rqMessage{role: rqUser, parts: parts, member: member})
	case "assistant":
		msg := rqMessage{role: rqAssistant, member: member}
		if m.ReasoningContent != nil && *m.ReasoningContent != "" {
			msg.parts = append(msg.parts, rqPart{kind: rqThinking, text: *m.ReasoningContent, member: member + ".reasoning_content"})
		}
		msg.parts = append(msg.parts, parts...)
		for j, c := range m.ToolCalls {
			msg.parts = append(msg.parts, rqPart{kind: rqCall, id: c.ID, name: c.Function.Name,
				args: rqArgsText(c.Function.Arguments), member: member + ".tool_calls[" + strconv.Itoa(j) + "]"})
		}
		r.messages = append(r.messages, msg)
	case "tool":
		r.addResult(rqPart{kind: rqResult, id: m.ToolCallID, content: parts, member: member}, member)
	default:
		return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(m.Role)}
	}
	return nil
}

// rqArgsText is a tool call's arguments as a JSON text: Chat sends a string,
// a few clients an object.
func rqArgsText(raw json.RawMessage) string {
	if s, ok := rqString(raw); ok {
		return s
	}
	if rqIsNull(raw) {
		return ""
	}
	return string(rqCompact(raw))
}

// rqReadChatContent reads a Chat message's content: a string or an array of
// parts (text, image_url; refusal read as text).
func rqReadChatContent(r *rqRequest, member string, raw json.RawMessage) ([]rqPart, error) {
	if rqIsNull(raw) {
		return nil, nil
	}
	if s, ok := rqString(raw); ok {
		return []rqPart{{kind: rqText, text: s}}, nil
	}
	var in []rqChatPartIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &Error{Member: member + ".content", Reason: "neither a string nor an array of parts"}
	}
	var parts []rqPart
	for j, p := range in {
		pm := member + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			parts = append(parts, rqPart{kind: rqText, text: p.Text})
		case "refusal":
			parts = append(parts, rqPart{kind: rqText, text: p.Refusal})
		case "image_url":
			url, detail := rqChatImageURL(p.ImageURL)
			parts = append(parts, rqPart{kind: rqImage, url: url, detail: detail, member: pm})
		default:
			r.drops.add("part "+p.Type, pm+" ("+p.Type+")")
		}
	}
	return parts, nil
}

// rqChatImageURL reads image_url: {url, detail}, or a bare string some
// clients send.
func rqChatImageURL(raw json.RawMessage) (url, detail string) {
	if s, ok := rqString(raw); ok {
		return s, ""
	}
	var v struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.URL, v.Detail
}

func rqReadChatTools(r *rqRequest, top map[string]json.RawMessage) error {
	var tools []json.RawMessage
	if _, err := rqField(top, "tools", &tools); err != nil {
		return err
	}
	for i, raw := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		var t rqChatToolIn
		if err := json.Unmarshal(raw, &t); err != nil {
			return &Error{Member: member, Reason: "not a valid tool: " + err.Error()}
		}
		if t.Type != "function" && t.Type != "" {
			r.drops.add("tool "+t.Type, member+" ("+t.Type+")")
			continue
		}
		r.tools = append(r.tools, rqTool{name: t.Function.Name, description: t.Function.Description,
			params: rqNonNull(t.Function.Parameters), strict: t.Function.Strict})
	}
	if raw, ok := top["tool_choice"]; ok && !rqIsNull(raw) {
		r.choiceMember = "tool_choice"
		if s, ok := rqString(raw); ok {
			r.choice = rqChoice(s)
			if s != "auto" && s != "none" && s != "required" {
				return &Error{Member: "tool_choice", Reason: "unknown tool_choice " + strconv.Quote(s)}
			}
		} else {
			var c struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			_ = json.Unmarshal(raw, &c)
			if c.Type != "function" || c.Function.Name == "" {
				r.drops.add("tool_choice", "tool_choice")
			} else {
				r.choice, r.choiceName = rqChoiceNamed, c.Function.Name
			}
		}
	}
	_, err := rqField(top, "parallel_tool_calls", &r.parallel)
	return err
}

func rqNonNull(raw json.RawMessage) json.RawMessage {
	if rqIsNull(raw) {
		return nil
	}
	return raw
}

func rqReadChatOptions(r *rqRequest, top map[string]json.RawMessage) error {
	fields := []struct {
		key string
		dst any
	}{
		{"max_tokens", &r.maxTokens}, {"max_completion_tokens", &r.maxTokens},
		{"temperature", &r.temperature}, {"top_p", &r.topP},
		{"reasoning_effort", &r.effort}, {"user", &r.user}, {"stream", &r.stream}, {"n", &r.n},
	}
	for _, f := range fields {
		if _, err := rqField(top, f.key, f.dst); err != nil {
			return err
		}
	}
	if r.effort != "" {
		r.effortMember = "reasoning_effort"
	}
	if raw := top["metadata"]; !rqIsNull(raw) {
		r.metadata = raw
	}
	if raw := top["stop"]; !rqIsNull(raw) {
		if s, ok := rqString(raw); ok {
			r.stop = []string{s}
		} else if err := json.Unmarshal(raw, &r.stop); err != nil {
			return &Error{Member: "stop", Reason: "neither a string nor an array of strings"}
		}
	}
	var f rqChatFormatIn
	if ok, err := rqField(top, "response_format", &f); err != nil {
		return err
	} else if ok && (f.Type == "json_schema" || f.Type == "json_object") {
		r.format = &rqFormat{kind: f.Type, name: f.JSONSchema.Name, description: f.JSONSchema.Description,
			schema: rqNonNull(f.JSONSchema.Schema), strict: f.JSONSchema.Strict, member: "response_format"}
	}
	for _, k := range rqChatShared {
		if raw, ok := top[k]; ok && !rqIsNull(raw) {
			if r.openai == nil {
				r.openai = map[string]json.RawMessage{}
			}
			r.openai[k] = raw
		}
	}
	return nil
}
