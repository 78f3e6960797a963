package translate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// A request is translated in two steps: the client's API is read into one
// neutral representation (Request), which is then written in the engine's
// API. Each API has one reader and one writer, in its codec (the Codec
// table, translate.go): so a rule such as "tool ids must match
// ^[a-zA-Z0-9_-]+$ on Messages" lives in the one writer that needs it,
// whatever the client spoke. A request is read once, however many engines
// it is written for (a retry, a fallback, a hedge: the gateway keeps each
// written body).
//
// What each member becomes, per direction, is the table in
// docs/translation.md; the comments next to each rule say why.

// RequestBody translates a request body of API from into API to: ReadRequest,
// then Write. dropped names the client's members that the target cannot
// carry and that the documented rules drop (the gateway logs them and
// counts them in a metric); err is a *Error for a member the target cannot
// carry that must not be dropped silently (the gateway answers 400 naming
// it and the engine), or another error for a body that is not a JSON
// object. from == to returns body unchanged.
func RequestBody(from, to api.API, body []byte, o RequestOptions) (out []byte, dropped []string, err error) {
	if from == to {
		return body, nil, nil
	}
	r, err := ReadRequest(from, body)
	if err != nil {
		return nil, nil, err
	}
	return r.Write(to, o)
}

// ReadRequest reads a request body of API from, a client's, into the
// neutral form every writer reads.
func ReadRequest(from api.API, body []byte) (*Request, error) {
	c := codecOf(from)
	if c == nil || c.ReadRequest == nil {
		return nil, fmt.Errorf("translating a request from %v: no client speaks it", from)
	}
	top, err := object(body)
	if err != nil {
		return nil, err
	}
	r := &Request{From: from}
	if err := c.ReadRequest(r, top); err != nil {
		return nil, err
	}
	r.pairToolResults()
	return r, nil
}

// Write writes the request in API to. r is left as it was: the same
// request may be written for several engines, each write listing what
// it dropped (the reader's drops, then the writer's).
func (r *Request) Write(to api.API, o RequestOptions) (out []byte, dropped []string, err error) {
	c := codecOf(to)
	if c == nil || c.WriteRequest == nil {
		return nil, nil, fmt.Errorf("translating a request to %v: no translation writes it", to)
	}
	w := *r
	w.To, w.drops = to, r.drops.clone()
	if o.Model != "" {
		w.Model, _ = json.Marshal(o.Model)
	}
	if out, err = c.WriteRequest(&w, o); err != nil {
		return nil, nil, err
	}
	return out, w.drops.list, nil
}

// Request is a request in none of the three APIs' words: what a reader
// fills and a writer spells. Members only one API has, and that a
// translation therefore drops, never reach it (the reader lists them).
type Request struct {
	From, To api.API

	Model    json.RawMessage // as the client sent it; the gateway rewrites it afterwards
	Messages []Message       // system instructions included, in the client's order

	Tools        []Tool
	Choice       Choice // "" when the client left it to the engine
	ChoiceName   string // the tool of ChoiceNamed
	ChoiceMember string // where the client said it, for a drop
	Parallel     *bool  // parallel tool calls allowed

	MaxTokens     *int
	Temperature   *float64
	TopP          *float64
	StopSequences []string
	Format        *Format

	Effort       string // reasoning effort in OpenAI's words: minimal, low, medium, high…
	EffortMember string // where the client asked for reasoning, for a drop

	User     string          // Chat/Responses user, Messages metadata.user_id
	Metadata json.RawMessage // Chat/Responses metadata (an object of strings)
	Stream   bool
	N        int // Chat's choices per request (0: not said)

	// OpenAI holds members Chat and Responses share under the same meaning
	// (prompt_cache_key, safety_identifier, service_tier, top_logprobs…),
	// carried between them and dropped toward Messages.
	OpenAI map[string]json.RawMessage

	// Custom are the names of the custom tools (free-form input, such as
	// Codex's apply_patch) a Responses request declares, as the functions
	// the request is written with: an engine's call of one comes back as
	// a function call whose arguments are {"input": "…"}, which the
	// answer's translation turns into a custom_tool_call with that input.
	Custom []string
	// Namespaces map the function names the tools of a Responses
	// request's namespaces (Codex's MCP servers) are written with to their
	// namespace and name: Codex runs a call only as {namespace, name}, so
	// the answer's translation splits a call of a flattened name back.
	Namespaces map[string][2]string

	drops drops
}

// Choice is tool_choice in OpenAI's words; each writer spells it in its
// own (docs/translation-facts.md#requests).
type Choice string

const (
	ChoiceAuto     Choice = "auto"
	ChoiceNone     Choice = "none"
	ChoiceRequired Choice = "required" // Messages: any
	ChoiceNamed    Choice = "named"
)

// Role is a message's author. RoleSystem messages stay where the client
// put them for Chat (and for Responses, but those that lead, which become
// its instructions); Messages, Converse and Gemini hoist them all into
// their system member.
type Role uint8

