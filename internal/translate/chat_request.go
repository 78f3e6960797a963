package translate

import (
	"encoding/json"
	"strconv"
)

// Reading a Chat Completions request, for an engine that speaks another
// API: messages of role system, developer, user, assistant and tool, each
// content a string or an array of parts, and tools declared as
// {type: function, function: {name, parameters}}. What each member becomes
// in the other APIs, with its sources, is docs/translation-facts.md#requests.

// chatMsgIn is one of messages[], the members read. reasoning_content is
// LiteLLM's and DeepSeek's member for an assistant's reasoning, which a
// client that shows it sends back in history: it is read as thinking
// without a signature, which a Messages or Converse engine cannot be given
// (docs/translation-facts.md#t8).
type chatMsgIn struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	ToolCalls        []chatCallIn    `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent *string         `json:"reasoning_content"`
}

// chatCallIn is an assistant's tool call in history. Its arguments are a
// JSON text inside a string, as OpenAI writes them; a few clients send the
// object itself, which argsText takes as well.
type chatCallIn struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

// chatPartIn is one part of a message's content: text, a refusal (an
// assistant's, in history), or image_url, which is {url, detail} or, from
// some clients, the URL alone.
type chatPartIn struct {
	Type     string          `json:"type"`
	Text     string          `json:"text"`
	Refusal  string          `json:"refusal"`
	ImageURL json.RawMessage `json:"image_url"`
}

// chatToolIn is one of tools[]: a function (its type said or left out),
// or a type only OpenAI runs or knows (custom, its hosted tools), which
// the reader drops.
type chatToolIn struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
		Strict      *bool           `json:"strict"`
	} `json:"function"`
}

// chatFormatIn is response_format: json_schema with its schema, or
// json_object; text, the default, asks for nothing.
type chatFormatIn struct {
	Type       string `json:"type"`
	JSONSchema struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Schema      json.RawMessage `json:"schema"`
		Strict      *bool           `json:"strict"`
	} `json:"json_schema"`
}

// chatShared are Chat's members Responses has too, with the same meaning.
var chatShared = []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs", "verbosity"}

// chatOnly are Chat's members neither other API has: dropped, listed.
var chatOnly = []string{"logprobs", "seed", "frequency_penalty", "presence_penalty", "logit_bias",
	"audio", "modalities", "prediction", "web_search_options", "functions", "function_call"}

// chatKnown are the members the Chat reader reads (or drops on purpose).
var chatKnown = set(append(append([]string{"model", "messages", "tools", "tool_choice",
	"parallel_tool_calls", "max_tokens", "max_completion_tokens", "temperature", "top_p", "stop",
	"response_format", "reasoning_effort", "user", "metadata", "stream", "stream_options", "n",
	"store"}, chatShared...), chatOnly...))

// chatReadRequest reads a Chat request's members into r. A member only
// Chat has (chatOnly) is listed as dropped only when it asks for
// something: logprobs: false or seed: null asks for nothing the engine
// would not do anyway, and a drop logged for it would hide the ones that
// matter.
func chatReadRequest(r *Request, top map[string]json.RawMessage) error {
	r.Model = top["model"]
	var msgs []json.RawMessage
	if _, err := field(top, "messages", &msgs); err != nil {
		return err
	}
	for i, raw := range msgs {
		if err := chatReadMessage(r, i, raw); err != nil {
			return err
		}
	}
	if err := chatReadTools(r, top); err != nil {
		return err
	}
	if err := chatReadOptions(r, top); err != nil {
		return err
	}
	for _, k := range chatOnly {
		if raw, ok := top[k]; ok && !IsNull(raw) && string(raw) != "false" {
			r.drops.add(k, k)
		}
	}
	unknownMembers(r, top, chatKnown)
	return nil
}

// chatReadMessage reads messages[i]. developer is OpenAI's newer name for
// system, and both are instructions wherever they stand; a tool message
// is a result, joined to the results before it (addResult), since Messages
// wants all of a turn's results in one user message
// (docs/translation-facts.md#t4). An unknown role is a 400: a guess would
// put the words in the wrong speaker's mouth.
func chatReadMessage(r *Request, i int, raw json.RawMessage) error {
	member := "messages[" + strconv.Itoa(i) + "]"
	var m chatMsgIn
	if err := json.Unmarshal(raw, &m); err != nil {
		return &Error{Member: member, Reason: "not a valid message: " + err.Error()}
	}
	parts, err := chatReadContent(r, member, m.Content)
	if err != nil {
		return err
	}
	switch m.Role {
	case "system", "developer":
		r.Messages = append(r.Messages, Message{Role: RoleSystem, Parts: parts, Member: member})
	case "user":
		r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: parts, Member: member})
	case "assistant":
		msg := Message{Role: RoleAssistant, Member: member}
		// Reasoning first, then the text, then the calls: the order the
		// model said them in, which a writer keeps.
		if m.ReasoningContent != nil && *m.ReasoningContent != "" {
			msg.Parts = append(msg.Parts, Part{Kind: PartThinking, Text: *m.ReasoningContent, Member: member + ".reasoning_content"})
		}
		msg.Parts = append(msg.Parts, parts...)
		for j, c := range m.ToolCalls {
			msg.Parts = append(msg.Parts, Part{Kind: PartCall, ID: c.ID, Name: c.Function.Name,
				Args: argsText(c.Function.Arguments), Member: member + ".tool_calls[" + strconv.Itoa(j) + "]"})
		}
		r.Messages = append(r.Messages, msg)
	case "tool":
		r.addResult(Part{Kind: PartResult, ID: m.ToolCallID, Content: parts, Member: member}, member)
	default:
		return &Error{Member: member + ".role", Reason: "unknown role " + strconv.Quote(m.Role)}
	}
	return nil
}

// chatReadContent reads a Chat message's content: a string or an array of
// parts (text, image_url; refusal read as text, since no request of the
// other APIs has a refusal, and the model should still read what it said).
// Other parts (input_audio, file) have no counterpart: dropped, listed.
func chatReadContent(r *Request, member string, raw json.RawMessage) ([]Part, error) {
	if IsNull(raw) {
		return nil, nil
	}
	if s, ok := JSONString(raw); ok {
		return []Part{{Kind: PartText, Text: s}}, nil
	}
	var in []chatPartIn
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, &Error{Member: member + ".content", Reason: "neither a string nor an array of parts"}
	}
	var parts []Part
	for j, p := range in {
		pm := member + ".content[" + strconv.Itoa(j) + "]"
		switch p.Type {
		case "text":
			parts = append(parts, Part{Kind: PartText, Text: p.Text})
		case "refusal":
			parts = append(parts, Part{Kind: PartText, Text: p.Refusal})
		case "image_url":
			url, detail := chatImageURL(p.ImageURL)
			parts = append(parts, Part{Kind: PartImage, URL: url, Detail: detail, Member: pm})
		default:
			r.drops.add("part "+p.Type, pm+" ("+p.Type+")")
		}
	}
	return parts, nil
}

// chatImageURL reads image_url: {url, detail}, or a bare string some
// clients send. The url is an http(s) URL or a data: URI, which each
// writer turns into its API's image (docs/translation-facts.md#requests);
// detail (low, high, auto), which Messages has no word for, only the OpenAI
// APIs carry.
func chatImageURL(raw json.RawMessage) (url, detail string) {
	if s, ok := JSONString(raw); ok {
		return s, ""
	}
	var v struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	}
	_ = json.Unmarshal(raw, &v)
	return v.URL, v.Detail
}

// chatReadTools reads tools, tool_choice and parallel_tool_calls. A string
// tool_choice other than auto, none and required is a 400, as OpenAI
// answers one; an object that names no function (allowed_tools, a custom
// tool) is dropped, and the engine chooses as it would with auto.
func chatReadTools(r *Request, top map[string]json.RawMessage) error {
	var tools []json.RawMessage
	if _, err := field(top, "tools", &tools); err != nil {
		return err
	}
	for i, raw := range tools {
		member := "tools[" + strconv.Itoa(i) + "]"
		var t chatToolIn
		if err := json.Unmarshal(raw, &t); err != nil {
			return &Error{Member: member, Reason: "not a valid tool: " + err.Error()}
		}
		if t.Type != "function" && t.Type != "" {
			r.drops.add("tool "+t.Type, member+" ("+t.Type+")")
			continue
		}
		r.Tools = append(r.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description,
			Params: nonNull(t.Function.Parameters), Strict: t.Function.Strict})
	}
	if raw, ok := top["tool_choice"]; ok && !IsNull(raw) {
		r.ChoiceMember = "tool_choice"
		if s, ok := JSONString(raw); ok {
			r.Choice = Choice(s)
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
				r.Choice, r.ChoiceName = ChoiceNamed, c.Function.Name
			}
		}
	}
	_, err := field(top, "parallel_tool_calls", &r.Parallel)
	return err
}

// chatReadOptions reads the sampling and output options. max_tokens and
// max_completion_tokens are one limit under its old and new name: the new
// one, read second, wins when a client sends both. metadata is carried
// as it is toward Responses, which has the same member; the other writers
// drop it.
func chatReadOptions(r *Request, top map[string]json.RawMessage) error {
	fields := []struct {
		key string
		dst any
	}{
		{"max_tokens", &r.MaxTokens}, {"max_completion_tokens", &r.MaxTokens},
		{"temperature", &r.Temperature}, {"top_p", &r.TopP},
		{"reasoning_effort", &r.Effort}, {"user", &r.User}, {"stream", &r.Stream}, {"n", &r.N},
	}
	for _, f := range fields {
		if _, err := field(top, f.key, f.dst); err != nil {
			return err
		}
	}
	if r.Effort != "" {
		r.EffortMember = "reasoning_effort"
	}
	if raw := top["metadata"]; !IsNull(raw) {
		r.Metadata = raw
	}
	if raw := top["stop"]; !IsNull(raw) {
		if s, ok := JSONString(raw); ok {
			r.StopSequences = []string{s}
		} else if err := json.Unmarshal(raw, &r.StopSequences); err != nil {
			return &Error{Member: "stop", Reason: "neither a string nor an array of strings"}
		}
	}
	var f chatFormatIn
	if ok, err := field(top, "response_format", &f); err != nil {
		return err
	} else if ok && (f.Type == "json_schema" || f.Type == "json_object") {
		r.Format = &Format{Kind: f.Type, Name: f.JSONSchema.Name, Description: f.JSONSchema.Description,
			Schema: nonNull(f.JSONSchema.Schema), Strict: f.JSONSchema.Strict, Member: "response_format"}
	}
	// The members Chat and Responses share go along as the client wrote
	// them (Request.OpenAI): the Responses writer appends them, the others
	// drop what they cannot say.
	for _, k := range chatShared {
		if raw, ok := top[k]; ok && !IsNull(raw) {
			if r.OpenAI == nil {
				r.OpenAI = map[string]json.RawMessage{}
			}
			r.OpenAI[k] = raw
		}
	}
	return nil
}

// Writing a Chat Completions request: for a Messages or Responses client
// of an engine that speaks Chat only, as most local engines do. It is the
// body OpenAI's API takes, which llama.cpp, vLLM, SGLang and Ollama read
// too; a member the request did not set is left out, so the engine's own
// default applies rather than one the gateway would pick.

// chatOut is the request written. MaxTokens and MaxCompletionTokens are one
// limit under two names, and one of them is written (chatWriteRequest).
type chatOut struct {
	Model               json.RawMessage `json:"model,omitempty"`
	Messages            []chatMsgOut    `json:"messages"`
	Tools               []chatToolOut   `json:"tools,omitempty"`
	ToolChoice          any             `json:"tool_choice,omitempty"`
	Parallel            *bool           `json:"parallel_tool_calls,omitempty"`
	MaxTokens           *int            `json:"max_tokens,omitempty"`
	MaxCompletionTokens *int            `json:"max_completion_tokens,omitempty"`
	Temperature         *float64        `json:"temperature,omitempty"`
	TopP                *float64        `json:"top_p,omitempty"`
	Stop                []string        `json:"stop,omitempty"`
	ResponseFormat      any             `json:"response_format,omitempty"`
	ReasoningEffort     string          `json:"reasoning_effort,omitempty"`
	User                string          `json:"user,omitempty"`
	Metadata            json.RawMessage `json:"metadata,omitempty"`
	Stream              bool            `json:"stream,omitempty"`
	StreamOptions       *chatStreamOpts `json:"stream_options,omitempty"`
	N                   int             `json:"n,omitempty"`
}

// chatStreamOpts is stream_options: include_usage is the only way a Chat
// stream reports its usage (docs/translation-facts.md#t10).
type chatStreamOpts struct {
	IncludeUsage bool `json:"include_usage"`
}

// chatMsgOut is one message written. Content is a string, an array of
// chatPartOut, or null for an assistant turn of tool calls alone, as
// OpenAI's own answers write one.
type chatMsgOut struct {
	Role       string        `json:"role"`
	Content    any           `json:"content"`
	ToolCalls  []chatCallOut `json:"tool_calls,omitempty"`
	ToolCallID string        `json:"tool_call_id,omitempty"`
}

// chatCallOut is an assistant's tool call in history, its arguments a JSON
// text inside a string, as Chat has them.
type chatCallOut struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function chatFuncCall `json:"function"`
}

type chatFuncCall struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// chatPartOut is one part of a user message's content; Text is a pointer
// so that an image part writes no text member.
type chatPartOut struct {
	Type     string        `json:"type"`
	Text     *string       `json:"text,omitempty"`
	ImageURL *chatImageOut `json:"image_url,omitempty"`
}

type chatImageOut struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// chatToolOut is one of tools[], a function: the only kind of tool the
// other APIs' tools become.
type chatToolOut struct {
	Type     string       `json:"type"`
	Function chatFuncDecl `json:"function"`
}

type chatFuncDecl struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chatFormatOut is response_format; json_schema names its schema, which
// Chat requires and Messages does not give (formatName).
type chatFormatOut struct {
	Type       string         `json:"type"`
	JSONSchema *chatSchemaOut `json:"json_schema,omitempty"`
}

type chatSchemaOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Schema      json.RawMessage `json:"schema,omitempty"`
	Strict      *bool           `json:"strict,omitempty"`
}

// chatWriteRequest writes r as a Chat request. Chat has a member for
// nearly all the neutral form holds: only the reasoning of another API's
// turns is dropped (chatMessagesOut). The members Chat and Responses share
// (Request.OpenAI) are appended as the client wrote them.
func chatWriteRequest(r *Request, _ RequestOptions) ([]byte, error) {
	out := chatOut{Model: r.Model, Messages: []chatMsgOut{}, Temperature: r.Temperature, TopP: r.TopP,
		Stop: r.StopSequences, ReasoningEffort: r.Effort, User: r.User, Metadata: r.Metadata, Stream: r.Stream}
	for _, m := range r.Messages {
		out.Messages = chatMessagesOut(r, out.Messages, m)
	}
	for _, t := range r.Tools {
		out.Tools = append(out.Tools, chatToolOut{Type: "function", Function: chatFuncDecl{
			Name: t.Name, Description: t.Description, Parameters: t.Params, Strict: t.Strict}})
	}
	if len(out.Tools) > 0 {
		// OpenAI refuses parallel_tool_calls without tools.
		out.Parallel = r.Parallel
	}
	switch r.Choice {
	case ChoiceAuto, ChoiceNone, ChoiceRequired:
		out.ToolChoice = string(r.Choice)
	case ChoiceNamed:
		out.ToolChoice = map[string]any{"type": "function", "function": map[string]string{"name": r.ChoiceName}}
	}
	// max_completion_tokens is what OpenAI's reasoning models accept and
	// max_tokens what every engine does (llama.cpp, vLLM, Ollama, OpenAI's
	// other models): a request that asks for reasoning gets the first.
	if r.Effort != "" {
		out.MaxCompletionTokens = r.MaxTokens
	} else {
		out.MaxTokens = r.MaxTokens
	}
	if r.Stream {
		// Without include_usage a Chat stream reports no usage at all
		// (docs/translation-facts.md#t10), and the gateway charges by it.
		out.StreamOptions = &chatStreamOpts{IncludeUsage: true}
	}
	if f := r.Format; f != nil {
		if f.Kind == "json_object" {
			out.ResponseFormat = chatFormatOut{Type: "json_object"}
		} else {
			out.ResponseFormat = chatFormatOut{Type: "json_schema", JSONSchema: &chatSchemaOut{
				Name: formatName(f), Description: f.Description, Schema: f.Schema, Strict: f.Strict}}
		}
	}
	if r.N > 0 {
		out.N = r.N
	}
	b, err := Marshal(out)
	if err != nil {
		return nil, err
	}
	return withExtra(b, r.OpenAI), nil
}

// chatMessagesOut appends m as Chat messages: a turn's tool results become
// role tool messages ahead of the user's own words, and images a tool
// returned (Chat's tool messages carry text only) move into the user
// message after them. The tool messages come first because OpenAI takes a
// tool message only right after the assistant message whose tool_calls
// it answers, or after another tool message.
func chatMessagesOut(r *Request, out []chatMsgOut, m Message) []chatMsgOut {
	switch m.Role {
	case RoleSystem:
		// Chat keeps instructions where the client put them, a system
		// message mid-conversation included (Claude Code's, a Responses
		// item of role developer).
		if text := Texts(m.Parts, "\n\n"); text != "" {
			out = append(out, chatMsgOut{Role: "system", Content: text})
		}
	case RoleAssistant:
		msg := chatMsgOut{Role: "assistant"}
		for _, p := range m.Parts {
			switch p.Kind {
			case PartCall:
				msg.ToolCalls = append(msg.ToolCalls, chatCallOut{ID: p.ID, Type: "function",
					Function: chatFuncCall{Name: p.Name, Arguments: p.Args}})
			case PartThinking, PartRedacted:
				// Reasoning of another API's model is not Chat history: it
				// has no member for it, and its signature is Messages' only.
				r.drops.add("thinking", p.Member+" (thinking)")
			}
		}
		if text := Texts(m.Parts, ""); text != "" {
			msg.Content = text
		}
		if msg.Content != nil || len(msg.ToolCalls) > 0 {
			out = append(out, msg)
		}
	case RoleUser:
		var rest []Part
		for _, p := range m.Parts {
			if p.Kind != PartResult {
				rest = append(rest, p)
				continue
			}
			// Chat has no is_error: ResultText says it in the text.
			out = append(out, chatMsgOut{Role: "tool", ToolCallID: p.ID, Content: ResultText(p)})
			for _, c := range p.Content {
				if c.Kind == PartImage {
					rest = append(rest, c)
				}
			}
		}
		if content := chatUserContent(rest); content != nil {
			out = append(out, chatMsgOut{Role: "user", Content: content})
		}
	}
	return out
}

// chatUserContent is a user message's content: a string for text alone,
// else an array of parts; nil for nothing.
func chatUserContent(parts []Part) any {
	if len(parts) == 1 && parts[0].Kind == PartText {
		return parts[0].Text
	}
	var out []chatPartOut
	for _, p := range parts {
		switch p.Kind {
		case PartText:
			out = append(out, chatPartOut{Type: "text", Text: &p.Text})
		case PartImage:
			out = append(out, chatPartOut{Type: "image_url", ImageURL: &chatImageOut{URL: p.URL, Detail: p.Detail}})
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
