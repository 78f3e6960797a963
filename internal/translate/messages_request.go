package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Reading an Anthropic Messages request, for an engine that speaks another
// API (Claude Code in front of a Chat-only engine): system at the top,
// messages of role user and assistant whose content is a string or
// blocks, tool results as blocks of the user message after their calls,
// and max_tokens always (docs/translation-facts.md#requests).

// messagesIn is one of messages[]: its role, and its content, read by
// messagesReadContent.
type messagesIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

// messagesBlockIn is one content block, with the members of every type it
// may be: text; image (source base64 or url); tool_use (input an object);
// tool_result (content a string or blocks, is_error); thinking (with its
// signature) and redacted_thinking (data).
type messagesBlockIn struct {
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

// messagesToolIn is one of tools[]: a client's own tool has no type, or
// custom; any other type is one of Anthropic's server tools.
type messagesToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

// messagesFormatIn is output_config.format (output_format before it): a
// json_schema and its schema, the one kind of structured output Messages
// has.
type messagesFormatIn struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// messagesOnly are Messages' members the OpenAI APIs have no word for:
// dropped, listed. cache_control is not among them: caching is automatic on
// OpenAI's side, so it is dropped silently wherever it sits.
var messagesOnly = []string{"top_k", "context_management", "container", "mcp_servers"}

// messagesKnown are the members the Messages reader reads (or drops on
// purpose); any other is listed as dropped (unknownMembers).
var messagesKnown = set(append([]string{"model", "messages", "system", "max_tokens", "temperature",
	"top_p", "stop_sequences", "stream", "metadata", "tools", "tool_choice", "thinking",
	"output_config", "output_format", "service_tier"}, messagesOnly...))

// messagesReadRequest reads a Messages request's members into r: system
// first, as the instructions it is, then the messages in their order.
func messagesReadRequest(r *Request, top map[string]json.RawMessage) error {
	r.Model = top["model"]
	if raw := top["system"]; !IsNull(raw) {
		parts, err := messagesReadContent(r, "system", raw, false)
		if err != nil {
			return err
		}
		r.Messages = append(r.Messages, Message{Role: RoleSystem, Parts: parts, Member: "system"})
	}
	var msgs []messagesIn
	if _, err := field(top, "messages", &msgs); err != nil {
		return err
	}
	for i, m := range msgs {
		member := "messages[" + strconv.Itoa(i) + "]"
		parts, err := messagesReadContent(r, member, m.Content, true)
		if err != nil {
			return err
		}
		switch m.Role {
		case "user":
			r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: parts, Member: member})
		case "assistant":
			r.Messages = append(r.Messages, Message{Role: RoleAssistant, Parts: parts, Member: member})
		case "system":
			// Claude Code puts a role "system" message inside messages[]
			// although Messages has none; it is instructions all the same.
			r.Messages = append(r.Messages, Message{Role: RoleSystem, Parts: parts, Member: member})
		default:
			return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(m.Role)}
		}
	}
	if err := messagesReadTools(r, top); err != nil {
		return err
	}
	if err := messagesReadOptions(r, top); err != nil {
		return err
	}
	for _, k := range messagesOnly {
		if raw, ok := top[k]; ok && !IsNull(raw) {
			r.drops.add(k, k)
		}
	}
	unknownMembers(r, top, messagesKnown)
	return nil
}