const (
	RoleUser Role = iota + 1
	RoleAssistant
	RoleSystem
)

// Message is one turn: its parts in the order the client gave them.
type Message struct {
	Role   Role
	Parts  []Part
	Member string // the client's path, e.g. "messages[3]"
}

// PartKind is what a part of a message is.
type PartKind uint8

const (
	PartText     PartKind = iota + 1
	PartImage             // url: an http(s) URL or a data: URI
	PartCall              // an assistant's tool call: id, name, args
	PartResult            // a tool's result: id, content, isError
	PartThinking          // text and signature (Messages), or reasoning text without one
	PartRedacted          // Messages' redacted_thinking: text holds its data
)

// Part is one part of a message: the members of every kind, each used by
// the kinds its comment names.
type Part struct {
	Kind      PartKind
	Text      string
	URL       string // image
	Detail    string // image: OpenAI's detail, which Messages has no word for
	ID        string // call and result: the tool call's id
	Name      string // call
	Args      string // call: the arguments as a JSON text, "" for none
	Content   []Part
	IsError   bool
	Signature string // thinking
	Member    string // the client's path, for a drop
}

// Tool is a function the model may call: every API's tools become these,
// and what is not a function (hosted and server tools) is dropped by the
// readers.
type Tool struct {
	Name        string
	Description string
	Params      json.RawMessage // JSON Schema of the arguments; nil for none
	Strict      *bool
}

// Format is structured output: a JSON Schema the answer follows
// (json_schema) or any JSON object (json_object).
type Format struct {
	Kind        string // json_schema or json_object
	Name        string
	Description string
	Schema      json.RawMessage
	Strict      *bool
	Member      string
}

// addResult appends a tool result, merging it into the message before when
// that holds nothing but tool results: Chat writes one message per result
// and Responses one item, Messages wants all results of a turn in one
// message (docs/translation-facts.md#t4).
func (r *Request) addResult(p Part, member string) {
	if n := len(r.Messages); n > 0 {
		last := &r.Messages[n-1]
		if last.Role == RoleUser && onlyResults(last.Parts) {
			last.Parts = append(last.Parts, p)
			return
		}
	}
	r.Messages = append(r.Messages, Message{Role: RoleUser, Parts: []Part{p}, Member: member})
}

// addCall appends an assistant's tool call, to the assistant message just
// before if there is one (Responses writes text and calls as separate items
// of one turn).
func (r *Request) addCall(p Part, member string) {
	if n := len(r.Messages); n > 0 && r.Messages[n-1].Role == RoleAssistant {
		r.Messages[n-1].Parts = append(r.Messages[n-1].Parts, p)
		return
	}
	r.Messages = append(r.Messages, Message{Role: RoleAssistant, Parts: []Part{p}, Member: member})
}

// onlyResults says whether parts are tool results and nothing else.
func onlyResults(parts []Part) bool {
	for _, p := range parts {
		if p.Kind != PartResult {
			return false
		}
	}
	return len(parts) > 0
}

