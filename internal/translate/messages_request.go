package translate

import (
	"encoding/json"
	"strconv"
	"strings"
)

// Reading an Anthropic Messages request.

type messagesIn struct {
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
}

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

type messagesToolIn struct {
	Type        string          `json:"type"`
	Name        string          `json:"name"`
	Description string          `json:"description"`
	InputSchema json.RawMessage `json:"input_schema"`
	Strict      *bool           `json:"strict"`
}

type messagesFormatIn struct {
	Type   string          `json:"type"`
	Schema json.RawMessage `json:"schema"`
}

// messagesOnly are Messages' members the OpenAI APIs have no word for:
// dropped, listed. cache_control is not among them: caching is automatic on
// OpenAI's side, so it is dropped silently wherever it sits.
var messagesOnly = []string{"top_k", "context_management", "container", "mcp_servers"}

var messagesKnown = set(append([]string{"model", "messages", "system", "max_tokens", "temperature",
	"top_p", "stop_sequences", "stream", "metadata", "tools", "tool_choice", "thinking",
	"output_config", "output_format", "service_tier"}, messagesOnly...))

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

// messagesReadContent reads a string or an array of content blocks; nested is
// false for system, whose blocks are text only.
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
// URI, which is what Chat and Responses carry inline images as.
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
	var tier string
	if _, err := field(top, "service_tier", &tier); err != nil {
		return err
	} else if tier != "" && tier != "auto" {
		r.drops.add("service_tier", "service_tier")
	}
	return nil
}

// Writing an Anthropic Messages request.

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

type messagesMsgOut struct {
	Role    string             `json:"role"`
	Content []messagesBlockOut `json:"content"`
}

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

type messagesSourceOut struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type messagesToolOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type messagesChoiceOut struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type messagesMetadataOut struct {
	UserID string `json:"user_id"`
}

type messagesThinkingOut struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type messagesOutputOut struct {
	Format *messagesFormatIn `json:"format,omitempty"`
}

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
		// One block: empty ones are refused (T1), and the instructions of a
		// Chat transcript, wherever they were, are read first by Claude.
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
			// Messages refuses white-space-only stop sequences (T12).
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
// a turn in one user message, ahead of any text (T4).
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
// cannot carry or that would be refused (an empty text, T1).
func messagesBlock(r *Request, p Part) (messagesBlockOut, bool) {
	switch p.Kind {
	case PartText:
		if strings.TrimSpace(p.Text) == "" {
			// "text content blocks must contain non-whitespace text" (T1)
			return messagesBlockOut{}, false
		}
		return messagesBlockOut{Type: "text", Text: &p.Text}, true
	case PartImage:
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
		return messagesBlockOut{Type: "tool_use", ID: ToolID(p.ID), Name: p.Name, Input: input}, true
	case PartResult:
		b := messagesBlockOut{Type: "tool_result", ToolUseID: ToolID(p.ID), IsError: p.IsError}
		var content []messagesBlockOut
		for _, c := range p.Content {
			if cb, ok := messagesBlock(r, c); ok {
				content = append(content, cb)
			}
		}
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
// to start with (T8), which another API's transcript never has.
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
