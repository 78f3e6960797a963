package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Reading an OpenAI Responses request.

type rqRespItemIn struct {
	Type      string          `json:"type"`
	Role      string          `json:"role"`
	Content   json.RawMessage `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Namespace string          `json:"namespace"`
	Arguments json.RawMessage `json:"arguments"`
	Input     string          `json:"input"`
	Output    json.RawMessage `json:"output"`
}

type rqRespPartIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

type rqRespToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      *bool           `json:"strict"`
	Format      *struct {
		Type       string `json:"type"`
		Syntax     string `json:"syntax"`
		Definition string `json:"definition"`
	} `json:"format"`
	Tools []rqRespToolIn `json:"tools"` // a namespace's
}

// rqRespRefused are members that ask the engine for state the gateway does
// not keep (an earlier response, a conversation, a stored prompt, a queued
// answer): dropping them would answer a question the client did not ask.
var rqRespRefused = []string{"previous_response_id", "conversation", "prompt", "background"}

// rqRespShared are Responses' members Chat has too, with the same meaning.
var rqRespShared = []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs"}

var rqRespKnown = rqSet(append(append([]string{"model", "input", "instructions", "tools", "tool_choice",
	"parallel_tool_calls", "max_output_tokens", "temperature", "top_p", "text", "reasoning", "user",
	"metadata", "stream", "store", "include", "truncation", "max_tool_calls", "stream_options",
	"client_metadata", "prompt_cache_retention"}, rqRespShared...), rqRespRefused...))

func rqReadResponses(r *rqRequest, top map[string]json.RawMessage) error {
	r.model = top["model"]
	for _, k := range rqRespRefused {
		if raw, ok := top[k]; ok && !rqIsNull(raw) && string(raw) != "false" && string(raw) != `""` {
			return &Error{Member: k, Reason: "the gateway keeps no state between requests; send the whole conversation in input"}
		}
	}
	var instructions string
	if _, err := rqField(top, "instructions", &instructions); err != nil {
		return err
	}
	if instructions != "" {
		r.messages = append(r.messages, rqMessage{role: rqSystem, parts: []rqPart{{kind: rqText, text: instructions}}, member: "instructions"})
	}
	if raw := top["input"]; !rqIsNull(raw) {
		if s, ok := rqString(raw); ok {
			r.messages = append(r.messages, rqMessage{role: rqUser, parts: []rqPart{{kind: rqText, text: s}}, member: "input"})
		} else {
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				return &Error{Member: "input", Reason: "neither a string nor an array of items"}
			}
			for i, it := range items {
				if err := rqReadRespItem(r, i, it); err != nil {
					return err
				}
			}
		}
	}
	if err := rqReadRespTools(r, top); err != nil {
		return err
	}
	if err := rqReadRespOptions(r, top); err != nil {
		return err
	}
	rqUnknown(r, top, rqRespKnown)
	return nil
}

func rqReadRespItem(r *rqRequest, i int, raw json.RawMessage) error {
	member := "input[" + strconv.Itoa(i) + "]"
	var it rqRespItemIn
	if err := json.Unmarshal(raw, &it); err != nil {
		return &Error{Member: member, Reason: "not a valid input item: " + err.Error()}
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	switch it.Type {
	case "message":
		return rqReadRespMessage(r, member, it)
	case "function_call":
		r.addCall(rqPart{kind: rqCall, id: it.CallID, name: rqFlatName(it.Namespace, it.Name),
			args: rqArgsText(it.Arguments), member: member}, member)
	case "custom_tool_call":
		// A custom tool is a function with one string parameter, input
		// (rqCustomParams), toward the other APIs.
		args, _ := rqMarshal(map[string]string{"input": it.Input})
		r.addCall(rqPart{kind: rqCall, id: it.CallID, name: rqFlatName(it.Namespace, it.Name),
			args: string(args), member: member}, member)
	case "function_call_output", "custom_tool_call_output":
		content, err := rqReadRespContent(r, member+".output", it.Output)
		if err != nil {
			return err
		}
		r.addResult(rqPart{kind: rqResult, id: it.CallID, content: content, member: member}, member)
	case "item_reference":
		return &Error{Member: member, Reason: "an item_reference names a stored item; the gateway keeps none"}
	default:
		// reasoning (encrypted for OpenAI's models only), hosted tools'
		// calls (web_search_call, local_shell_call…): no other API's
		// engine can read them.
		r.drops.add("item "+it.Type, member+" ("+it.Type+")")
	}
	return nil
}

func rqReadRespMessage(r *rqRequest, member string, it rqRespItemIn) error {
	parts, err := rqReadRespContent(r, member+".content", it.Content)
	if err != nil {
		return err
	}
	switch it.Role {
	case "user":
		r.messages = append(r.messages, rqMessage{role: rqUser, parts: parts, member: member})
	case "assistant":
		r.messages = append(r.messages, rqMessage{role: rqAssistant, parts: parts, member: member})
	case "system", "developer":
		r.messages = append(r.messages, rqMessage{role: rqSystem, parts: parts, member: member})
	default:
		return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(it.Role)}
	}
	return nil
}

// rqReadRespContent reads a message's content or a tool output: a string or
// an array of parts (input_text, output_text, input_image).
func rqReadRespContent(r *rqRequest, member string, raw json.RawMessage) ([]rqPart, error) {
	if rqIsNull(raw) {
		return nil, nil
	}
	if s, ok := rqString(raw); ok {
		return []rqPart{{kind: rqText, text: s}}, nil
	}
	var in []rqRespPartIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &Error{Member: member, Reason: "neither a string nor an array of parts"}
	}
	var parts []rqPart
	for j, p := range in {
		pm := member + "[" + strconv.Itoa(j) + "]"
		switch {
		case p.Type == "input_text" || p.Type == "output_text" || p.Type == "text":
			parts = append(parts, rqPart{kind: rqText, text: p.Text})
		case p.Type == "refusal":
			parts = append(parts, rqPart{kind: rqText, text: p.Refusal})
		case p.Type == "input_image" && p.ImageURL != "":
			parts = append(parts, rqPart{kind: rqImage, url: p.ImageURL, detail: p.Detail, member: pm})
		default:
			// input_file, an image by file_id: stored at OpenAI, which no
			// other engine can fetch.
			r.drops.add("part "+p.Type, pm+" ("+p.Type+")")
		}
	}
	return parts, nil
}

// rqFlatName is the function name of a namespace's tool. Codex declares
// each MCP server as a namespace of functions (mcp__node_repl with js);
// Chat and Messages have no namespaces, so the tool is offered as one
// function named mcp__node_repl__js, which is also how Codex named MCP
// tools before namespaces. The answer's side turns a call of that name back
// into {namespace, name} (NamespaceTools).
func rqFlatName(namespace, name string) string {
	switch {
	case namespace == "":
		return name
	case strings.HasSuffix(namespace, "__"):
		return namespace + name
	}
	return namespace + "__" + name
}

// rqCustomParams is the parameters of a Responses custom tool (free-form
// text input, such as Codex's apply_patch) written as a function.
var rqCustomParams = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's input, as free-form text."}},"required":["input"],"additionalProperties":false}`)