// messagesReadContent reads a string or an array of content blocks. nested
// is true when member names a message, whose blocks are at
// member.content[j], and false when it names the blocks' array itself
// (system, a tool_result's content), for the paths a drop names.
func messagesReadContent(r *Request, member string, raw json.RawMessage, nested bool) ([]Part, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if s, ok := JSONString(raw); ok {
		return []Part{{Kind: PartText, Text: s}}, nil
	}
	var blocks []messagesBlockIn
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, &Error{Member: member, Reason: "neither a string nor an array of content blocks"}
	}
	var parts []Part
	for j, b := range blocks {
		bm := member + "[" + strconv.Itoa(j) + "]"
		if nested {
			bm = member + ".content[" + strconv.Itoa(j) + "]"
		}
		switch b.Type {
		case "text":
			// An empty text is kept here: the writers that would be
			// refused for it leave it out (docs/translation-facts.md#t1).
			parts = append(parts, Part{Kind: PartText, Text: b.Text})
		case "image":
			if p, ok := messagesImage(b); ok {
				parts = append(parts, p)
			} else {
				r.drops.add("image source", bm+" (image)")
			}
		case "tool_use":
			parts = append(parts, Part{Kind: PartCall, ID: b.ID, Name: b.Name, Args: argsText(b.Input), Member: bm})
		case "tool_result":
			p := Part{Kind: PartResult, ID: b.ToolUseID, IsError: b.IsError, Member: bm}
			var err error
			if p.Content, err = messagesReadContent(r, bm+".content", b.Content, false); err != nil {
				return nil, err
			}
			parts = append(parts, p)
		case "thinking":
			// Kept with its signature, which only a Claude engine checks
			// (a Messages or Converse writer replays it); the OpenAI
			// writers drop it (docs/translation-facts.md#t8).
			parts = append(parts, Part{Kind: PartThinking, Text: b.Thinking, Signature: b.Signature, Member: bm})
		case "redacted_thinking":
			parts = append(parts, Part{Kind: PartRedacted, Text: b.Data, Member: bm})
		default:
			// documents, server tools' calls and results, search results:
			// nothing in OpenAI's APIs carries them.
			r.drops.add("block "+b.Type, bm+" ("+b.Type+")")
		}
	}
	return parts, nil
}

// messagesImage reads an image block's source as a URL: base64 data as a data:
// URI, which is what Chat and Responses carry inline images as. A file
// source (Anthropic's Files API) names a file no other engine can read.
func messagesImage(b messagesBlockIn) (Part, bool) {
	if b.Source == nil {
		return Part{}, false
	}
	switch b.Source.Type {
	case "base64":
		return Part{Kind: PartImage, URL: "data:" + b.Source.MediaType + ";base64," + b.Source.Data}, true
	case "url":
		return Part{Kind: PartImage, URL: b.Source.URL}, true
	}
	return Part{}, false
}

// messagesReadTools reads tools and tool_choice. tool_choice's any is
// required and tool a named choice; disable_parallel_tool_use is
// parallel_tool_calls inverted (docs/translation-facts.md#requests). An
// unknown tool_choice type is a 400, as Anthropic answers one.
func messagesReadTools(r *Request, top map[string]json.RawMessage) error {
	var tools []json.RawMessage
	if _, err := field(top, "tools", &tools); err != nil {
		return err
	}
	for i, raw := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		var t messagesToolIn
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
		r.Tools = append(r.Tools, Tool{Name: t.Name, Description: t.Description,
			Params: nonNull(t.InputSchema), Strict: t.Strict})
	}
	var c struct {
		Type                   string `json:"type"`
		Name                   string `json:"name"`
		DisableParallelToolUse *bool  `json:"disable_parallel_tool_use"`
	}
	ok, err := field(top, "tool_choice", &c)
	if err != nil || !ok {
		return err
	}
	r.ChoiceMember = "tool_choice"
	switch c.Type {
	case "auto", "none":
		r.Choice = Choice(c.Type)
	case "any":
		r.Choice = ChoiceRequired
	case "tool":
		r.Choice, r.ChoiceName = ChoiceNamed, c.Name
	default:
		return &Error{Member: "tool_choice.type", Reason: "unknown tool_choice " + strconv.Quote(c.Type)}
	}
	if c.DisableParallelToolUse != nil {
		p := !*c.DisableParallelToolUse
		r.Parallel = &p
	}
	return nil
}

