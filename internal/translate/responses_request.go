package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Reading an OpenAI Responses request, for an engine that speaks another
// API (Codex in front of a Chat-only engine): instructions, and input, a
// string or a list of items (messages, function and custom tool calls and
// their outputs, reasoning…); tools flat ({type: function, name,
// parameters}), custom or grouped in namespaces; options under text and
// reasoning (docs/translation-facts.md#requests). The gateway keeps no
// state between requests, so a member that asks for stored state is
// refused (responsesRefused).

// responsesItemIn is one input item, with the members of the types read: a
// message (role, content), a function_call or custom_tool_call (call_id,
// name, namespace, arguments or input) and their outputs (call_id,
// output). An item's own id (fc_…) is not read: a call pairs with its
// output by call_id (docs/translation-facts.md#t6).
type responsesItemIn struct {
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

// responsesPartIn is one part of a message's content or of a tool's output:
// input_text or output_text, a refusal, input_image by image_url or
// file_id.
type responsesPartIn struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	Refusal  string `json:"refusal"`
	ImageURL string `json:"image_url"`
	FileID   string `json:"file_id"`
	Detail   string `json:"detail"`
}

// responsesToolIn is one of tools[]: a function, a custom tool (free-form
// input, perhaps constrained by a grammar in format), a namespace of
// either, or one of OpenAI's hosted tools.
type responsesToolIn struct {
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
	Tools []responsesToolIn `json:"tools"` // a namespace's
}

// responsesRefused are members that ask the engine for state the gateway does
// not keep (an earlier response, a conversation, a stored prompt, a queued
// answer): dropping them would answer a question the client did not ask.
var responsesRefused = []string{"previous_response_id", "conversation", "prompt", "background"}

// responsesShared are Responses' members Chat has too, with the same meaning.
var responsesShared = []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs"}

// responsesKnown are the members the Responses reader reads or refuses on
// purpose; any other is listed as dropped. store, include,
// stream_options, client_metadata and prompt_cache_retention are known and
// go without a word (docs/translation.md#what-carries).
var responsesKnown = set(append(append([]string{"model", "input", "instructions", "tools", "tool_choice",
	"parallel_tool_calls", "max_output_tokens", "temperature", "top_p", "text", "reasoning", "user",
	"metadata", "stream", "store", "include", "truncation", "max_tool_calls", "stream_options",
	"client_metadata", "prompt_cache_retention"}, responsesShared...), responsesRefused...))

// responsesReadRequest reads a Responses request's members into r:
// instructions first, as the system message, then input. A refused member
// whose value asks for nothing (false, "") passes.
func responsesReadRequest(r *Request, top map[string]json.RawMessage) error {
	r.Model = top["model"]
	for _, k := range responsesRefused {
		if raw, ok := top[k]; ok && !IsNull(raw) && string(raw) != "false" && string(raw) != `""` {
			return &Error{Member: k, Reason: "the gateway keeps no state between requests; send the whole conversation in input"}
		}
	}
	var instructions string
	if _, err := field(top, "instructions", &instructions); err != nil {
		return err
	}
	if instructions != "" {
		r.Messages = append(r.Messages, Message{Role: RoleSystem, Parts: []Part{{Kind: PartText, Text: instructions}}, Member: "instructions"})
	}
	if raw := top["input"]; !IsNull(raw) {
		// A string input is one user message.
		if s, ok := JSONString(raw); ok {
			r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: []Part{{Kind: PartText, Text: s}}, Member: "input"})
		} else {
			var items []json.RawMessage
			if err := json.Unmarshal(raw, &items); err != nil {
				return &Error{Member: "input", Reason: "neither a string nor an array of items"}
			}
			for i, it := range items {
				if err := responsesReadItem(r, i, it); err != nil {
					return err
				}
			}
		}
	}
	if err := responsesReadTools(r, top); err != nil {
		return err
	}
	if err := responsesReadOptions(r, top); err != nil {
		return err
	}
	unknownMembers(r, top, responsesKnown)
	return nil
}

