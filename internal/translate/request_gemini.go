package translate

import (
	"bytes"
	"encoding/json"
	"path"
	"strconv"
	"strings"
)

// Writing a Gemini request (generateContent, the Gemini API's and Vertex
// AI's alike): contents of role user or model, the system messages hoisted
// into systemInstruction, tools as functionDeclarations, and the options
// in generationConfig. The path names the model and whether it streams
// (handler/provider), so the body has neither.
//
// Thought signatures (docs/translation-facts.md#t9): a Gemini answer's function call part may
// carry a thoughtSignature, which the next request must give back on that
// part (Gemini 3 refuses a function-calling turn without it). No client
// API has a place for it beside the call, but every client gives the
// call's id back: the answer and stream translators append the signature
// to the id (gmAppendSig), and this writer takes it off again
// (gmSplitID). An id is then "<call id>-gts-<signature>", the signature
// in unpadded URL-safe base64, which fits Messages' ^[a-zA-Z0-9_-]+$. The
// ids grow by the signature's length (hundreds of bytes); a client that
// keeps ids short would cut the signature, and Gemini 3 would refuse the
// turn, as it would without the scheme.

// gmSigMark separates a call's id from its thought signature.
const gmSigMark = "-gts-"

// gmSkipSignature is what Google documents to send in place of a thought
// signature the conversation never had (calls another engine made):
// Gemini 3 then accepts the turn without validating it.
const gmSkipSignature = "skip_thought_signature_validator"

// gmAppendSig appends to a call id its thought signature (standard base64
// as the JSON carries it, still escaped), as gmSplitID reads it back.
func gmAppendSig(dst, sig []byte) []byte {
	if len(sig) == 0 {
		return dst
	}
	dst = append(dst, gmSigMark...)
	for _, c := range sig {
		switch {
		case c == '+':
			dst = append(dst, '-')
		case c == '/':
			dst = append(dst, '_')
		case rqIDByte(c):
			dst = append(dst, c)
		} // '=' padding, the '\' of an escaped '/': restored by gmSplitID
	}
	return dst
}

// gmSplitID is a call id without its thought signature, and the
// signature in standard base64 ("" for none).
func gmSplitID(id string) (callID, sig string) {
	i := strings.Index(id, gmSigMark)
	if i < 0 {
		return id, ""
	}
	enc := id[i+len(gmSigMark):]
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

type gmOut struct {
	Contents          []gmContent   `json:"contents"`
	SystemInstruction *gmContent    `json:"systemInstruction,omitempty"`
	Tools             []gmToolOut   `json:"tools,omitempty"`
	ToolConfig        *gmToolConfig `json:"toolConfig,omitempty"`
	GenerationConfig  *gmGenConfig  `json:"generationConfig,omitempty"`
}

type gmContent struct {
	Role  string   `json:"role,omitempty"`
	Parts []gmPart `json:"parts"`
}

type gmPart struct {
	Text             *string     `json:"text,omitempty"`
	InlineData       *gmBlob     `json:"inlineData,omitempty"`
	FileData         *gmFile     `json:"fileData,omitempty"`
	FunctionCall     *gmCall     `json:"functionCall,omitempty"`
	FunctionResponse *gmResponse `json:"functionResponse,omitempty"`
	ThoughtSignature string      `json:"thoughtSignature,omitempty"`
	result           bool        // a functionResponse: sorted ahead of the turn's other parts
}

type gmBlob struct {
	MimeType string `json:"mimeType"`
	Data     string `json:"data"`
}

type gmFile struct {
	MimeType string `json:"mimeType"`
	FileURI  string `json:"fileUri"`
}

type gmCall struct {
	Name string          `json:"name"`
	Args json.RawMessage `json:"args"`
}

type gmResponse struct {
	Name     string            `json:"name"`
	Response map[string]string `json:"response"`
}

type gmToolOut struct {
	FunctionDeclarations []gmFunction `json:"functionDeclarations"`
}

type gmFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parametersJsonSchema,omitempty"`
}

type gmToolConfig struct {
	FunctionCallingConfig gmCallingConfig `json:"functionCallingConfig"`
}

type gmCallingConfig struct {
	Mode                 string   `json:"mode"`
	AllowedFunctionNames []string `json:"allowedFunctionNames,omitempty"`
}

type gmGenConfig struct {
	Temperature      *float64        `json:"temperature,omitempty"`
	TopP             *float64        `json:"topP,omitempty"`
	MaxOutputTokens  *int            `json:"maxOutputTokens,omitempty"`
	StopSequences    []string        `json:"stopSequences,omitempty"`
	ResponseMimeType string          `json:"responseMimeType,omitempty"`
	ResponseSchema   json.RawMessage `json:"responseJsonSchema,omitempty"`
	ThinkingConfig   *gmThinking     `json:"thinkingConfig,omitempty"`
}

type gmThinking struct {
	IncludeThoughts bool `json:"includeThoughts"`
	ThinkingBudget  int  `json:"thinkingBudget"`
}