// messagesReadOptions reads the sampling and output options. Reasoning is
// read as an OpenAI effort, the one word every other writer has: adaptive
// thinking's output_config.effort as it is, a thinking budget by
// budgetEffort, so that an effort written as a budget and read back is
// the same effort.
func messagesReadOptions(r *Request, top map[string]json.RawMessage) error {
	var maxTokens int
	if ok, err := field(top, "max_tokens", &maxTokens); err != nil {
		return err
	} else if ok {
		r.MaxTokens = &maxTokens
	}
	var meta struct {
		UserID string `json:"user_id"`
	}
	fields := []struct {
		key string
		dst any
	}{
		{"temperature", &r.Temperature}, {"top_p", &r.TopP}, {"stop_sequences", &r.StopSequences},
		{"stream", &r.Stream}, {"metadata", &meta},
	}
	for _, f := range fields {
		if _, err := field(top, f.key, f.dst); err != nil {
			return err
		}
	}
	r.User = meta.UserID
	var thinking struct {
		Type         string `json:"type"`
		BudgetTokens int    `json:"budget_tokens"`
	}
	if _, err := field(top, "thinking", &thinking); err != nil {
		return err
	}
	var oc struct {
		Effort string            `json:"effort"`
		Format *messagesFormatIn `json:"format"`
	}
	if _, err := field(top, "output_config", &oc); err != nil {
		return err
	}
	switch {
	case oc.Effort != "":
		r.Effort, r.EffortMember = oc.Effort, "output_config.effort"
		if oc.Effort == "max" {
			// OpenAI's engines know no "max"; high is their most.
			r.Effort = "high"
		}
	case thinking.Type == "enabled":
		r.Effort, r.EffortMember = budgetEffort(thinking.BudgetTokens), "thinking"
	case thinking.Type == "adaptive":
		// Adaptive thinking without an effort leaves it to the model, which
		// OpenAI's engines do as well when asked nothing.
		r.drops.add("thinking", "thinking")
	}
	f := oc.Format
	member := "output_config.format"
	if f == nil {
		var old messagesFormatIn
		if ok, err := field(top, "output_format", &old); err != nil {
			return err
		} else if ok {
			f, member = &old, "output_format"
		}
	}
	if f != nil && f.Type == "json_schema" {
		r.Format = &Format{Kind: "json_schema", Schema: nonNull(f.Schema), Member: member}
	}
	// auto is Anthropic's default, which every engine does; standard_only
	// asks for what the OpenAI APIs' tiers do not say.
	var tier string
	if _, err := field(top, "service_tier", &tier); err != nil {
		return err
	} else if tier != "" && tier != "auto" {
		r.drops.add("service_tier", "service_tier")
	}
	return nil
}

// Writing an Anthropic Messages request, for a Chat or Responses client of
// an engine that speaks Messages only. Messages is the strictest of the
// three, and each of its rules here answers a request another API's client
// would send and Anthropic would refuse: max_tokens always, the system at
// the top, turns that alternate, a turn's tool results first and together,
// tool ids of ^[a-zA-Z0-9_-]+$, no blank text block, thinking only with its
// signature (docs/translation-facts.md#known-traps-from-translators-trackers).

// messagesOut is the request written. max_tokens has no omitempty:
// Messages requires it (docs/translation-facts.md#t14).
type messagesOut struct {
	Model         json.RawMessage      `json:"model,omitempty"`
	MaxTokens     int                  `json:"max_tokens"`
	System        []messagesBlockOut   `json:"system,omitempty"`
	Messages      []messagesMsgOut     `json:"messages"`
	Tools         []messagesToolOut    `json:"tools,omitempty"`
	ToolChoice    *messagesChoiceOut   `json:"tool_choice,omitempty"`
	Temperature   *float64             `json:"temperature,omitempty"`
	TopP          *float64             `json:"top_p,omitempty"`
	StopSequences []string             `json:"stop_sequences,omitempty"`
	Stream        bool                 `json:"stream,omitempty"`
	Metadata      *messagesMetadataOut `json:"metadata,omitempty"`
	Thinking      *messagesThinkingOut `json:"thinking,omitempty"`
	OutputConfig  *messagesOutputOut   `json:"output_config,omitempty"`
}

// messagesMsgOut is one message; its content is always an array of blocks.
type messagesMsgOut struct {
	Role    string             `json:"role"`
	Content []messagesBlockOut `json:"content"`
}

// messagesBlockOut is one content block of any type. Text, thinking and
// signature are pointers so that each type writes its own members, an
// empty one included (a signature-only thinking block, docs/translation-facts.md#t8).
type messagesBlockOut struct {
	Type      string             `json:"type"`
	Text      *string            `json:"text,omitempty"`
	Source    *messagesSourceOut `json:"source,omitempty"`
	ID        string             `json:"id,omitempty"`
	Name      string             `json:"name,omitempty"`
	Input     json.RawMessage    `json:"input,omitempty"`
	ToolUseID string             `json:"tool_use_id,omitempty"`
	Content   any                `json:"content,omitempty"`
	IsError   bool               `json:"is_error,omitempty"`
	Thinking  *string            `json:"thinking,omitempty"`
	Signature *string            `json:"signature,omitempty"`
	Data      string             `json:"data,omitempty"`
}

