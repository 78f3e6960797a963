package translate

import (
	"encoding/json"
	"github.com/llmgateway/caddy-llm-gateway/api"
	"strconv"
	"strings"
)

// Writing an Anthropic Messages request.

type rqMsgOut struct {
	Model         json.RawMessage   `json:"model,omitempty"`
	MaxTokens     int               `json:"max_tokens"`
	System        []rqMsgBlockOut   `json:"system,omitempty"`
	Messages      []rqMsgMsgOut     `json:"messages"`
	Tools         []rqMsgToolOut    `json:"tools,omitempty"`
	ToolChoice    *rqMsgChoiceOut   `json:"tool_choice,omitempty"`
	Temperature   *float64          `json:"temperature,omitempty"`
	TopP          *float64          `json:"top_p,omitempty"`
	StopSequences []string          `json:"stop_sequences,omitempty"`
	Stream        bool              `json:"stream,omitempty"`
	Metadata      *rqMsgMetadataOut `json:"metadata,omitempty"`
	Thinking      *rqMsgThinkingOut `json:"thinking,omitempty"`
	OutputConfig  *rqMsgOutputOut   `json:"output_config,omitempty"`
}

type rqMsgMsgOut struct {
	Role    string          `json:"role"`
	Content []rqMsgBlockOut `json:"content"`
}

type rqMsgBlockOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	Source    *rqMsgSourceOut `json:"source,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   any             `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      string          `json:"data,omitempty"`
}

type rqMsgSourceOut struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type rqMsgToolOut struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

type rqMsgChoiceOut struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitempty"`
}

type rqMsgMetadataOut struct {
	UserID string `json:"user_id"`
}

type rqMsgThinkingOut struct {
	Type         string `json:"type"`
	BudgetTokens int    `json:"budget_tokens"`
}

type rqMsgOutputOut struct {
	Format *rqMsgFormatIn `json:"format,omitempty"`
}

// rqEmptySchema is the input_schema of a tool that declares no parameters:
// Messages requires one.
var rqEmptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

