package translate

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"
)

// Writing a Bedrock Converse request (docs/translation-facts.md#cloud-providers). The body names
// neither the model nor streaming: the path does both
// (/model/{id}/converse, /converse-stream), which the provider sets.
//
// Decisions, where Converse has no word for what a client said:
//   - tool_choice none: Converse has no "none". The tools are left out,
//     so the model cannot call one; a transcript with tool calls must
//     declare tools all the same ("toolConfig field must be defined"),
//     so then they go with auto and tool_choice is listed as dropped.
//   - an image by URL (not a data: URI) is a *Error: Converse takes the
//     bytes only, and the gateway does not fetch a client's URLs.
//   - reasoning effort becomes Claude's extended thinking in
//     additionalModelRequestFields, by the rules of the Messages writer;
//     for other models it is dropped (their fields differ per family).

type cvOut struct {
	Messages   []cvMsgOut       `json:"messages"`
	System     []cvBlockOut     `json:"system,omitempty"`
	Inference  *cvInferenceOut  `json:"inferenceConfig,omitempty"`
	ToolConfig *cvToolConfigOut `json:"toolConfig,omitempty"`
	Additional map[string]any   `json:"additionalModelRequestFields,omitempty"`
}

type cvMsgOut struct {
	Role    string       `json:"role"`
	Content []cvBlockOut `json:"content"`
}

// cvBlockOut is one member of Converse's ContentBlock union.
type cvBlockOut struct {
	Text       *string         `json:"text,omitempty"`
	Image      *cvImageOut     `json:"image,omitempty"`
	ToolUse    *cvToolUseOut   `json:"toolUse,omitempty"`
	ToolResult *cvResultOut    `json:"toolResult,omitempty"`
	Reasoning  *cvReasoningOut `json:"reasoningContent,omitempty"`
	JSON       json.RawMessage `json:"json,omitempty"` // a tool result's
}

type cvImageOut struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"` // base64, as JSON carries a blob
	} `json:"source"`
}

type cvToolUseOut struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

type cvResultOut struct {
	ToolUseID string       `json:"toolUseId"`
	Content   []cvBlockOut `json:"content"`
	Status    string       `json:"status,omitempty"`
}

type cvReasoningOut struct {
	Text *struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	} `json:"reasoningText,omitempty"`
	Redacted string `json:"redactedContent,omitempty"`
}

type cvInferenceOut struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

type cvToolConfigOut struct {
	Tools  []cvToolOut    `json:"tools"`
	Choice map[string]any `json:"toolChoice,omitempty"`
}

type cvToolOut struct {
	Spec struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	} `json:"toolSpec"`
}