// messagesSourceOut is an image's source: base64 with its media type, or a
// url, which Anthropic fetches itself (docs/translation-facts.md#t13).
type messagesSourceOut struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

// messagesToolOut is one of tools[]; input_schema is required, so a tool
// without parameters gets EmptySchema.
type messagesToolOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// messagesChoiceOut is tool_choice, which also carries Chat's
// parallel_tool_calls: false as disable_parallel_tool_use.
type messagesChoiceOut struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

// messagesMetadataOut is metadata, whose one member is user_id.
type messagesMetadataOut struct {
	UserID string `json:"user_id"`
}

// messagesThinkingOut is thinking: {type: enabled, budget_tokens}.
type messagesThinkingOut struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

// messagesOutputOut is output_config, written for its format.
type messagesOutputOut struct {
	Format *messagesFormatIn `json:"format,omitempty"`
}

// messagesWriteRequest writes r as a Messages request. n > 1 is a 400, not
// a drop: the client would wait for choices one answer cannot give. The
// limit is the client's, else RequestOptions.MaxTokens, else
// DefaultMaxTokens, since Messages requires one and a small one cuts
// answers short (docs/translation-facts.md#t14).
func messagesWriteRequest(r *Request, o RequestOptions) ([]byte, error) {
	if r.N > 1 {
		return nil, &Error{Member: "n", Reason: "Messages answers one choice"}
	}
	out := messagesOut{Model: r.Model, Messages: []messagesMsgOut{}, Temperature: r.Temperature, TopP: r.TopP, Stream: r.Stream}
	out.MaxTokens = o.MaxTokens
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if r.MaxTokens != nil && *r.MaxTokens > 0 {
		out.MaxTokens = *r.MaxTokens
	}
	var system []string
	for _, m := range r.Messages {
		if m.Role == RoleSystem {
			if text := Texts(m.Parts, "\n\n"); strings.TrimSpace(text) != "" {
				system = append(system, text)
			}
			continue
		}
		out.Messages = messagesAppend(r, out.Messages, m)
	}
	if len(system) > 0 {
		// One block: empty ones are refused (docs/translation-facts.md#t1),
		// and the instructions of a Chat transcript, wherever they were,
		// are read first by Claude, as Anthropic's own OpenAI layer hoists
		// them.
		text := strings.Join(system, "\n\n")
		out.System = []messagesBlockOut{{Type: "text", Text: &text}}
	}
	if t := out.Temperature; t != nil && *t > 1 {
		// OpenAI's scale goes to 2, Messages' to 1; Anthropic's own
		// OpenAI-compatible endpoint caps it the same way.
		one := 1.0
		out.Temperature = &one
	}
	for i, s := range r.StopSequences {
		if strings.TrimSpace(s) == "" {
			// Messages refuses white-space-only stop sequences
			// (docs/translation-facts.md#t12).
			r.drops.add("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		out.StopSequences = append(out.StopSequences, s)
	}
	messagesTools(r, &out)
	messagesThinking(r, &out)
	messagesUser(r, &out)
	if f := r.Format; f != nil {
		if f.Kind == "json_schema" && f.Schema != nil {
			out.OutputConfig = &messagesOutputOut{Format: &messagesFormatIn{Type: "json_schema", Schema: f.Schema}}
		} else {
			// Messages has no "any JSON object" mode; a client asking for
			// json_object has said "JSON" in its prompt too (OpenAI
			// requires it), which Claude follows.
			r.drops.add("response_format", f.Member)
		}
	}
	// Of the members Chat and Responses share, these ask for something
	// Messages cannot do: listed. prompt_cache_key and safety_identifier
	// change nothing in the answer, and go without a word; a service_tier
	// of auto or default asks for nothing.
	for _, k := range []string{"top_logprobs", "verbosity", "service_tier"} {
		raw, ok := r.OpenAI[k]
		if !ok || k == "service_tier" && (string(raw) == `"auto"` || string(raw) == `"default"`) {
			continue
		}
		r.drops.add(k, ClientMember(r.From, k))
	}
	return Marshal(out)
}

// messagesAppend appends m's blocks, to the message before when it has the
// same role: Messages wants one message per turn, with all tool results of
// a turn in one user message, ahead of any text
// (docs/translation-facts.md#t4). A message whose every part was dropped
// adds nothing, rather than an empty message Messages would refuse.
func messagesAppend(r *Request, out []messagesMsgOut, m Message) []messagesMsgOut {
	role := "user"
	if m.Role == RoleAssistant {
		role = "assistant"
	}
	var blocks []messagesBlockOut
	for _, p := range m.Parts {
		if b, ok := messagesBlock(r, p); ok {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return out
	}
	if n := len(out); n > 0 && out[n-1].Role == role {
		blocks = append(out[n-1].Content, blocks...)
		out = out[:n-1]
	}
	if role == "user" {
		blocks = resultsFirst(blocks)
	}
	return append(out, messagesMsgOut{Role: role, Content: blocks})
}

// resultsFirst puts a user message's tool_result blocks ahead of its other
// blocks, each group in its order: a Chat transcript may hold the user's
// words between two tool messages, and Messages refuses a tool_use whose
// result does not come first in the next message
// (docs/translation-facts.md#t4).
func resultsFirst(blocks []messagesBlockOut) []messagesBlockOut {
	sorted := make([]messagesBlockOut, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "tool_result" {
			sorted = append(sorted, b)
		}
	}
	for _, b := range blocks {
		if b.Type != "tool_result" {
			sorted = append(sorted, b)
		}
	}
	return sorted
}

// messagesBlock is p as a content block; ok is false for a part Messages
// cannot carry or that would be refused (an empty text,
// docs/translation-facts.md#t1).
func messagesBlock(r *Request, p Part) (messagesBlockOut, bool) {
	switch p.Kind {
	case PartText:
		if strings.TrimSpace(p.Text) == "" {
			// "text content blocks must contain non-whitespace text"
			// (docs/translation-facts.md#t1)
			return messagesBlockOut{}, false
		}
		return messagesBlockOut{Type: "text", Text: &p.Text}, true
	case PartImage:
		// A data: URI goes as base64, an http(s) URL as a url source that
		// Anthropic fetches: no bytes through the gateway, and no 5 MB
		// base64 limit met sooner (docs/translation-facts.md#t13).
		if mt, data, ok := SplitDataURI(p.URL); ok {
			return messagesBlockOut{Type: "image", Source: &messagesSourceOut{Type: "base64", MediaType: mt, Data: data}}, true
		}
		if strings.HasPrefix(p.URL, "http://") || strings.HasPrefix(p.URL, "https://") {
			return messagesBlockOut{Type: "image", Source: &messagesSourceOut{Type: "url", URL: p.URL}}, true
		}
		r.drops.add("image url", p.Member+" (image)")
	case PartCall:
		input, ok := ArgsObject(p.Args)
		if !ok {
			// A call whose arguments were cut short or are not an object:
			// the turn is kept, with arguments Messages accepts.
			r.drops.add("arguments", p.Member+" (arguments not a JSON object)")
		}
		// ToolID sanitizes the id as it does the result's, so the pair
		// still matches (docs/translation-facts.md#t3).
		return messagesBlockOut{Type: "tool_use", ID: ToolID(p.ID), Name: p.Name, Input: input}, true
	case PartResult:
		b := messagesBlockOut{Type: "tool_result", ToolUseID: ToolID(p.ID), IsError: p.IsError}
		var content []messagesBlockOut
		for _, c := range p.Content {
			if cb, ok := messagesBlock(r, c); ok {
				content = append(content, cb)
			}
		}
		// One text is written as a string, the shorter form Messages
		// takes; images make it an array of blocks.
		if len(content) == 1 && content[0].Type == "text" {
			b.Content = *content[0].Text
		} else if len(content) > 0 {
			b.Content = content
		}
		return b, true
	case PartThinking:
		if p.Signature == "" {
			// Messages replays thinking only with the signature its own
			// model wrote; another engine's reasoning text has none.
			r.drops.add("thinking", p.Member)
			return messagesBlockOut{}, false
		}
		return messagesBlockOut{Type: "thinking", Thinking: &p.Text, Signature: &p.Signature}, true
	case PartRedacted:
		return messagesBlockOut{Type: "redacted_thinking", Data: p.Text}, true
	}
	return messagesBlockOut{}, false
}

// messagesTools writes tools and tool_choice. A transcript with tool calls but
// no tools is refused by Messages ("requests which include tool_use or
// tool_result blocks must define tools"), which Chat and Responses allow:
// the tools the history calls are declared with an open schema, and
// tool_choice none keeps the model from calling them.
func messagesTools(r *Request, out *messagesOut) {
	for _, t := range r.Tools {
		schema := t.Params
		if schema == nil {
			schema = EmptySchema
		}
		out.Tools = append(out.Tools, messagesToolOut{Name: t.Name, Description: t.Description, InputSchema: schema})
	}
	choice := r.Choice
	if len(out.Tools) == 0 {
		seen := map[string]bool{}
		for _, m := range out.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_use" && !seen[b.Name] {
					seen[b.Name] = true
					out.Tools = append(out.Tools, messagesToolOut{Name: b.Name, InputSchema: EmptySchema})
				}
			}
		}
		if len(out.Tools) == 0 {
			return
		}
		choice = ChoiceNone
	}
	switch choice {
	case ChoiceAuto, ChoiceNone:
		out.ToolChoice = &messagesChoiceOut{Type: string(choice)}
	case ChoiceRequired:
		out.ToolChoice = &messagesChoiceOut{Type: "any"}
	case ChoiceNamed:
		out.ToolChoice = &messagesChoiceOut{Type: "tool", Name: r.ChoiceName}
	}
	// disable_parallel_tool_use sits in tool_choice, so parallel_tool_calls:
	// false alone is written with auto; with none no tool is called and
	// there is nothing to say (LiteLLM does both the same,
	// docs/translation-facts.md#requests).
	if r.Parallel != nil && !*r.Parallel && choice != ChoiceNone {
		if out.ToolChoice == nil {
			out.ToolChoice = &messagesChoiceOut{Type: "auto"}
		}
		out.ToolChoice.DisableParallelToolUse = true
	}
}