func rqReadRespTools(r *rqRequest, top map[string]json.RawMessage) error {
	var tools []rqRespToolIn
	if _, err := rqField(top, "tools", &tools); err != nil {
		return err
	}
	for i, t := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "namespace" {
			rqReadRespTool(r, member, "", t)
			continue
		}
		for j, c := range t.Tools {
			rqReadRespTool(r, member+".tools["+strconv.Itoa(j)+"]", t.Name, c)
		}
	}
	raw, ok := top["tool_choice"]
	if ok && !rqIsNull(raw) {
		r.choiceMember = "tool_choice"
		if s, ok := rqString(raw); ok {
			if s != "auto" && s != "none" && s != "required" {
				return &Error{Member: "tool_choice", Reason: "unknown tool_choice " + strconv.Quote(s)}
			}
			r.choice = rqChoice(s)
		} else {
			var c struct{ Type, Name, Namespace string }
			_ = json.Unmarshal(raw, &c)
			if (c.Type == "function" || c.Type == "custom") && c.Name != "" {
				r.choice, r.choiceName = rqChoiceNamed, rqFlatName(c.Namespace, c.Name)
			} else {
				r.drops.add("tool_choice", "tool_choice")
			}
		}
	}
	_, err := rqField(top, "parallel_tool_calls", &r.parallel)
	return err
}