func rqWriteGemini(r *rqRequest) ([]byte, error) {
	if r.n > 1 {
		return nil, &Error{Member: "n", Reason: "the gateway reads one candidate of a Gemini answer"}
	}
	out := gmOut{Contents: []gmContent{}}
	names := gmCallNames(r)
	var system []string
	for _, m := range r.messages {
		if m.role == rqSystem {
			if text := rqTexts(m.parts, "\n\n"); strings.TrimSpace(text) != "" {
				system = append(system, text)
			}
			continue
		}
		c, err := gmMessage(r, m, names)
		if err != nil {
			return nil, err
		}
		out.Contents = gmAppend(out.Contents, c)
	}
	if len(system) > 0 {
		text := strings.Join(system, "\n\n")
		out.SystemInstruction = &gmContent{Parts: []gmPart{{Text: &text}}}
	}
	gmSignTurn(out.Contents)
	gmTools(r, &out)
	out.GenerationConfig = gmGeneration(r)
	if r.user != "" {
		r.drops.add("user", "user")
	}
	if len(r.metadata) > 0 && string(r.metadata) != "{}" {
		r.drops.add("metadata", "metadata")
	}
	for _, k := range []string{"prompt_cache_key", "safety_identifier", "service_tier", "top_logprobs", "verbosity"} {
		raw, ok := r.openai[k]
		if !ok || k == "service_tier" && (string(raw) == `"auto"` || string(raw) == `"default"`) {
			continue
		}
		r.drops.add(k, rqOpenAIMember(r.from, k))
	}
	return rqMarshal(out)
}

// gmCallNames maps each tool call's id to its function's name: a
// functionResponse must name its function, and a Chat tool message or a
// Responses function_call_output says only the call's id.
func gmCallNames(r *rqRequest) map[string]string {
	names := map[string]string{}
	for _, m := range r.messages {
		for _, p := range m.parts {
			if p.kind == rqCall {
				names[p.id] = p.name
			}
		}
	}
	return names
}

// gmMessage is m as a content; its parts may be none (all dropped).
func gmMessage(r *rqRequest, m rqMessage, names map[string]string) (gmContent, error) {
	c := gmContent{Role: "user"}
	if m.role == rqAssistant {
		c.Role = "model"
	}
	for _, p := range m.parts {
		switch p.kind {
		case rqText:
			if p.text != "" { // a part must hold something
				c.Parts = append(c.Parts, gmPart{Text: &p.text})
			}
		case rqImage:
			if part, ok := gmImage(p.url); ok {
				c.Parts = append(c.Parts, part)
			} else {
				r.drops.add("image url", p.member+" (image)")
			}
		case rqCall:
			args, ok := rqArgsObject(p.args)
			if !ok {
				r.drops.add("arguments", p.member+" (arguments not a JSON object)")
			}
			_, sig := gmSplitID(p.id)
			c.Parts = append(c.Parts, gmPart{FunctionCall: &gmCall{Name: p.name, Args: args}, ThoughtSignature: sig})
		case rqResult:
			name, ok := names[p.id]
			if !ok {
				return gmContent{}, &Error{Member: p.member, Reason: "Gemini's function response names its function, and no tool call of the conversation has this result's id"}
			}
			text := rqTexts(p.content, "\n")
			for _, x := range p.content {
				if x.kind != rqText {
					r.drops.add("tool result image", x.member+" (tool result image)")
				}
			}
			// Google's documented keys: "output" for a result, "error"
			// for a failure.
			key := "output"
			if p.isError {
				key = "error"
			}
			c.Parts = append(c.Parts, gmPart{FunctionResponse: &gmResponse{Name: name, Response: map[string]string{key: text}}, result: true})
		case rqThinking, rqRedacted:
			// Gemini takes back no reasoning text: what it needs of its
			// own thoughts travels as the calls' thought signatures.
			r.drops.add("thinking", p.member)
		}
	}
	return c, nil
}

// gmAppend appends c, to the content before when it has the same role:
// Gemini wants turns to alternate, and all function responses of a turn
// in the one content that follows the calls, ahead of any text.
func gmAppend(out []gmContent, c gmContent) []gmContent {
	if len(c.Parts) == 0 {
		return out
	}
	if n := len(out); n > 0 && out[n-1].Role == c.Role {
		c.Parts = append(out[n-1].Parts, c.Parts...)
		out = out[:n-1]
	}
	if c.Role == "user" {
		sorted := make([]gmPart, 0, len(c.Parts))
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

// gmSignTurn gives the first function call of each model content of the
// current turn (after the last user content without function responses:
// a client's text beside its results, such as Claude Code's reminders,
// does not start a turn) Google's stand-in signature when none of its calls has one:
// calls another engine made, which Gemini 3 would refuse unsigned. Older
// turns are not validated; Gemini's own calls keep their signatures, and
// of parallel calls only the first ever has one.
func gmSignTurn(contents []gmContent) {
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
			c.Parts[first].ThoughtSignature = gmSkipSignature
		}
	}
}