// messagesThinking writes an OpenAI reasoning effort as extended thinking, a
// budget below max_tokens (Messages' rule), or drops it when Messages would
// refuse the request with it: a budget below the minimum, a forced tool
// choice, or a tool loop whose last assistant turn has no thinking block
// to start with (docs/translation-facts.md#t8), which another API's
// transcript never has. An effort of none asks for no thinking, which is
// what a request without it gets: nothing to drop.
func messagesThinking(r *Request, out *messagesOut) {
	budget := EffortBudget(r.Effort)
	if budget == 0 {
		if r.Effort != "" && r.Effort != "none" {
			r.drops.add("reasoning", r.EffortMember)
		}
		return
	}
	budget = min(budget, out.MaxTokens-1)
	forced := out.ToolChoice != nil && (out.ToolChoice.Type == "any" || out.ToolChoice.Type == "tool")
	if budget < BudgetMin || forced || lastTurnUnthought(out.Messages) {
		r.drops.add("reasoning", r.EffortMember)
		return
	}
	out.Thinking = &messagesThinkingOut{Type: "enabled", BudgetTokens: budget}
	// With thinking on, Messages takes no temperature but 1 and top_p of
	// 0.95 or more only.
	if t := out.Temperature; t != nil && *t != 1 {
		out.Temperature = nil
		r.drops.add("temperature", "temperature")
	}
	if p := out.TopP; p != nil && *p < 0.95 {
		out.TopP = nil
		r.drops.add("top_p", "top_p")
	}
}