// rqReadRespTool reads one function or custom tool; a hosted tool
// (web_search, file_search, code_interpreter, image_generation, mcp…) is
// OpenAI's to run and is dropped: Codex sends web_search on every turn and
// must keep working without it.
func rqReadRespTool(r *rqRequest, member, namespace string, t rqRespToolIn) {
	switch t.Type {
	case "function":
		r.tools = append(r.tools, rqTool{name: rqFlatName(namespace, t.Name), description: t.Description,
			params: rqNonNull(t.Parameters), strict: t.Strict})
	case "custom":
		desc := t.Description
		if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
			// The grammar is what the engine would have constrained the
			// input with; a function's engine can only be told it.
			desc = strings.TrimSpace(desc + "\n\nThe input must follow this " + f.Syntax + " grammar:\n" + f.Definition)
		}
		r.tools = append(r.tools, rqTool{name: rqFlatName(namespace, t.Name), description: desc, params: rqCustomParams})
	default:
		r.drops.add("tool "+t.Type, member+" ("+t.Type+")")
	}
}

func rqReadRespOptions(r *rqRequest, top map[string]json.RawMessage) error {
	fields := []struct {
		key string
		dst any
	}{
		{"max_output_tokens", &r.maxTokens}, {"temperature", &r.temperature}, {"top_p", &r.topP},
		{"user", &r.user}, {"stream", &r.stream},
	}
	for _, f := range fields {
		if _, err := rqField(top, f.key, f.dst); err != nil {
			return err
		}
	}
	if raw := top["metadata"]; !rqIsNull(raw) {
		r.metadata = raw
	}
	var reasoning struct {
		Effort string `json:"effort"`
	}
	if _, err := rqField(top, "reasoning", &reasoning); err != nil {
		return err
	}
	if reasoning.Effort != "" {
		r.effort, r.effortMember = reasoning.Effort, "reasoning.effort"
	}
	var text struct {
		Format *struct {
			Type        string          `json:"type"`
			Name        string          `json:"name"`
			Description string          `json:"description"`
			Schema      json.RawMessage `json:"schema"`
			Strict      *bool           `json:"strict"`
		} `json:"format"`
		Verbosity json.RawMessage `json:"verbosity"`
	}
	if _, err := rqField(top, "text", &text); err != nil {
		return err
	}
	if f := text.Format; f != nil && (f.Type == "json_schema" || f.Type == "json_object") {
		r.format = &rqFormat{kind: f.Type, name: f.Name, description: f.Description,
			schema: rqNonNull(f.Schema), strict: f.Strict, member: "text.format"}
	}
	shared := map[string]json.RawMessage{}
	for _, k := range rqRespShared {
		if raw, ok := top[k]; ok && !rqIsNull(raw) {
			shared[k] = raw
		}
	}
	if !rqIsNull(text.Verbosity) {
		shared["verbosity"] = text.Verbosity
	}
	if len(shared) > 0 {
		r.openai = shared
	}
	if raw := top["truncation"]; string(raw) == `"auto"` {
		// The client lets the engine cut the conversation's start when it
		// is too long; the other APIs answer an error instead.
		r.drops.add("truncation", "truncation")
	}
	if raw, ok := top["max_tool_calls"]; ok && !rqIsNull(raw) {
		r.drops.add("max_tool_calls", "max_tool_calls")
	}
	return nil
}