// responsesReadItem reads input[i]. An item with a role and no type is a
// message: the SDKs' short form (EasyInputMessage) leaves type out. A call
// joins the assistant turn before it (addCall) and an output the results
// before it (addResult): Responses lists a turn's text and calls, and
// their outputs, as separate items, which the other APIs hold in one
// message each.
func responsesReadItem(r *Request, i int, raw json.RawMessage) error {
	member := "input[" + strconv.Itoa(i) + "]"
	var it responsesItemIn
	if err := json.Unmarshal(raw, &it); err != nil {
		return &Error{Member: member, Reason: "not a valid input item: " + err.Error()}
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	switch it.Type {
	case "message":
		return responsesReadMessage(r, member, it)
	case "function_call":
		r.addCall(Part{Kind: PartCall, ID: it.CallID, Name: flatName(it.Namespace, it.Name),
			Args: argsText(it.Arguments), Member: member}, member)
	case "custom_tool_call":
		// A custom tool is a function with one string parameter, input
		// (customParams), toward the other APIs.
		args, _ := Marshal(map[string]string{"input": it.Input})
		r.addCall(Part{Kind: PartCall, ID: it.CallID, Name: flatName(it.Namespace, it.Name),
			Args: string(args), Member: member}, member)
	case "function_call_output", "custom_tool_call_output":
		content, err := responsesReadContent(r, member+".output", it.Output)
		if err != nil {
			return err
		}
		r.addResult(Part{Kind: PartResult, ID: it.CallID, Content: content, Member: member}, member)
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

// responsesReadMessage reads a message item. developer is system's newer
// name; both are instructions where they stand.
func responsesReadMessage(r *Request, member string, it responsesItemIn) error {
	parts, err := responsesReadContent(r, member+".content", it.Content)
	if err != nil {
		return err
	}
	switch it.Role {
	case "user":
		r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: parts, Member: member})
	case "assistant":
		r.Messages = append(r.Messages, Message{Role: RoleAssistant, Parts: parts, Member: member})
	case "system", "developer":
		r.Messages = append(r.Messages, Message{Role: RoleSystem, Parts: parts, Member: member})
	default:
		return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(it.Role)}
	}
	return nil
}

// responsesReadContent reads a message's content or a tool output: a string or
// an array of parts (input_text, output_text, input_image). A refusal in
// history is read as the text the model said; no request of the other
// APIs has a refusal.
func responsesReadContent(r *Request, member string, raw json.RawMessage) ([]Part, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if s, ok := JSONString(raw); ok {
		return []Part{{Kind: PartText, Text: s}}, nil
	}
	var in []responsesPartIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &Error{Member: member, Reason: "neither a string nor an array of parts"}
	}
	var parts []Part
	for j, p := range in {
		pm := member + "[" + strconv.Itoa(j) + "]"
		switch {
		case p.Type == "input_text" || p.Type == "output_text" || p.Type == "text":
			parts = append(parts, Part{Kind: PartText, Text: p.Text})
		case p.Type == "refusal":
			parts = append(parts, Part{Kind: PartText, Text: p.Refusal})
		case p.Type == "input_image" && p.ImageURL != "":
			parts = append(parts, Part{Kind: PartImage, URL: p.ImageURL, Detail: p.Detail, Member: pm})
		default:
			// input_file, an image by file_id: stored at OpenAI, which no
			// other engine can fetch.
			r.drops.add("part "+p.Type, pm+" ("+p.Type+")")
		}
	}
	return parts, nil
}

// flatName is the function name of a namespace's tool. Codex declares
// each MCP server as a namespace of functions (mcp__node_repl with js);
// Chat and Messages have no namespaces, so the tool is offered as one
// function named mcp__node_repl__js, which is also how Codex named MCP
// tools before namespaces. The answer's side turns a call of that name back
// into {namespace, name} (Request.Namespaces).
func flatName(namespace, name string) string {
	switch {
	case namespace == "":
		return name
	case strings.HasSuffix(namespace, "__"):
		return namespace + name
	}
	return namespace + "__" + name
}

// customParams is the parameters of a Responses custom tool (free-form
// text input, such as Codex's apply_patch) written as a function.
var customParams = json.RawMessage(`{"type":"object","properties":{"input":{"type":"string","description":"The tool's input, as free-form text."}},"required":["input"],"additionalProperties":false}`)