func rqWriteConverse(r *rqRequest, o RequestOptions) ([]byte, error) {
	if r.n > 1 {
		return nil, &Error{Member: "n", Reason: "Converse answers one choice"}
	}
	out := cvOut{Messages: []cvMsgOut{}}
	for _, m := range r.messages {
		if m.role == rqSystem {
			// Blank text blocks are refused (T1), the system's too.
			if text := rqTexts(m.parts, "\n\n"); strings.TrimSpace(text) != "" {
				out.System = append(out.System, cvBlockOut{Text: &text})
			}
			continue
		}
		var err error
		if out.Messages, err = cvAppend(r, out.Messages, m); err != nil {
			return nil, err
		}
	}
	inf := cvInferenceOut{MaxTokens: r.maxTokens, Temperature: r.temperature, TopP: r.topP}
	if t := inf.Temperature; t != nil && *t > 1 {
		// Converse's scale is 0–1 for every model, OpenAI's goes to 2.
		one := 1.0
		inf.Temperature = &one
	}
	for i, s := range r.stop {
		if strings.TrimSpace(s) == "" {
			r.drops.add("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		inf.StopSequences = append(inf.StopSequences, s)
	}
	cvTools(r, &out)
	cvThinking(r, o, &out, &inf)
	if inf.MaxTokens != nil || inf.Temperature != nil || inf.TopP != nil || len(inf.StopSequences) > 0 {
		out.Inference = &inf
	}
	if r.format != nil {
		r.drops.add("response_format", r.format.member)
	}
	if r.user != "" {
		r.drops.add("user", "user")
	}
	if len(r.metadata) > 0 && string(r.metadata) != "{}" {
		r.drops.add("metadata", "metadata")
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

// cvAppend appends m's blocks, to the message before when it has the same
// role: Converse wants user and assistant turns to alternate, and a
// user turn's tool results ahead of its text, all of them together (T4).
func cvAppend(r *rqRequest, out []cvMsgOut, m rqMessage) ([]cvMsgOut, error) {
	role := "user"
	if m.role == rqAssistant {
		role = "assistant"
	}
	var blocks []cvBlockOut
	for _, p := range m.parts {
		b, ok, err := cvBlock(r, p, m.member)
		if err != nil {
			return nil, err
		}
		if ok {
			blocks = append(blocks, b)
		}
	}
	if len(blocks) == 0 {
		return out, nil
	}
	if n := len(out); n > 0 && out[n-1].Role == role {
		blocks = append(out[n-1].Content, blocks...)
		out = out[:n-1]
	}
	if role == "user" {
		sorted := make([]cvBlockOut, 0, len(blocks))
		for _, pass := range [...]bool{true, false} {
			for _, b := range blocks {
				if (b.ToolResult != nil) == pass {
					sorted = append(sorted, b)
				}
			}
		}
		blocks = sorted
	}
	return append(out, cvMsgOut{Role: role, Content: blocks}), nil
}

// cvBlock is p as a content block; ok is false for a part Converse
// cannot carry or would refuse (a blank text).
func cvBlock(r *rqRequest, p rqPart, member string) (cvBlockOut, bool, error) {
	if p.member != "" {
		member = p.member
	}
	switch p.kind {
	case rqText:
		if strings.TrimSpace(p.text) == "" {
			return cvBlockOut{}, false, nil
		}
		return cvBlockOut{Text: &p.text}, true, nil
	case rqImage:
		img, err := cvImage(p.url, member)
		if err != nil {
			return cvBlockOut{}, false, err
		}
		return cvBlockOut{Image: img}, true, nil
	case rqCall:
		input, ok := rqArgsObject(p.args)
		if !ok {
			r.drops.add("arguments", member+" (arguments not a JSON object)")
		}
		return cvBlockOut{ToolUse: &cvToolUseOut{ToolUseID: cvToolID(p.id), Name: p.name, Input: input}}, true, nil
	case rqResult:
		res := &cvResultOut{ToolUseID: cvToolID(p.id), Content: []cvBlockOut{}}
		if p.isError {
			res.Status = "error"
		}
		for _, c := range p.content {
			b, ok, err := cvBlock(r, c, member)
			if err != nil {
				return cvBlockOut{}, false, err
			}
			if ok {
				res.Content = append(res.Content, b)
			}
		}
		if len(res.Content) == 0 {
			// A tool that printed nothing: Converse refuses both an empty
			// content and a blank text; an empty JSON object says nothing.
			res.Content = append(res.Content, cvBlockOut{JSON: json.RawMessage(`{}`)})
		}
		return cvBlockOut{ToolResult: res}, true, nil
	case rqThinking:
		if p.signature == "" {
			// Replayed reasoning needs the signature its model wrote;
			// another engine's reasoning text has none (T8).
			r.drops.add("thinking", member)
			return cvBlockOut{}, false, nil
		}
		rc := &cvReasoningOut{Text: &struct {
			Text      string `json:"text"`
			Signature string `json:"signature,omitempty"`
		}{p.text, p.signature}}
		return cvBlockOut{Reasoning: rc}, true, nil
	case rqRedacted:
		return cvBlockOut{Reasoning: &cvReasoningOut{Redacted: p.text}}, true, nil
	}
	return cvBlockOut{}, false, nil
}

// cvImage is a data: URI's image; any other URL is an *Error, as Converse
// takes bytes (or S3 locations) only (T13).
func cvImage(url, member string) (*cvImageOut, error) {
	mt, data, ok := rqSplitDataURI(url)
	if !ok {
		return nil, &Error{Member: member, Reason: "Bedrock Converse takes images as bytes (a data: URI), not by URL"}
	}
	format := strings.TrimPrefix(strings.ToLower(mt), "image/")
	switch format {
	case "jpg":
		format = "jpeg"
	case "png", "jpeg", "gif", "webp":
	default:
		return nil, &Error{Member: member, Reason: "Bedrock Converse takes png, jpeg, gif and webp images, not " + strconv.Quote(mt)}
	}
	img := &cvImageOut{Format: format}
	img.Source.Bytes = data
	return img, nil
}

// cvToolID is a tool call's id as Converse takes it: ^[a-zA-Z0-9_-]+$ as
// toward Messages (T3), and at most 64 bytes. A longer id keeps its head
// and gets a hash of the whole: the same for a call and its result, and
// on every later turn.
func cvToolID(id string) string {
	id = rqSanitizeID(id)
	if len(id) <= 64 {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return id[:47] + "_" + strconv.FormatUint(h.Sum64()|1<<63, 16)
}

// cvEmptySchema is the input schema of a tool that declares no parameters.
var cvEmptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// cvTools writes toolConfig (see the decisions above for tool_choice
// none).
func cvTools(r *rqRequest, out *cvOut) {
	cfg := &cvToolConfigOut{}
	for _, t := range r.tools {
		var tool cvToolOut
		tool.Spec.Name, tool.Spec.Description = t.name, t.description
		tool.Spec.InputSchema.JSON = t.params
		if t.params == nil {
			tool.Spec.InputSchema.JSON = cvEmptySchema
		}
		cfg.Tools = append(cfg.Tools, tool)
	}
	seen := map[string]bool{}
	history := false
	for _, m := range out.Messages {
		for _, b := range m.Content {
			switch {
			case b.ToolResult != nil:
				history = true
			case b.ToolUse != nil:
				history = true
				if len(r.tools) == 0 && !seen[b.ToolUse.Name] {
					// Declared, with an open schema, for the history
					// only (Converse refuses tool blocks without tools).
					seen[b.ToolUse.Name] = true
					var tool cvToolOut
					tool.Spec.Name = b.ToolUse.Name
					tool.Spec.InputSchema.JSON = cvEmptySchema
					cfg.Tools = append(cfg.Tools, tool)
				}
			}
		}
	}
	choice := r.choice
	if len(r.tools) == 0 && len(cfg.Tools) > 0 {
		choice = rqChoiceNone
	}
	if choice == rqChoiceNone && !history {
		return // none, said by giving the model no tools
	}
	if len(cfg.Tools) == 0 {
		return
	}
	switch choice {
	case rqChoiceNone:
		if len(r.tools) > 0 {
			r.drops.add("tool_choice", r.choiceMember)
		}
	case rqChoiceAuto:
		cfg.Choice = map[string]any{"auto": struct{}{}}
	case rqChoiceRequired:
		cfg.Choice = map[string]any{"any": struct{}{}}
	case rqChoiceNamed:
		cfg.Choice = map[string]any{"tool": map[string]string{"name": r.choiceName}}
	}
	if r.parallel != nil && !*r.parallel {
		r.drops.add("parallel_tool_calls", "parallel_tool_calls")
	}
	out.ToolConfig = cfg
}

// cvThinking writes an OpenAI reasoning effort as Claude's extended
// thinking, with the Messages writer's rules: a budget below maxTokens,
// no forced tool choice, a tool loop's last assistant turn starting with
// its reasoning (T8), temperature 1 and top_p of 0.95 or more.
func cvThinking(r *rqRequest, o RequestOptions, out *cvOut, inf *cvInferenceOut) {
	budget := rqEffortBudget(r.effort)
	if budget == 0 {
		if r.effort != "" && r.effort != "none" {
			r.drops.add("reasoning", r.effortMember)
		}
		return
	}
	if !cvClaude(r, o) {
		r.drops.add("reasoning", r.effortMember)
		return
	}
	if inf.MaxTokens != nil {
		budget = min(budget, *inf.MaxTokens-1)
	}
	forced := out.ToolConfig != nil && out.ToolConfig.Choice != nil && out.ToolConfig.Choice["auto"] == nil
	if budget < rqBudgetMin || forced || cvLastTurnUnthought(out.Messages) {
		r.drops.add("reasoning", r.effortMember)
		return
	}
	out.Additional = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": budget}}
	if t := inf.Temperature; t != nil && *t != 1 {
		inf.Temperature = nil
		r.drops.add("temperature", "temperature")
	}
	if p := inf.TopP; p != nil && *p < 0.95 {
		inf.TopP = nil
		r.drops.add("top_p", "top_p")
	}
}

// cvClaude says whether the model is one of Anthropic's (a Bedrock id
// anthropic.claude-…, an inference profile us.anthropic.claude-…, or an
// ARN naming one): the family whose thinking field the writer knows.
func cvClaude(r *rqRequest, o RequestOptions) bool {
	model := o.Model
	if model == "" {
		model, _ = rqString(r.model)
	}
	model = strings.ToLower(model)
	return strings.Contains(model, "anthropic") || strings.Contains(model, "claude")
}

// cvLastTurnUnthought says whether the last assistant message calls a tool
// without starting with its reasoning.
func cvLastTurnUnthought(msgs []cvMsgOut) bool {
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role != "assistant" {
			continue
		}
		c := msgs[i].Content
		if len(c) > 0 && c[0].Reasoning != nil {
			return false
		}
		for _, b := range c {
			if b.ToolUse != nil {
				return true
			}
		}
		return false
	}
	return false
}