// gmImage is an image as a part: a data: URI inline, an http(s) URL as
// file data with the media type its extension says (Gemini requires one).
func gmImage(url string) (gmPart, bool) {
	if mt, data, ok := rqSplitDataURI(url); ok {
		return gmPart{InlineData: &gmBlob{MimeType: mt, Data: data}}, true
	}
	if !strings.HasPrefix(url, "http://") && !strings.HasPrefix(url, "https://") && !strings.HasPrefix(url, "gs://") {
		return gmPart{}, false
	}
	ext := strings.ToLower(path.Ext(strings.SplitN(strings.SplitN(url, "?", 2)[0], "#", 2)[0]))
	mt := map[string]string{".png": "image/png", ".gif": "image/gif", ".webp": "image/webp",
		".heic": "image/heic", ".heif": "image/heif", ".pdf": "application/pdf"}[ext]
	if mt == "" {
		mt = "image/jpeg" // the common case, and what an extension-less image URL most often is
	}
	return gmPart{FileData: &gmFile{MimeType: mt, FileURI: url}}, true
}

// gmTools writes tools and toolConfig. Parameters go as
// parametersJsonSchema, which takes JSON Schema as clients write it
// ($ref, anyOf, additionalProperties), unlike parameters' OpenAPI subset;
// only $schema, which names a dialect, is taken off. A transcript with
// calls but no tools declares the called functions with an open schema
// and mode NONE, as toward Messages.
func gmTools(r *rqRequest, out *gmOut) {
	var fns []gmFunction
	for _, t := range r.tools {
		fns = append(fns, gmFunction{Name: t.name, Description: t.description, Parameters: gmSchema(t.params)})
	}
	choice := r.choice
	if len(fns) == 0 {
		seen := map[string]bool{}
		for _, c := range out.Contents {
			for _, p := range c.Parts {
				if p.FunctionCall != nil && !seen[p.FunctionCall.Name] {
					seen[p.FunctionCall.Name] = true
					fns = append(fns, gmFunction{Name: p.FunctionCall.Name, Parameters: rqEmptySchema})
				}
			}
		}
		if len(fns) == 0 {
			return
		}
		choice = rqChoiceNone
	}
	out.Tools = []gmToolOut{{FunctionDeclarations: fns}}
	switch choice {
	case rqChoiceAuto:
		out.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmCallingConfig{Mode: "AUTO"}}
	case rqChoiceNone:
		out.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmCallingConfig{Mode: "NONE"}}
	case rqChoiceRequired:
		out.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmCallingConfig{Mode: "ANY"}}
	case rqChoiceNamed:
		out.ToolConfig = &gmToolConfig{FunctionCallingConfig: gmCallingConfig{Mode: "ANY", AllowedFunctionNames: []string{r.choiceName}}}
	}
	if r.parallel != nil && !*r.parallel {
		// Gemini has no switch for it.
		r.drops.add("parallel_tool_calls", "parallel_tool_calls")
	}
}

// gmSchema is a JSON Schema without its top-level $schema; nil stays nil
// (a function without parameters).
func gmSchema(schema json.RawMessage) json.RawMessage {
	if len(schema) == 0 || !bytes.Contains(schema, []byte(`"$schema"`)) {
		return schema
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(schema, &m) != nil {
		return schema
	}
	delete(m, "$schema")
	b, err := rqMarshal(m)
	if err != nil {
		return schema
	}
	return b
}

// gmGeneration is generationConfig, nil when the client set nothing.
func gmGeneration(r *rqRequest) *gmGenConfig {
	g := gmGenConfig{Temperature: r.temperature, TopP: r.topP}
	if r.maxTokens != nil && *r.maxTokens > 0 {
		g.MaxOutputTokens = r.maxTokens
	}
	for i, s := range r.stop {
		if s == "" {
			r.drops.add("stop", "stop["+strconv.Itoa(i)+"]")
			continue
		}
		g.StopSequences = append(g.StopSequences, s)
	}
	if f := r.format; f != nil {
		g.ResponseMimeType = "application/json"
		if f.kind == "json_schema" {
			g.ResponseSchema = gmSchema(f.schema)
		}
	}
	if budget := rqEffortBudget(r.effort); budget > 0 {
		// A budget, not a thinking level: Gemini 2.5 refuses levels, and
		// Gemini 3 takes budgets still. The client asked to reason, so it
		// is shown the thoughts' summaries.
		g.ThinkingConfig = &gmThinking{IncludeThoughts: true, ThinkingBudget: budget}
	} else if r.effort != "" {
		// "none": not every Gemini model can stop thinking (2.5 Pro
		// refuses a budget of 0), so it thinks as it would.
		r.drops.add("reasoning", r.effortMember)
	}
	if g.Temperature == nil && g.TopP == nil && g.MaxOutputTokens == nil && g.StopSequences == nil &&
		g.ResponseMimeType == "" && g.ThinkingConfig == nil {
		return nil
	}
	return &g
}
