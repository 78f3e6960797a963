package bedrock

import (
	"encoding/json"
	"hash/fnv"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Writing a Bedrock Converse request (docs/translation-facts.md#cloud-providers),
// for any client of an engine of provider bedrock. The body names neither
// the model nor streaming: the path does both (/model/{id}/converse,
// /converse-stream), which the provider sets (providers/bedrock). Its
// rules are mostly Messages' (Claude is the model most often behind it):
// turns that alternate, results first, no blank text, reasoning only with
// its signature.
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

// converseOut is the body written, in the camelCase names of AWS's JSON.
type converseOut struct {
	Messages   []converseMsgOut       `json:"messages"`
	System     []converseBlockOut     `json:"system,omitempty"`
	Inference  *converseInferenceOut  `json:"inferenceConfig,omitempty"`
	ToolConfig *converseToolConfigOut `json:"toolConfig,omitempty"`
	Additional map[string]any         `json:"additionalModelRequestFields,omitempty"`
}

type converseMsgOut struct {
	Role    string             `json:"role"`
	Content []converseBlockOut `json:"content"`
}

// converseBlockOut is one member of Converse's ContentBlock union.
type converseBlockOut struct {
	Text       *string               `json:"text,omitempty"`
	Image      *converseImageOut     `json:"image,omitempty"`
	ToolUse    *converseToolUseOut   `json:"toolUse,omitempty"`
	ToolResult *converseResultOut    `json:"toolResult,omitempty"`
	Reasoning  *converseReasoningOut `json:"reasoningContent,omitempty"`
	JSON       json.RawMessage       `json:"json,omitempty"` // a tool result's
}

// converseImageOut is an image as bytes; format is its media type without
// image/ (png, jpeg, gif, webp).
type converseImageOut struct {
	Format string `json:"format"`
	Source struct {
		Bytes string `json:"bytes"` // base64, as JSON carries a blob
	} `json:"source"`
}

type converseToolUseOut struct {
	ToolUseID string          `json:"toolUseId"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
}

// converseResultOut is a toolResult; status error is Messages' is_error.
type converseResultOut struct {
	ToolUseID string             `json:"toolUseId"`
	Content   []converseBlockOut `json:"content"`
	Status    string             `json:"status,omitempty"`
}

// converseReasoningOut is replayed reasoning: reasoningText with the
// signature its model wrote, or redactedContent.
type converseReasoningOut struct {
	Text *struct {
		Text      string `json:"text"`
		Signature string `json:"signature,omitempty"`
	} `json:"reasoningText,omitempty"`
	Redacted string `json:"redactedContent,omitempty"`
}

// converseInferenceOut is inferenceConfig. maxTokens is written only when
// the client set a limit: Converse defaults it to the model's maximum
// (docs/translation-facts.md#cloud-providers), unlike Messages.
type converseInferenceOut struct {
	MaxTokens     *int     `json:"maxTokens,omitempty"`
	Temperature   *float64 `json:"temperature,omitempty"`
	TopP          *float64 `json:"topP,omitempty"`
	StopSequences []string `json:"stopSequences,omitempty"`
}

// converseToolConfigOut is toolConfig; toolChoice is {auto:{}}, {any:{}} or
// {tool:{name}}, and absent for the model's own choice.
type converseToolConfigOut struct {
	Tools  []converseToolOut `json:"tools"`
	Choice map[string]any    `json:"toolChoice,omitempty"`
}

// converseToolOut is one of toolConfig.tools: a toolSpec whose schema is
// under inputSchema.json.
type converseToolOut struct {
	Spec struct {
		Name        string `json:"name"`
		Description string `json:"description,omitempty"`
		InputSchema struct {
			JSON json.RawMessage `json:"json"`
		} `json:"inputSchema"`
	} `json:"toolSpec"`
}

// converseWriteRequest writes r as a Converse request. n > 1 is a 400, as
// toward Messages: one answer cannot be several choices.
func converseWriteRequest(r *translate.Request, o translate.RequestOptions) ([]byte, error) {
	if r.N > 1 {
		return nil, &translate.Error{Member: "n", Reason: "Converse answers one choice"}
	}
	out := converseOut{Messages: []converseMsgOut{}}
	for _, m := range r.Messages {
		if m.Role == translate.RoleSystem {
			// Blank text blocks are refused, the system's too
			// (docs/translation-facts.md#t1).
			if text := translate.Texts(m.Parts, "\n\n"); strings.TrimSpace(text) != "" {
				out.System = append(out.System, converseBlockOut{Text: &text})
			}
			continue
		}
		var err error
		if out.Messages, err = converseAppend(r, out.Messages, m); err != nil {
			return nil, err
		}
	}
	inf := converseInferenceOut{MaxTokens: r.MaxTokens, Temperature: r.Temperature, TopP: r.TopP}
	if t := inf.Temperature; t != nil && *t > 1 {
		// Converse's scale is 0–1 for every model, OpenAI's goes to 2.
		one := 1.0
		inf.Temperature = &one
	}
	// White-space-only stop sequences are dropped, as toward Messages
	// (docs/translation-facts.md#t12).
	for i, s := range r.StopSequences {
		if strings.TrimSpace(s) == "" {
			r.Drop("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		inf.StopSequences = append(inf.StopSequences, s)
	}
	converseTools(r, &out)
	converseThinking(r, o, &out, &inf)
	if inf.MaxTokens != nil || inf.Temperature != nil || inf.TopP != nil || len(inf.StopSequences) > 0 {
		out.Inference = &inf
	}
	if r.Format != nil {
		r.Drop("response_format", r.Format.Member)
	}
	if r.User != "" {
		r.Drop("user", "user")
	}
	if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
		r.Drop("metadata", "metadata")
	}
	// The same of the members Chat and Responses share as toward Messages:
	// what asks for something Converse cannot do is listed.
	for _, k := range []string{"top_logprobs", "verbosity", "service_tier"} {
		raw, ok := r.OpenAI[k]
		if !ok || k == "service_tier" && (string(raw) == `"auto"` || string(raw) == `"default"`) {
			continue
		}
		r.Drop(k, translate.ClientMember(r.From, k))
	}
	return translate.Marshal(out)
}

// converseAppend appends m's blocks, to the message before when it has the same
// role: Converse wants user and assistant turns to alternate, and a
// user turn's tool results ahead of its text, all of them together
// (docs/translation-facts.md#t4).
func converseAppend(r *translate.Request, out []converseMsgOut, m translate.Message) ([]converseMsgOut, error) {
	role := "user"
	if m.Role == translate.RoleAssistant {
		role = "assistant"
	}
	var blocks []converseBlockOut
	for _, p := range m.Parts {
		b, ok, err := converseBlock(r, p, m.Member)
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
		sorted := make([]converseBlockOut, 0, len(blocks))
		for _, pass := range [...]bool{true, false} {
			for _, b := range blocks {
				if (b.ToolResult != nil) == pass {
					sorted = append(sorted, b)
				}
			}
		}
		blocks = sorted
	}
	return append(out, converseMsgOut{Role: role, Content: blocks}), nil
}

// converseBlock is p as a content block; ok is false for a part Converse
// cannot carry or would refuse (a blank text,
// docs/translation-facts.md#t1). An image it cannot take is an error, not
// a drop: the client's question may be about the image.
func converseBlock(r *translate.Request, p translate.Part, member string) (converseBlockOut, bool, error) {
	if p.Member != "" {
		member = p.Member
	}
	switch p.Kind {
	case translate.PartText:
		if strings.TrimSpace(p.Text) == "" {
			return converseBlockOut{}, false, nil
		}
		return converseBlockOut{Text: &p.Text}, true, nil
	case translate.PartImage:
		img, err := converseImage(p.URL, member)
		if err != nil {
			return converseBlockOut{}, false, err
		}
		return converseBlockOut{Image: img}, true, nil
	case translate.PartCall:
		input, ok := translate.ArgsObject(p.Args)
		if !ok {
			r.Drop("arguments", member+" (arguments not a JSON object)")
		}
		return converseBlockOut{ToolUse: &converseToolUseOut{ToolUseID: converseToolID(p.ID), Name: p.Name, Input: input}}, true, nil
	case translate.PartResult:
		res := &converseResultOut{ToolUseID: converseToolID(p.ID), Content: []converseBlockOut{}}
		if p.IsError {
			res.Status = "error"
		}
		for _, c := range p.Content {
			b, ok, err := converseBlock(r, c, member)
			if err != nil {
				return converseBlockOut{}, false, err
			}
			if ok {
				res.Content = append(res.Content, b)
			}
		}
		if len(res.Content) == 0 {
			// A tool that printed nothing: Converse refuses both an empty
			// content and a blank text; an empty JSON object says nothing.
			res.Content = append(res.Content, converseBlockOut{JSON: json.RawMessage(`{}`)})
		}
		return converseBlockOut{ToolResult: res}, true, nil
	case translate.PartThinking:
		if p.Signature == "" {
			// Replayed reasoning needs the signature its model wrote;
			// another engine's reasoning text has none
			// (docs/translation-facts.md#t8).
			r.Drop("thinking", member)
			return converseBlockOut{}, false, nil
		}
		rc := &converseReasoningOut{Text: &struct {
			Text      string `json:"text"`
			Signature string `json:"signature,omitempty"`
		}{p.Text, p.Signature}}
		return converseBlockOut{Reasoning: rc}, true, nil
	case translate.PartRedacted:
		return converseBlockOut{Reasoning: &converseReasoningOut{Redacted: p.Text}}, true, nil
	}
	return converseBlockOut{}, false, nil
}

// converseImage is a data: URI's image; any other URL is an *Error, as Converse
// takes bytes (or S3 locations) only (docs/translation-facts.md#t13).
func converseImage(url, member string) (*converseImageOut, error) {
	mt, data, ok := translate.SplitDataURI(url)
	if !ok {
		return nil, &translate.Error{Member: member, Reason: "Bedrock Converse takes images as bytes (a data: URI), not by URL"}
	}
	format := strings.TrimPrefix(strings.ToLower(mt), "image/")
	switch format {
	case "jpg":
		format = "jpeg"
	case "png", "jpeg", "gif", "webp":
	default:
		return nil, &translate.Error{Member: member, Reason: "Bedrock Converse takes png, jpeg, gif and webp images, not " + strconv.Quote(mt)}
	}
	img := &converseImageOut{Format: format}
	img.Source.Bytes = data
	return img, nil
}

// converseToolID is a tool call's id as Converse takes it: ^[a-zA-Z0-9_-]+$ as
// toward Messages (docs/translation-facts.md#t3), and at most 64 bytes. A
// longer id keeps its head
// and gets a hash of the whole: the same for a call and its result, and
// on every later turn.
func converseToolID(id string) string {
	id = translate.ToolID(id)
	if len(id) <= 64 {
		return id
	}
	h := fnv.New64a()
	h.Write([]byte(id))
	return id[:47] + "_" + strconv.FormatUint(h.Sum64()|1<<63, 16)
}

// converseEmptySchema is the input schema of a tool that declares no
// parameters: Converse requires one.
var converseEmptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// converseTools writes toolConfig (see the decisions above for tool_choice
// none).
func converseTools(r *translate.Request, out *converseOut) {
	cfg := &converseToolConfigOut{}
	for _, t := range r.Tools {
		var tool converseToolOut
		tool.Spec.Name, tool.Spec.Description = t.Name, t.Description
		tool.Spec.InputSchema.JSON = t.Params
		if t.Params == nil {
			tool.Spec.InputSchema.JSON = converseEmptySchema
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
				if len(r.Tools) == 0 && !seen[b.ToolUse.Name] {
					// Declared, with an open schema, for the history
					// only (Converse refuses tool blocks without tools).
					seen[b.ToolUse.Name] = true
					var tool converseToolOut
					tool.Spec.Name = b.ToolUse.Name
					tool.Spec.InputSchema.JSON = converseEmptySchema
					cfg.Tools = append(cfg.Tools, tool)
				}
			}
		}
	}
	choice := r.Choice
	if len(r.Tools) == 0 && len(cfg.Tools) > 0 {
		choice = translate.ChoiceNone
	}
	if choice == translate.ChoiceNone && !history {
		return // none, said by giving the model no tools
	}
	if len(cfg.Tools) == 0 {
		return
	}
	switch choice {
	case translate.ChoiceNone:
		if len(r.Tools) > 0 {
			r.Drop("tool_choice", r.ChoiceMember)
		}
	case translate.ChoiceAuto:
		cfg.Choice = map[string]any{"auto": struct{}{}}
	case translate.ChoiceRequired:
		cfg.Choice = map[string]any{"any": struct{}{}}
	case translate.ChoiceNamed:
		cfg.Choice = map[string]any{"tool": map[string]string{"name": r.ChoiceName}}
	}
	// Converse's toolChoice has no disable_parallel_tool_use.
	if r.Parallel != nil && !*r.Parallel {
		r.Drop("parallel_tool_calls", "parallel_tool_calls")
	}
	out.ToolConfig = cfg
}

// converseThinking writes an OpenAI reasoning effort as Claude's extended
// thinking, with the Messages writer's rules: a budget below maxTokens,
// no forced tool choice, a tool loop's last assistant turn starting with
// its reasoning (docs/translation-facts.md#t8), temperature 1 and top_p of
// 0.95 or more. The field goes in additionalModelRequestFields, which
// Bedrock hands to the model as it is: another family's model would refuse
// Claude's thinking, so it is written only for Claude.
func converseThinking(r *translate.Request, o translate.RequestOptions, out *converseOut, inf *converseInferenceOut) {
	budget := translate.EffortBudget(r.Effort)
	if budget == 0 {
		if r.Effort != "" && r.Effort != "none" {
			r.Drop("reasoning", r.EffortMember)
		}
		return
	}
	if !converseClaude(r, o) {
		r.Drop("reasoning", r.EffortMember)
		return
	}
	// Without a limit the model's maximum applies
	// (docs/translation-facts.md#cloud-providers): the budget is the
	// effort's.
	if inf.MaxTokens != nil {
		budget = min(budget, *inf.MaxTokens-1)
	}
	forced := out.ToolConfig != nil && out.ToolConfig.Choice != nil && out.ToolConfig.Choice["auto"] == nil
	if budget < translate.BudgetMin || forced || converseLastTurnUnthought(out.Messages) {
		r.Drop("reasoning", r.EffortMember)
		return
	}
	out.Additional = map[string]any{"thinking": map[string]any{"type": "enabled", "budget_tokens": budget}}
	if t := inf.Temperature; t != nil && *t != 1 {
		inf.Temperature = nil
		r.Drop("temperature", "temperature")
	}
	if p := inf.TopP; p != nil && *p < 0.95 {
		inf.TopP = nil
		r.Drop("top_p", "top_p")
	}
}

// converseClaude says whether the model is one of Anthropic's (a Bedrock id
// anthropic.claude-…, an inference profile us.anthropic.claude-…, or an
// ARN naming one): the family whose thinking field the writer knows.
func converseClaude(r *translate.Request, o translate.RequestOptions) bool {
	model := o.Model
	if model == "" {
		model, _ = translate.JSONString(r.Model)
	}
	model = strings.ToLower(model)
	return strings.Contains(model, "anthropic") || strings.Contains(model, "claude")
}

// converseLastTurnUnthought says whether the last assistant message calls a tool
// without starting with its reasoning.
func converseLastTurnUnthought(msgs []converseMsgOut) bool {
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
