package translate

import (
	"encoding/json"
	"strconv"
)

// Reading an Anthropic Messages request.

type rqMsgIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

type rqMsgBlockIn struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
		URL       string `json:"url"`
	} `json:"source"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

type rqMsgToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

type rqMsgFormatIn struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// rqMsgOnly are Messages' members the OpenAI APIs have no word for:
// dropped, listed. cache_control is not among them: caching is automatic on
// OpenAI's side, so it is dropped silently wherever it sits.
var rqMsgOnly = []string{"top_k", "context_management", "container", "mcp_servers"}

var rqMsgKnown = rqSet(append([]string{"model", "messages", "system", "max_tokens", "temperature",
	"top_p", "stop_sequences", "stream", "metadata", "tools", "tool_choice", "thinking",
	"output_config", "output_format", "service_tier"}, rqMsgOnly...))

func rqReadMessages(r *rqRequest, top map[string]json.RawMessage) error {
	r.model = top["model"]
	if raw := top["system"]; !rqIsNull(raw) {
		parts, err := rqReadMsgContent(r, "system", raw, false)
		if err != nil {
			return err
		}
		r.messages = append(r.messages, rqMessage{role: rqSystem, parts: parts, member: "system"})
	}
	var msgs []rqMsgIn
	if _, err := rqField(top, "messages", &msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		member := "messages[" + strconv.Itoa(i) + "]"
		parts, err := rqReadMsgContent(r, member, m.Content, true)
		if err != nil {
			return err
		}
		switch m.Role {
		case "user":
			r.messages = append(r.messages, rqMessage{role: rqUser, parts: parts, member: member})
		case "assistant":
			r.messages = append(r.messages, rqMessage{role: rqAssistant, parts: parts, member: member})
		case "system":
			// Claude Code puts a role "system" message inside messages[]
			// although Messages has none; it is instructions all the same.
			r.messages = append(r.messages, rqMessage{role: rqSystem, parts: parts, member: member})
		default:
			return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(m.Role)}
		}
	}
	if err := rqReadMsgTools(r, top); err != nil {
		return err
	}
	if err := rqReadMsgOptions(r, top); err != nil {
		return err
	}
	for _, k := range rqMsgOnly {
		if raw, ok := top[k]; ok && !rqIsNull(raw) {
			r.drops.add(k, k)
		}
	}
	rqUnknown(r, top, rqMsgKnown)
	return nil
}

// rqReadMsgContent reads a string or an array of content blocks; nested is
// false for system, whose blocks are text only.
func rqReadMsgContent(r *rqRequest, member string, raw json.RawMessage, nested bool) ([]rqPart, error) {
	if rqIsNull(raw) {
		return nil, nil
	}
	if s, ok := rqString(raw); ok {
		return []rqPart{{kind: rqText, text: s}}, nil
	}
	var blocks []rqMsgBlockIn
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, &Error{Member: member, Reason: "neither a string nor an array of content blocks"}
	}
	var parts []rqPart
	for j, b := range blocks {
		bm := member + "[" + strconv.Itoa(j) + "]"
		if nested {
			bm = member + ".content[" + strconv.Itoa(j) + "]"
		}
		switch b.Type {
		case "text":
			parts = append(parts, rqPart{kind: rqText, text: b.Text})
		case "image":
			if p, ok := rqMsgImage(b); ok {
				parts = append(parts, p)
			} else {
				r.drops.add("image source", bm+" (image)")
			}
		case "tool_use":
			parts = append(parts, rqPart{kind: rqCall, id: b.ID, name: b.Name, args: rqArgsText(b.Input), member: bm})
		case "tool_result":
			p := rqPart{kind: rqResult, id: b.ToolUseID, isError: b.IsError, member: bm}
			var err error
			if p.content, err = rqReadMsgContent(r, bm+".content", b.Content, false); err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "thinking":
			parts = append(parts, rqPart{kind: rqThinking, text: b.Thinking, signature: b.Signature, member: bm})
		case "redacted_thinking":
			parts = append(parts, rqPart{kind: rqRedacted, text: b.Data, member: bm})
		default:
			// documents, server tools' calls and results, search results:
			// nothing in OpenAI's APIs carries them.
			r.drops.add("block "+b.Type, bm+" ("+b.Type+")")
		}
	}
	return parts, nil
}

// rqMsgImage reads an image block's source as a URL: base64 data as a data:
// URI, which is what Chat and Responses carry inline images as.
func rqMsgImage(b rqMsgBlockIn) (rqPart, bool) {
	if b.Source == nil {
		return rqPart{}, false
	}
	switch b.Source.Type {
	case "base64":
		return rqPart{kind: rqImage, url: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}, true
	case "url":
		return rqPart{kind: rqImage, url: b.Source.URL}, true
	}
	return rqPart{}, false
}

func rqReadMsgTools(r *rqRequest, top map[string]json.RawMessage) error {
	var tools []json.RawMessage
	if _, err := rqField(top, "tools", &tools); err != nil {
		return err
	}
	for i, raw := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		var t rqMsgToolIn
		if err := json.Unmarshal(raw, &t); err != nil {
			return &Error{Member: member, Reason: "not a valid tool: " + err.Error()}
		}
		if t.Type != "" && t.Type != "custom" {
			// A server tool (web_search_20250305, bash_20250124,
			// text_editor_…): Anthropic runs or defines it; an OpenAI
			// engine has no such tool. Claude Code sends them every turn.
			r.drops.add("tool "+t.Type, member+" ("+t.Type+")")
			continue
		}
		r.tools = append(r.tools, rqTool{name: t.Name, description: t.Description,
			params: rqNonNull(t.InputSchema), strict: t.Strict})
	}
	var c struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	ok, err := rqField(top, "tool_choice", &c)
	if err != nil || !ok {
		return err
	}
	r.choiceMember = "tool_choice"
	switch c.Type {
	case "auto", "none":
		r.choice = rqChoice(c.Type)
	case "any":
		r.choice = rqChoiceRequired
	case "tool":
		r.choice, r.choiceName = rqChoiceNamed, c.Name
	default:
		return &Error{Member: "tool_choice.type", Reason: "unknown tool_choice " + strconv.Quote(c.Type)}
	}
	if c.DisableParallelToolUse != nil {
		p := !*c.DisableParallelToolUse
		r.parallel = &p
	}
	return nil
}

func rqReadMsgOptions(r *rqRequest, top map[string]json.RawMessage) error {
	var maxTokens int
	if ok, err := rqField(top, "max_tokens", &maxTokens); err != nil {
		return err
	} else if ok {
		r.maxTokens = &maxTokens
	}
	var meta struct {
		UserID string `json:"user_id"`
	}
	fields := []struct {
		key string
		dst any
	}{
		{"temperature", &r.temperature}, {"top_p", &r.topP}, {"stop_sequences", &r.stop},
		{"stream", &r.stream}, {"metadata", &meta},
	}
	for _, f := range fields {
		if _, err := rqField(top, f.key, f.dst); err != nil {
			return err
		}
	}
	r.user = meta.UserID
	var thinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}
	if _, err := rqField(top, "thinking", &thinking); err != nil {
		return err
	}
	var oc struct {
		Effort string         `json:"effort"`
		Format *rqMsgFormatIn `json:"format"`
	}
	if _, err := rqField(top, "output_config", &oc); err != nil {
		return err
	}
	switch {
	case oc.Effort != "":
		r.effort, r.effortMember = oc.Effort, "output_config.effort"
		if oc.Effort == "max" {
			// OpenAI's engines know no "max"; high is their most.
			r.effort = "high"
		}
	case thinking.Type == "enabled":
		r.effort, r.effortMember = rqBudgetEffort(thinking.BudgetTokens), "thinking"
	case thinking.Type == "adaptive":
		// Adaptive thinking without an effort leaves it to the model, which
		// OpenAI's engines do as well when asked nothing.
		r.drops.add("thinking", "thinking")
	}
	f := oc.Format
	member := "output_config.format"
	if f == nil {
		var old rqMsgFormatIn
		if ok, err := rqField(top, "output_format", &old); err != nil {
			return err
		} else if ok {
			f, member = &old, "output_format"
		}
	}
	if f != nil && f.Type == "json_schema" {
		r.format = &rqFormat{kind: "json_schema", schema: rqNonNull(f.Schema), member: member}
	}
	var tier string
	if _, err := rqField(top, "service_tier", &tier); err != nil {
		return err
	} else if tier != "" && tier != "auto" {
		r.drops.add("service_tier", "service_tier")
	}
	return nil
}