// responsesReadTools reads tools, tool_choice and parallel_tool_calls. A
// namespace's tools are read as functions named flatName(namespace, name),
// and a choice that names one with its namespace is read by that name. A
// string choice other than auto, none and required is a 400; an object
// that names no function or custom tool (allowed_tools, a hosted tool) is
// dropped, and the engine chooses as with auto.
func responsesReadTools(r *Request, top map[string]json.RawMessage) error {
	var tools []responsesToolIn
	if _, err := field(top, "tools", &tools); err != nil {
		return err
	}
	for i, t := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		if t.Type != "namespace" {
			responsesReadTool(r, member, "", t)
			continue
		}
		for j, c := range t.Tools {
			responsesReadTool(r, member+".tools["+strconv.Itoa(j)+"]", t.Name, c)
		}
	}
	raw, ok := top["tool_choice"]
	if ok && !IsNull(raw) {
		r.ChoiceMember = "tool_choice"
		if s, ok := JSONString(raw); ok {
			if s != "auto" && s != "none" && s != "required" {
				return &Error{Member: "tool_choice", Reason: "unknown tool_choice " + strconv.Quote(s)}
			}
			r.Choice = Choice(s)
		} else {
			var c struct{ Type, Name, Namespace string }
			_ = json.Unmarshal(raw, &c)
			if (c.Type == "function" || c.Type == "custom") && c.Name != "" {
				r.Choice, r.ChoiceName = ChoiceNamed, flatName(c.Namespace, c.Name)
			} else {
				r.drops.add("tool_choice", "tool_choice")
			}
		}
	}
	_, err := field(top, "parallel_tool_calls", &r.Parallel)
	return err
}

// responsesReadTool reads one function or custom tool; a hosted tool
// (web_search, file_search, code_interpreter, image_generation, mcp…) is
// OpenAI's to run and is dropped: Codex sends web_search on every turn and
// must keep working without it.
func responsesReadTool(r *Request, member, namespace string, t responsesToolIn) {
	// The answer's side turns a call of the flat name back into
	// {namespace, name} by this map (Request.Namespaces).
	if namespace != "" && (t.Type == "function" || t.Type == "custom") {
		if r.Namespaces == nil {
			r.Namespaces = map[string][2]string{}
		}
		r.Namespaces[flatName(namespace, t.Name)] = [2]string{namespace, t.Name}
	}
	switch t.Type {
	case "function":
		r.Tools = append(r.Tools, Tool{Name: flatName(namespace, t.Name), Description: t.Description,
			Params: nonNull(t.Parameters), Strict: t.Strict})
	case "custom":
		desc := t.Description
		if f := t.Format; f != nil && f.Type == "grammar" && f.Definition != "" {
			// The grammar is what the engine would have constrained the
			// input with; a function's engine can only be told it.
			desc = strings.TrimSpace(desc + "\n\nThe input must follow this " + f.Syntax + " grammar:\n" + f.Definition)
		}
		// A function of one string parameter, input; its calls go back to
		// the client as custom_tool_call items (Request.Custom).
		r.Tools = append(r.Tools, Tool{Name: flatName(namespace, t.Name), Description: desc, Params: customParams})
		r.Custom = append(r.Custom, flatName(namespace, t.Name))
	default:
		r.drops.add("tool "+t.Type, member+" ("+t.Type+")")
	}
}

// responsesReadOptions reads the sampling and output options. reasoning's
// effort is the effort; its summary asks to be shown what the other APIs
// show anyway (Messages' thinking, Chat's reasoning_content) and is not
// read. text.format is structured output, and text.verbosity is Chat's
// verbosity, carried with the members Chat and Responses share
// (Request.OpenAI).
func responsesReadOptions(r *Request, top map[string]json.RawMessage) error {
	fields := []struct {
		key string
		dst any
	}{
		{"max_output_tokens", &r.MaxTokens}, {"temperature", &r.Temperature}, {"top_p", &r.TopP},
		{"user", &r.User}, {"stream", &r.Stream},
	}
	for _, f := range fields {
		if _, err := field(top, f.key, f.dst); err != nil {
			return err
		}
	}
	if raw := top["metadata"]; !IsNull(raw) {
		r.Metadata = raw
	}
	var reasoning struct {
		Effort string `json:"effort"`
	}
	if _, err := field(top, "reasoning", &reasoning); err != nil {
		return err
	}
	if reasoning.Effort != "" {
		r.Effort, r.EffortMember = reasoning.Effort, "reasoning.effort"
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
	if _, err := field(top, "text", &text); err != nil {
		return err
	}
	if f := text.Format; f != nil && (f.Type == "json_schema" || f.Type == "json_object") {
		r.Format = &Format{Kind: f.Type, Name: f.Name, Description: f.Description,
			Schema: nonNull(f.Schema), Strict: f.Strict, Member: "text.format"}
	}
	shared := map[string]json.RawMessage{}
	for _, k := range responsesShared {
		if raw, ok := top[k]; ok && !IsNull(raw) {
			shared[k] = raw
		}
	}
	if !IsNull(text.Verbosity) {
		shared["verbosity"] = text.Verbosity
	}
	if len(shared) > 0 {
		r.OpenAI = shared
	}
	if raw := top["truncation"]; string(raw) == `"auto"` {
		// The client lets the engine cut the conversation's start when it
		// is too long; the other APIs answer an error instead.
		r.drops.add("truncation", "truncation")
	}
	// A cap on the calls of OpenAI's hosted tools, which no other engine
	// runs.
	if raw, ok := top["max_tool_calls"]; ok && !IsNull(raw) {
		r.drops.add("max_tool_calls", "max_tool_calls")
	}
	return nil
}

// Writing an OpenAI Responses request, for a Chat or Messages client of an
// engine that speaks Responses only: the instructions as instructions,
// the conversation as input items, tools flat, and store false, since the
// client keeps its own conversation and expects nothing kept at the
// engine.

// responsesOut is the request written. store has no omitempty: Responses
// stores a response unless told false.
type responsesOut struct {
	Model           json.RawMessage    `json:"model,omitempty"`
	Instructions    string             `json:"instructions,omitempty"`
	Input           []any              `json:"input"`
	Tools           []responsesToolOut `json:"tools,omitempty"`
	ToolChoice      any                `json:"tool_choice,omitempty"`
	Parallel        *bool              `json:"parallel_tool_calls,omitempty"`
	MaxOutputTokens *int               `json:"max_output_tokens,omitempty"`
	Temperature     *float64           `json:"temperature,omitempty"`
	TopP            *float64           `json:"top_p,omitempty"`
	Text            *responsesTextOut  `json:"text,omitempty"`
	Reasoning       *responsesEffort   `json:"reasoning,omitempty"`
	User            string             `json:"user,omitempty"`
	Metadata        json.RawMessage    `json:"metadata,omitempty"`
	Stream          bool               `json:"stream,omitempty"`
	Store           bool               `json:"store"`
}

// responsesToolOut is a function tool. strict has no omitempty: Responses
// reads a missing strict as true (responsesWriteRequest).
type responsesToolOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
	Strict      bool            `json:"strict"`
}