// pairToolResults gives every tool call and result an id: a call without
// one gets an id made of its position, which stays the same on every later
// turn of the conversation (the transcript only grows at its end); a result
// without one answers the first call of the turn before it that has no
// result yet. An engine refuses a transcript with a call or result it
// cannot pair (docs/translation-facts.md#t5).
func (r *Request) pairToolResults() {
	var open []string // calls of the last assistant turn not answered yet
	for i := range r.Messages {
		m := &r.Messages[i]
		if m.Role == RoleAssistant {
			open = open[:0]
		}
		for j := range m.Parts {
			p := &m.Parts[j]
			switch p.Kind {
			case PartCall:
				if p.ID == "" {
					p.ID = "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
				}
				open = append(open, p.ID)
			case PartResult:
				if p.ID == "" && len(open) > 0 {
					p.ID = open[0]
				}
				if k := indexOf(open, p.ID); k >= 0 {
					open = append(open[:k], open[k+1:]...)
				}
			}
		}
	}
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// ToolID is a request's tool call id as Messages and Converse take it:
// sanitized, and never empty (an empty id would be refused too).
func ToolID(id string) string {
	if id == "" {
		return "toolu_empty"
	}
	return SanitizeID(id)
}

// SanitizeID makes a tool call id fit Messages' ^[a-zA-Z0-9_-]+$
// (docs/translation-facts.md#t3): ids from other engines
// ("functions.Bash:0") would be refused on the next turn. The same
// function is applied to a call and to its result, and to the ids of a
// request and of the answers, so they still pair. An empty id stays empty.
func SanitizeID(id string) string {
	ok := true
	for i := 0; i < len(id); i++ {
		if !IDByte(id[i]) {
			ok = false
			break
		}
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i := range b {
		if !IDByte(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

// IDByte reports whether c may stand in a Messages tool id.
func IDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// Texts is the text of parts' text parts, joined by sep.
func Texts(parts []Part, sep string) string {
	var b strings.Builder
	n := 0
	for _, p := range parts {
		if p.Kind != PartText {
			continue
		}
		if n > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p.Text)
		n++
	}
	return b.String()
}

// SplitDataURI splits "data:<media type>;base64,<data>"; ok is false for
// any other URL.
func SplitDataURI(url string) (mediaType, data string, ok bool) {
	rest, found := strings.CutPrefix(url, "data:")
	if !found {
		return "", "", false
	}
	head, data, found := strings.Cut(rest, ",")
	if !found {
		return "", "", false
	}
	mediaType, found = strings.CutSuffix(head, ";base64")
	if !found {
		return "", "", false
	}
	return mediaType, data, true
}

// ArgsObject is a tool call's arguments as the JSON object Messages'
// tool_use input must be: "" is {} (an engine sends no arguments for a tool
// that takes none); ok is false for a text that is not a JSON object.
func ArgsObject(args string) (json.RawMessage, bool) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), true
	}
	c := Compact([]byte(args))
	if len(c) == 0 || c[0] != '{' {
		return json.RawMessage("{}"), false
	}
	return c, true
}

// Budgets of Messages' extended thinking per OpenAI reasoning effort, as
// LiteLLM maps them (docs/translation-facts.md#requests); Messages' minimum budget is 1024.
const (
	BudgetMin    = 1024
	budgetMedium = 2048
	budgetHigh   = 4096
	budgetMax    = 16384
)

// EffortBudget is the thinking budget for an effort; 0 for none.
func EffortBudget(effort string) int {
	switch effort {
	case "minimal", "low":
		return BudgetMin
	case "medium":
		return budgetMedium
	case "high":
		return budgetHigh
	case "xhigh", "max":
		return budgetMax
	}
	return 0
}

// budgetEffort is the effort for a thinking budget: up to the minimum is
// low, up to (not including) high's budget medium, so that an effort
// translated to a budget and back is the same effort.
func budgetEffort(budget int) string {
	switch {
	case budget <= BudgetMin:
		return "low"
	case budget < budgetHigh:
		return "medium"
	}
	return "high"
}

// RequestOptions are what the gateway knows that a request does not say.
type RequestOptions struct {
	// MaxTokens is max_tokens of a request translated to Messages (which
	// requires it) that sets no limit; 0 means DefaultMaxTokens, which is
	// what the gateway's requests get (it sets none).
	MaxTokens int
	// Model is the model the engine is sent: the body's model (an API
	// whose body does not name it, Converse, has it in its path), and
	// what decides a model family's own fields, such as Claude's
	// thinking. "" means the client's model.
	Model string
}

// drops lists the client's members a translation drops, one entry per kind
// of member: a transcript with forty thinking blocks logs one line, not
// forty, and the first one's path is enough to find them.
type drops struct {
	list []string
	seen map[string]bool
}

// formatName is a schema's name, which Chat and Responses require and
// Messages does not have.
func formatName(f *Format) string {
	if f.Name != "" {
		return f.Name
	}
	return "response"
}

// withExtra appends members to the JSON object obj, in key order.
func withExtra(obj []byte, extra map[string]json.RawMessage) []byte {
	if len(extra) == 0 {
		return obj
	}
	keys := make([]string, 0, len(extra))
	for k := range extra {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	b := obj[:len(obj)-1]
	for _, k := range keys {
		if len(b) > 1 {
			b = append(b, ',')
		}
		kb, _ := Marshal(k)
		b = append(append(append(b, kb...), ':'), Compact(extra[k])...)
	}
	return append(b, '}')
}

// ResultText is a tool result's text. Chat and Responses have no is_error:
// an error's text is prefixed "Error: ", so the model still reads that the
// call failed.
func ResultText(p Part) string {
	text := Texts(p.Content, "\n")
	if p.IsError {
		return "Error: " + text
	}
	return text
}

// EmptySchema is the input_schema of a tool that declares no parameters:
// Messages requires one.
var EmptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// ClientMember is the path of a member the client's API (from) says
// elsewhere than Chat's name says: how a writer names a member it drops,
// as the client wrote it (the API's Codec.Paths).
func ClientMember(from api.API, key string) string {
	if c := codecOf(from); c != nil {
		if p, ok := c.Paths[key]; ok {
			return p
		}
	}
	return key
}

// clone is a copy of d that records on without changing d.
func (d drops) clone() drops {
	c := drops{list: slices.Clone(d.list)}
	if len(d.seen) > 0 {
		c.seen = make(map[string]bool, len(d.seen))
		for k := range d.seen {
			c.seen[k] = true
		}
	}
	return c
}

// Drop records that member, of kind (a short name such as "thinking" or
// the member's own name), is dropped: once per kind.
func (r *Request) Drop(kind, member string) { r.drops.add(kind, member) }

// add records member, of kind (a short name such as "thinking" or the
// member's own name), unless a member of that kind was recorded already.
func (d *drops) add(kind, member string) {
	if d.seen[kind] {
		return
	}
	if d.seen == nil {
		d.seen = map[string]bool{}
	}
	d.seen[kind] = true
	d.list = append(d.list, member)
}
