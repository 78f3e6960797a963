package gemini

import (
	"bytes"
	"encoding/json"
	"path"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Writing a Gemini request (generateContent, the Gemini API's and Vertex
// AI's alike): contents of role user or model, the system messages hoisted
// into systemInstruction, tools as functionDeclarations, and the options
// in generationConfig. The path names the model and whether it streams
// (the provider sets it: providers/gemini, providers/vertex), so the body
// has neither.
//
// Thought signatures (docs/translation-facts.md#t9): a Gemini answer's function call part may
// carry a thoughtSignature, which the next request must give back on that
// part (Gemini 3 refuses a function-calling turn without it). No client
// API has a place for it beside the call, but every client gives the
// call's id back: the answer and stream translators append the signature
// to the id (geminiAppendSig), and this writer takes it off again
// (geminiSplitID). An id is then "<call id>-gts-<signature>", the signature
// in unpadded URL-safe base64, which fits Messages' ^[a-zA-Z0-9_-]+$. The
// ids grow by the signature's length (hundreds of bytes); a client that
// keeps ids short would cut the signature, and Gemini 3 would refuse the
// turn, as it would without the scheme.

// geminiSigMark separates a call's id from its thought signature.
const geminiSigMark = "-gts-"

// geminiSkipSignature is what Google documents to send in place of a thought
// signature the conversation never had (calls another engine made):
// Gemini 3 then accepts the turn without validating it.
const geminiSkipSignature = "skip_thought_signature_validator"

// geminiAppendSig appends to a call id its thought signature (standard base64
// as the JSON carries it, still escaped), as geminiSplitID reads it back.
func geminiAppendSig(dst, sig []byte) []byte {
	if len(sig) == 0 {
		return dst
	}
	dst = append(dst, geminiSigMark...)
	for _, c := range sig {
		switch {
		case c == '+':
			dst = append(dst, '-')
		case c == '/':
			dst = append(dst, '_')
		case translate.IDByte(c):
			dst = append(dst, c)
		} // '=' padding, the '\' of an escaped '/': restored by geminiSplitID
	}
	return dst
}

// geminiSplitID is a call id without its thought signature, and the
// signature in standard base64 ("" for none).
func geminiSplitID(id string) (callID, sig string) {
	i := strings.Index(id, geminiSigMark)
	if i < 0 {
		return id, ""
	}
	enc := id[i+len(geminiSigMark):]
	b := make([]byte, 0, len(enc)+3)
	for j := 0; j < len(enc); j++ {
		switch c := enc[j]; c {
		case '-':
			b = append(b, '+')
		case '_':
			b = append(b, '/')
		default:
			b = append(b, c)
		}
	}
	for len(b)%4 != 0 {
		b = append(b, '=')
	}
	return id[:i], string(b)
}

// geminiOut is the body written, in the camelCase names of Google's JSON.
type geminiOut struct {
	Contents          []geminiContent   `json:"contents"`
	SystemInstruction *geminiContent    `json:"systemInstruction,omitempty"`
	Tools             []geminiToolOut   `json:"tools,omitempty"`
	ToolConfig        *geminiToolConfig `json:"toolConfig,omitempty"`
	GenerationConfig  *geminiGenConfig  `json:"generationConfig,omitempty"`
}

type geminiContent struct {
	Role  string       `json:"role,omitempty"`
	Parts []geminiPart `json:"parts"`
}

// geminiPart is one part. thoughtSignature sits on the part, beside
// functionCall, not inside it (docs/translation-facts.md#t9).
type geminiPart struct {
	Text             *string         `json:"text,omitempty"`
	InlineData       *geminiBlob     `json:"inlineData,omitempty"`
	FileData         *geminiFile     `json:"fileData,omitempty"`
	FunctionCall     *geminiCall     `json:"functionCall,omitempty"`
	FunctionResponse *geminiResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string          `json:"thoughtSignature,omitempty"`
	result           bool            // a functionResponse: sorted ahead of the turn's other parts
}

type geminiBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type geminiFile struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type geminiCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

// geminiResponse is a functionResponse: it names the function it answers,
// which is how Gemini pairs it with its call, and holds the result under
// output or error.
type geminiResponse struct {
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

type geminiToolOut struct {
	FunctionDeclarations []geminiFunction `json:"functionDeclarations"`
}

type geminiFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type geminiToolConfig struct {
	FunctionCallingConfig geminiCallingConfig `json:"functionCallingConfig"`
}

// geminiCallingConfig is functionCallingConfig: mode AUTO, ANY or NONE, and
// allowedFunctionNames, which narrows ANY to the one function a named
// choice asks for.
type geminiCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type geminiGenConfig struct {
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	MaxOutputTokens  *int            `json:"maxOutputTokens,omitempty"`
	StopSequences    []string        `json:"stopSequences,omitempty"`
	ResponseMimeType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig   *geminiThinking `json:"thinkingConfig,omitempty"`
}

// geminiThinking is thinkingConfig: includeThoughts asks for the thoughts'
// summaries, thinkingBudget bounds them in tokens.
type geminiThinking struct {
	IncludeThoughts bool `json:"includeThoughts"`
	ThinkingBudget  int  `json:"thinkingBudget"`
}

// geminiWriteRequest writes r as a generateContent request. Gemini has none
// of the members Chat and Responses share: each that asks for something
// is listed as dropped.
func geminiWriteRequest(r *translate.Request, _ translate.RequestOptions) ([]byte, error) {
	if r.N > 1 {
		return nil, &translate.Error{Member: "n", Reason: "the gateway reads one candidate of a Gemini answer"}
	}
	out := geminiOut{Contents: []geminiContent{}}
	names := geminiCallNames(r)
	var system []string
	for _, m := range r.Messages {
		if m.Role == translate.RoleSystem {
			if text := translate.Texts(m.Parts, "\n\n"); strings.TrimSpace(text) != "" {
				system = append(system, text)
			}
			continue
		}
		c, err := geminiMessage(r, m, names)
		if err != nil {
			return nil, err
		}
		out.Contents = geminiAppend(out.Contents, c)
	}
	if len(system) > 0 {
		text := strings.Join(system, "\n\n")
		out.SystemInstruction = &geminiContent{Parts: []geminiPart{{Text: &text}}}
	}
	geminiSignTurn(out.Contents)
	geminiTools(r, &out)
	out.GenerationConfig = geminiGeneration(r)
	if r.User != "" {
		r.Drop("user", "user")
	}
	if len(r.Metadata) > 0 && string(r.Metadata) != "{}" {
		r.Drop("metadata", "metadata")
	}
	for _, k := range []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs", "verbosity"} {
		raw, ok := r.OpenAI[k]
		if !ok || k == "service_tier" && (string(raw) == `"auto"` || string(raw) == `"default"`) {
			continue
		}
		r.Drop(k, translate.ClientMember(r.From, k))
	}
	return translate.Marshal(out)
}

// geminiCallNames maps each tool call's id to its function's name: a
// functionResponse must name its function, and a Chat tool message or a
// Responses function_call_output says only the call's id.
func geminiCallNames(r *translate.Request) map[string]string {
	names := map[string]string{}
	for _, m := range r.Messages {
		for _, p := range m.Parts {
			if p.Kind == translate.PartCall {
				names[p.ID] = p.Name
			}
		}
	}
	return names
}

// geminiMessage is m as a content; its parts may be none (all dropped).
func geminiMessage(r *translate.Request, m translate.Message, names map[string]string) (geminiContent, error) {
	c := geminiContent{Role: "user"}
	if m.Role == translate.RoleAssistant {
		c.Role = "model"
	}
	for _, p := range m.Parts {
		switch p.Kind {
		case translate.PartText:
			if p.Text != "" { // a part must hold something
				c.Parts = append(c.Parts, geminiPart{Text: &p.Text})
			}
		case translate.PartImage:
			if part, ok := geminiImage(p.URL); ok {
				c.Parts = append(c.Parts, part)
			} else {
				r.Drop("image url", p.Member+" (image)")
			}
		case translate.PartCall:
			args, ok := translate.ArgsObject(p.Args)
			if !ok {
				r.Drop("arguments", p.Member+" (arguments not a JSON object)")
			}
			_, sig := geminiSplitID(p.ID)
			c.Parts = append(c.Parts, geminiPart{FunctionCall: &geminiCall{Name: p.Name, Args: args}, ThoughtSignature: sig})
		case translate.PartResult:
			name, ok := names[p.ID]
			if !ok {
				return geminiContent{}, &translate.Error{Member: p.Member, Reason: "Gemini's function response names its function, and no tool call of the conversation has this result's id"}
			}
			text := translate.Texts(p.Content, "\n")
			for _, x := range p.Content {
				if x.Kind != translate.PartText {
					r.Drop("tool result image", x.Member+" (tool result image)")
				}
			}
			// Google's documented keys: "output" for a result, "error"
			// for a failure.
			key := "output"
			if p.IsError {
				key = "error"
			}
			c.Parts = append(c.Parts, geminiPart{FunctionResponse: &geminiResponse{Name: name, Response: map[string]string{key: text}}, result: true})
		case translate.PartThinking, translate.PartRedacted:
			// Gemini takes back no reasoning text: what it needs of its
			// own thoughts travels as the calls' thought signatures.
			r.Drop("thinking", p.Member)
		}
	}
	return c, nil
}

// geminiAppend appends c, to the content before when it has the same role:
// Gemini wants turns to alternate, and all function responses of a turn
// in the one content that follows the calls, ahead of any text.
func geminiAppend(out []geminiContent, c geminiContent) []geminiContent {
	if len(c.Parts) == 0 {
		return out
	}
	if n := len(out); n > 0 && out[n-1].Role == c.Role {
		c.Parts = append(out[n-1].Parts, c.Parts...)
		out = out[:n-1]
	}
	if c.Role == "user" {
		sorted := make([]geminiPart, 0, len(c.Parts))
		for _, results := range [...]bool{true, false} {
			for _, p := range c.Parts {
				if p.result == results {
					sorted = append(sorted, p)
				}
			}
		}
		c.Parts = sorted
	}
	return append(out, c)
}

// geminiSignTurn gives the first function call of each model content of the
// current turn (after the last user content without function responses:
// a client's text beside its results, such as Claude Code's reminders,
// does not start a turn) Google's stand-in signature when none of its calls has one:
// calls another engine made, which Gemini 3 would refuse unsigned. Older
// turns are not validated; Gemini's own calls keep their signatures, and
// of parallel calls only the first ever has one.
func geminiSignTurn(contents []geminiContent) {
	start := 0
	for i, c := range contents {
		if c.Role != "user" {
			continue
		}
		results := false
		for _, p := range c.Parts {
			results = results || p.result
		}
		if !results {
			start = i + 1
		}
	}
	for i := start; i < len(contents); i++ {
		c := contents[i]
		if c.Role != "model" {
			continue
		}
		first := -1
		signed := false
		for j, p := range c.Parts {
			if p.FunctionCall == nil {
				continue
			}
			if first < 0 {
				first = j
			}
			signed = signed || p.ThoughtSignature != ""
		}
		if first >= 0 && !signed {
			c.Parts[first].ThoughtSignature = geminiSkipSignature
		}
	}
}

// geminiImage is an image as a part: a data: URI inline, an http(s) URL as
// file data with the media type its extension says (Gemini requires one).
func geminiImage(url string) (geminiPart, bool) {
	if mt, data, ok := translate.SplitDataURI(url); ok {
		return geminiPart{InlineData: &geminiBlob{MimeType: mt, Data: data}}, true
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "gs://") {
		return geminiPart{}, false
	}
	ext := strings.ToLower(path.Ext(strings.SplitN(strings.SplitN(url, "?", 2)[0], "#", 2)[0]))
	mt := map[string]string{".png": "image/png", ".gif": "image/gif", ".webp": "image/webp",
		".heic": "image/heic", ".heif": "image/heif", ".pdf": "application/pdf"}[ext]
	if mt == "" {
		mt = "image/jpeg" // the common case, and what an extension-less image URL most often is
	}
	return geminiPart{FileData: &geminiFile{MimeType: mt, FileURI: url}}, true
}

// geminiTools writes tools and toolConfig. Parameters go as
// parametersJsonSchema, which takes JSON Schema as clients write it
// ($ref, anyOf, additionalProperties), unlike parameters' OpenAPI subset;
// only $schema, which names a dialect, is taken off. A transcript with
// calls but no tools declares the called functions with an open schema
// and mode NONE, as toward Messages.
func geminiTools(r *translate.Request, out *geminiOut) {
	var fns []geminiFunction
	for _, t := range r.Tools {
		fns = append(fns, geminiFunction{Name: t.Name, Description: t.Description, Parameters: geminiSchema(t.Params)})
	}
	choice := r.Choice
	if len(fns) == 0 {
		seen := map[string]bool{}
		for _, c := range out.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil && !seen[p.FunctionCall.Name] {
					seen[p.FunctionCall.Name] = true
					fns = append(fns, geminiFunction{Name: p.FunctionCall.Name, Parameters: translate.EmptySchema})
				}
			}
		}
		if len(fns) == 0 {
			return
		}
		choice = translate.ChoiceNone
	}
	out.Tools = []geminiToolOut{{FunctionDeclarations: fns}}
	switch choice {
	case translate.ChoiceAuto:
		out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: geminiCallingConfig{Mode: "AUTO"}}
	case translate.ChoiceNone:
		out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: geminiCallingConfig{Mode: "NONE"}}
	case translate.ChoiceRequired:
		out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: geminiCallingConfig{Mode: "ANY"}}
	case translate.ChoiceNamed:
		out.ToolConfig = &geminiToolConfig{FunctionCallingConfig: geminiCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{r.ChoiceName}}}
	}
	if r.Parallel != nil && !*r.Parallel {
		// Gemini has no switch for it.
		r.Drop("parallel_tool_calls", "parallel_tool_calls")
	}
}