func rqWriteMessages(r *rqRequest, o RequestOptions) ([]byte, error) {
	if r.n > 1 {
		return nil, &Error{Member: "n", Reason: "Messages answers one choice"}
	}
	out := rqMsgOut{Model: r.model, Messages: []rqMsgMsgOut{}, Temperature: r.temperature, TopP: r.topP, Stream: r.stream}
	out.MaxTokens = o.MaxTokens
	if out.MaxTokens <= 0 {
		out.MaxTokens = DefaultMaxTokens
	}
	if r.maxTokens != nil && *r.maxTokens > 0 {
		out.MaxTokens = *r.maxTokens
	}
	var system []string
	for _, m := range r.messages {
		if m.role == rqSystem {
			if text := rqTexts(m.parts, "\n\n"); strings.TrimSpace(text) != "" {
				system = append(system, text)
			}
			continue
		}
		out.Messages = rqMsgAppend(r, out.Messages, m)
	}
	if len(system) > 0 {
		// One block: empty ones are refused (T1), and the instructions of a
		// Chat transcript, wherever they were, are read first by Claude.
		text := strings.Join(system, "\n\n")
		out.System = []rqMsgBlockOut{{Type: "text", Text: &text}}
	}
	if t := out.Temperature; t != nil && *t > 1 {
		// OpenAI's scale goes to 2, Messages' to 1; Anthropic's own
		// OpenAI-compatible endpoint caps it the same way.
		one := 1.0
		out.Temperature = &one
	}
	for i, s := range r.stop {
		if strings.TrimSpace(s) == "" {
			// Messages refuses white-space-only stop sequences (T12).
			r.drops.add("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		out.StopSequences = append(out.StopSequences, s)
	}
	rqMsgTools(r, &out)
	rqMsgThinking(r, &out)
	rqMsgUser(r, &out)
	if f := r.format; f != nil {
		if f.kind == "json_schema" && f.schema != nil {
			out.OutputConfig = &rqMsgOutputOut{Format: &rqMsgFormatIn{Type: "json_schema", Schema: f.schema}}
		} else {
			// Messages has no "any JSON object" mode; a client asking for
			// json_object has said "JSON" in its prompt too (OpenAI
			// requires it), which Claude follows.
			r.drops.add("response_format", f.member)
		}
	}
	for _, k := range []string{"top_logprobs", "verbosity", "service_tier"} {
		raw, ok := r.openai[k]
		if !ok || k == "service_tier" && (string(raw) == `"auto"` || string(raw) == `"default"`) {
			continue
		}
		r.drops.add(k, rqOpenAIMember(r.from, k))
	}
	return rqMarshal(out)
}

// rqOpenAIMember is the client's path of a member Chat and Responses share.
func rqOpenAIMember(from api.API, key string) string {
	if from == api.Responses && key == "verbosity" {
		return "text.verbosity"
	}
	return key
}

// rqMsgAppend appends m's blocks, to the message before when it has the
// same role: Messages wants one message per turn, with all tool results of
// a turn in one user message, ahead of any text (T4).
func rqMsgAppend(r *rqRequest, out []rqMsgMsgOut, m rqMessage) []rqMsgMsgOut {
	role := "user"
	if m.role == rqAssistant {
		role = "assistant"
	}
	var blocks []rqMsgBlockOut
	for _, p := range m.parts {
		if b, ok := rqMsgBlock(r, p); ok {
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
		blocks = rqResultsFirst(blocks)
	}
	return append(out, rqMsgMsgOut{Role: role, Content: blocks})
}

func rqResultsFirst(blocks []rqMsgBlockOut) []rqMsgBlockOut {
	sorted := make([]rqMsgBlockOut, 0, len(blocks))
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

// rqMsgBlock is p as a content block; ok is false for a part Messages
// cannot carry or that would be refused (an empty text, T1).
func rqMsgBlock(r *rqRequest, p rqPart) (rqMsgBlockOut, bool) {
	switch p.kind {
	case rqText:
		if strings.TrimSpace(p.text) == "" {
			// "text content blocks must contain non-whitespace text" (T1)
			return rqMsgBlockOut{}, false
		}
		return rqMsgBlockOut{Type: "text", Text: &p.text}, true
	case rqImage:
		if mt, data, ok := rqSplitDataURI(p.url); ok {
			return rqMsgBlockOut{Type: "image", Source: &rqMsgSourceOut{Type: "base64", MediaType: mt, Data: data}}, true
		}
		if strings.HasPrefix(p.url, "http://") || strings.HasPrefix(p.url, "https://") {
			return rqMsgBlockOut{Type: "image", Source: &rqMsgSourceOut{Type: "url", URL: p.url}}, true
		}
		r.drops.add("image url", p.member+" (image)")
	case rqCall:
		input, ok := rqArgsObject(p.args)
		if !ok {
			// A call whose arguments were cut short or are not an object:
			// the turn is kept, with arguments Messages accepts.
			r.drops.add("arguments", p.member+" (arguments not a JSON object)")
		}
		return rqMsgBlockOut{Type: "tool_use", ID: rqSanitizeID(p.id), Name: p.name, Input: input}, true
	case rqResult:
		b := rqMsgBlockOut{Type: "tool_result", ToolUseID: rqSanitizeID(p.id), IsError: p.isError}
		var content []rqMsgBlockOut
		for _, c := range p.content {
			if cb, ok := rqMsgBlock(r, c); ok {
				content = append(content, cb)
			}
		}
		if len(content) == 1 && content[0].Type == "text" {
			b.Content = *content[0].Text
		} else if len(content) > 0 {
			b.Content = content
		}
		return b, true
	case rqThinking:
		if p.signature == "" {
			// Messages replays thinking only with the signature its own
			// model wrote; another engine's reasoning text has none.
			r.drops.add("thinking", p.member)
			return rqMsgBlockOut{}, false
		}
		return rqMsgBlockOut{Type: "thinking", Thinking: &p.text, Signature: &p.signature}, true
	case rqRedacted:
		return rqMsgBlockOut{Type: "redacted_thinking", Data: p.text}, true
	}
	return rqMsgBlockOut{}, false
}

// rqMsgTools writes tools and tool_choice. A transcript with tool calls but
// no tools is refused by Messages ("requests which include tool_use or
// tool_result blocks must define tools"), which Chat and Responses allow:
// the tools the history calls are declared with an open schema, and
// tool_choice none keeps the model from calling them.
func rqMsgTools(r *rqRequest, out *rqMsgOut) {
	for _, t := range r.tools {
		schema := t.params
		if schema == nil {
			schema = rqEmptySchema
		}
		out.Tools = append(out.Tools, rqMsgToolOut{Name: t.name, Description: t.description, InputSchema: schema})
	}
	choice := r.choice
	if len(out.Tools) == 0 {
		seen := map[string]bool{}
		for _, m := range out.Messages {
			for _, b := range m.Content {
				if b.Type == "tool_use" && !seen[b.Name] {
					seen[b.Name] = true
					out.Tools = append(out.Tools, rqMsgToolOut{Name: b.Name, InputSchema: rqEmptySchema})
				}
			}
		}
		if len(out.Tools) == 0 {
			return
		}
		choice = rqChoiceNone
	}
	switch choice {
	case rqChoiceAuto, rqChoiceNone:
		out.ToolChoice = &rqMsgChoiceOut{Type: string(choice)}
	case rqChoiceRequired:
		out.ToolChoice = &rqMsgChoiceOut{Type: "any"}
	case rqChoiceNamed:
		out.ToolChoice = &rqMsgChoiceOut{Type: "tool", Name: r.choiceName}
	}
	if r.parallel != nil && !*r.parallel && choice != rqChoiceNone {
		if out.ToolChoice == nil {
			out.ToolChoice = &rqMsgChoiceOut{Type: "auto"}
		}
		out.ToolChoice.DisableParallelToolUse = true
	}
}

// rqMsgThinking writes an OpenAI reasoning effort as extended thinking, a
// budget below max_tokens (Messages' rule), or drops it when Messages would
// refuse the request with it: a budget below the minimum, a forced tool
// choice, or a tool loop whose last assistant turn has no thinking block
// to start with (T8), which another API's transcript never has.
func rqMsgThinking(r *rqRequest, out *rqMsgOut) {
	budget := rqEffortBudget(r.effort)
	if budget == 0 {
		if r.effort != "" && r.effort != "none" {
			r.drops.add("reasoning", r.effortMember)
		}
		return
	}
	budget = min(budget, out.MaxTokens-1)
	forced := out.ToolChoice != nil && (out.ToolChoice.Type == "any" || out.ToolChoice.Type == "tool")
	if budget < rqBudgetMin || forced || rqLastTurnUnthought(out.Messages) {
		r.drops.add("reasoning", r.effortMember)
		return
	}
	out.Thinking = &rqMsgThinkingOut{Type: "enabled", BudgetTokens: budget}
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

// rqLastTurnUnthought says whether the last assistant message calls a tool
// without starting with a thinking block.
func rqLastTurnUnthought(msgs []rqMsgMsgOut) bool {
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

// rqMsgUser writes the client's user as metadata.user_id, except one that
// looks like an e-mail address or a phone number, which Anthropic asks
// never to send (LiteLLM skips them too).
func rqMsgUser(r *rqRequest, out *rqMsgOut) {
	if len(r.metadata) > 0 && string(r.metadata) != "{}" {
		r.drops.add("metadata", "metadata")
	}
	u := r.user
	if u == "" {
		return
	}
	if strings.Contains(u, "@") || rqPhoneLike(u) {
		r.drops.add("user", "user")
		return
	}
	out.Metadata = &rqMsgMetadataOut{UserID: u}
}

func rqPhoneLike(s string) bool {
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