// responsesTextOut is text: the format of structured output, and verbosity.
type responsesTextOut struct {
	Format    *responsesFormatOut `json:"format,omitempty"`
	Verbosity json.RawMessage     `json:"verbosity,omitempty"`
}

type responsesFormatOut struct {
	Type        string          `json:"type"`
	Name        string          `json:"name,omitempty"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// responsesEffort is reasoning: {effort}.
type responsesEffort struct {
	Effort string `json:"effort"`
}

// responsesMessageOut is a message item; its content is a string or parts.
type responsesMessageOut struct {
	Type    string `json:"type"`
	Role    string `json:"role"`
	Content any    `json:"content"`
}

// responsesPartOut is an input_text or input_image part; Text is a pointer
// so that an image writes no text member.
type responsesPartOut struct {
	Type     string  `json:"type"`
	Text     *string `json:"text,omitempty"`
	ImageURL string  `json:"image_url,omitempty"`
	Detail   string  `json:"detail,omitempty"`
}

// responsesCallOut has no "id": Responses wants an item id to start with fc_,
// and pairs a call with its output by call_id alone
// (docs/translation-facts.md#t6).
type responsesCallOut struct {
	Type      string `json:"type"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// responsesOutputOut is a function_call_output item: output is a string, or
// parts when the tool returned images (responsesOutput).
type responsesOutputOut struct {
	Type   string `json:"type"`
	CallID string `json:"call_id"`
	Output any    `json:"output"`
}

// responsesWriteRequest writes r as a Responses request. The system messages
// that lead the conversation become instructions; one that comes later
// stays an item of role system where it stood, as the client placed it.
func responsesWriteRequest(r *Request, _ RequestOptions) ([]byte, error) {
	if r.N > 1 {
		return nil, &Error{Member: "n", Reason: "Responses answers one choice"}
	}
	// store false: a Chat or Messages client expects nothing kept at the
	// engine (Responses stores by default).
	out := responsesOut{Model: r.Model, Input: []any{}, MaxOutputTokens: r.MaxTokens, Temperature: r.Temperature,
		TopP: r.TopP, User: r.User, Metadata: r.Metadata, Stream: r.Stream}
	var instructions []string
	leading := true
	for _, m := range r.Messages {
		if m.Role == RoleSystem && leading {
			if text := Texts(m.Parts, "\n\n"); text != "" {
				instructions = append(instructions, text)
			}
			continue
		}
		leading = false
		out.Input = responsesItems(r, out.Input, m)
	}
	out.Instructions = strings.Join(instructions, "\n\n")
	for _, t := range r.Tools {
		params := t.Params
		if params == nil {
			params = EmptySchema
		}
		// Responses makes a function strict unless told otherwise, and a
		// strict schema must list every property as required: a tool
		// another API declared is strict only if it said so.
		out.Tools = append(out.Tools, responsesToolOut{Type: "function", Name: t.Name, Description: t.Description,
			Parameters: params, Strict: t.Strict != nil && *t.Strict})
	}
	if len(out.Tools) > 0 {
		out.Parallel = r.Parallel
	}
	switch r.Choice {
	case ChoiceAuto, ChoiceNone, ChoiceRequired:
		out.ToolChoice = string(r.Choice)
	case ChoiceNamed:
		out.ToolChoice = map[string]string{"type": "function", "name": r.ChoiceName}
	}
	if r.Effort != "" {
		out.Reasoning = &responsesEffort{Effort: r.Effort}
	}
	// The members Chat and Responses share go as the client wrote them,
	// verbosity under text, where Responses has it.
	extra := map[string]json.RawMessage{}
	for k, v := range r.OpenAI {
		if k == "verbosity" {
			out.Text = &responsesTextOut{Verbosity: v}
		} else {
			extra[k] = v
		}
	}
	if f := r.Format; f != nil {
		if out.Text == nil {
			out.Text = &responsesTextOut{}
		}
		if f.Kind == "json_object" {
			out.Text.Format = &responsesFormatOut{Type: "json_object"}
		} else {
			out.Text.Format = &responsesFormatOut{Type: "json_schema", Name: formatName(f),
				Description: f.Description, Schema: f.Schema, Strict: f.Strict}
		}
	}
	// Responses has no stop member (docs/translation-facts.md#requests).
	if len(r.StopSequences) > 0 {
		r.drops.add("stop", ClientMember(r.From, "stop"))
	}
	b, err := Marshal(out)
	if err != nil {
		return nil, err
	}
	return withExtra(b, extra), nil
}

// responsesItems appends m as input items: a user turn's tool results as
// function_call_output items before its message, an assistant turn's text
// and calls in their order.
func responsesItems(r *Request, items []any, m Message) []any {
	switch m.Role {
	case RoleSystem:
		if text := Texts(m.Parts, "\n\n"); text != "" {
			items = append(items, responsesMessageOut{Type: "message", Role: "system", Content: text})
		}
	case RoleAssistant:
		var text strings.Builder
		flush := func() {
			if text.Len() > 0 {
				items = append(items, responsesMessageOut{Type: "message", Role: "assistant", Content: text.String()})
				text.Reset()
			}
		}
		for _, p := range m.Parts {
			switch p.Kind {
			case PartText:
				text.WriteString(p.Text)
			case PartCall:
				flush()
				// A call without arguments is "{}": arguments are a JSON
				// text, and an empty one is not JSON.
				args := p.Args
				if strings.TrimSpace(args) == "" {
					args = "{}"
				}
				items = append(items, responsesCallOut{Type: "function_call", CallID: p.ID, Name: p.Name, Arguments: args})
			case PartThinking, PartRedacted:
				// Responses replays reasoning only as its own encrypted items.
				r.drops.add("thinking", p.Member+" (thinking)")
			}
		}
		flush()
	case RoleUser:
		var rest []responsesPartOut
		for _, p := range m.Parts {
			switch p.Kind {
			case PartResult:
				items = append(items, responsesOutputOut{Type: "function_call_output", CallID: p.ID, Output: responsesOutput(p)})
			case PartText:
				rest = append(rest, responsesPartOut{Type: "input_text", Text: &p.Text})
			case PartImage:
				rest = append(rest, responsesPartOut{Type: "input_image", ImageURL: p.URL, Detail: p.Detail})
			}
		}
		if len(rest) > 0 {
			items = append(items, responsesMessageOut{Type: "message", Role: "user", Content: rest})
		}
	}
	return items
}

// responsesOutput is a tool result's output: its text, or input_text and
// input_image parts when the tool returned images. Responses has no
// is_error: an error says so in its first text ("Error:", as ResultText
// does for a text output).
func responsesOutput(p Part) any {
	images := false
	for _, c := range p.Content {
		images = images || c.Kind == PartImage
	}
	if !images {
		return ResultText(p)
	}
	var parts []responsesPartOut
	if p.IsError {
		e := "Error:"
		parts = append(parts, responsesPartOut{Type: "input_text", Text: &e})
	}
	for _, c := range p.Content {
		switch c.Kind {
		case PartText:
			parts = append(parts, responsesPartOut{Type: "input_text", Text: &c.Text})
		case PartImage:
			parts = append(parts, responsesPartOut{Type: "input_image", ImageURL: c.URL, Detail: c.Detail})
		}
	}
	return parts
}