// geminiSchema is a JSON Schema without its top-level $schema; nil stays nil
// (a function without parameters).
func geminiSchema(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 || !bytes.Contains(schema, []byte(`"$schema"`)) {
		return schema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil {
		return schema
	}
	delete(m, "$schema")
	b, err := translate.Marshal(m)
	if err != nil {
		return schema
	}
	return b
}

// geminiGeneration is generationConfig, nil when the client set nothing.
func geminiGeneration(r *translate.Request) *geminiGenConfig {
	g := geminiGenConfig{Temperature: r.Temperature, TopP: r.TopP}
	if r.MaxTokens != nil && *r.MaxTokens > 0 {
		g.MaxOutputTokens = r.MaxTokens
	}
	for i, s := range r.StopSequences {
		if s == "" {
			r.Drop("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		g.StopSequences = append(g.StopSequences, s)
	}
	if f := r.Format; f != nil {
		g.ResponseMimeType = "application/json"
		if f.Kind == "json_schema" {
			g.ResponseSchema = geminiSchema(f.Schema)
		}
	}
	if budget := translate.EffortBudget(r.Effort); budget > 0 {
		// A budget, not a thinking level: Gemini 2.5 refuses levels, and
		// Gemini 3 takes budgets still. The client asked to reason, so it
		// is shown the thoughts' summaries.
		g.ThinkingConfig = &geminiThinking{IncludeThoughts: true, ThinkingBudget: budget}
	} else if r.Effort != "" {
		// "none": not every Gemini model can stop thinking (2.5 Pro
		// refuses a budget of 0), so it thinks as it would.
		r.Drop("reasoning", r.EffortMember)
	}
	if g.Temperature == nil && g.TopP == nil && g.MaxOutputTokens == nil && g.StopSequences == nil &&
		g.ResponseMimeType == "" && g.ThinkingConfig == nil {
		return nil
	}
	return &g
}