// lastTurnUnthought says whether the last assistant message calls a tool
// without starting with a thinking block.
func lastTurnUnthought(msgs []messagesMsgOut) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		c := msgs[i].Content
		if len(c) > 0 && (c[0].Type == "thinking" || c[0].Type == "redacted_thinking") {
			return false
		}
		for _, b := range c {
			if b.Type == "tool_use" {
				return true
			}
		}
		return false
	}
	return false
}

// messagesUser writes the client's user as metadata.user_id, except one that
// looks like an e-mail address or a phone number, which Anthropic asks
// never to send (LiteLLM skips them too).
func messagesUser(r *Request, out *messagesOut) {
	if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
		r.drops.add("metadata", "metadata")
	}
	u := r.User
	if u == "" {
		return
	}
	if strings.Contains(u, "@") || phoneLike(u) {
		r.drops.add("user", "user")
		return
	}
	out.Metadata = &messagesMetadataOut{UserID: u}
}

// phoneLike says whether s is a phone number: digits and a phone's
// punctuation only, seven digits or more.
func phoneLike(s string) bool {
	digits := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c >= '0' && c <= '9':
			digits++
		case c == '+' || c == '-' || c == ' ' || c == '(' || c == ')' || c == '.':
		default:
			return false
		}
	}
	return digits >= 7
}
