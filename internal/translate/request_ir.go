package translate

import (
	"encoding/json"
	"github.com/llmgateway/caddy-llm-gateway/api"
	"strconv"
	"strings"
)

// rqRequest is a request in none of the three APIs' words: what a reader
// fills and a writer spells. Members only one API has, and that a
// translation therefore drops, never reach it (the reader lists them).
type rqRequest struct {
	from, to api.API

	model    json.RawMessage // as the client sent it; the gateway rewrites it afterwards
	messages []rqMessage     // system instructions included, in the client's order

	tools        []rqTool
	choice       rqChoice // "" when the client left it to the engine
	choiceName   string   // the tool of rqChoiceNamed
	choiceMember string   // where the client said it, for a drop
	parallel     *bool    // parallel tool calls allowed

	maxTokens   *int
	temperature *float64
	topP        *float64
	stop        []string
	format      *rqFormat

	effort       string // reasoning effort in OpenAI's words: minimal, low, medium, high…
	effortMember string // where the client asked for reasoning, for a drop

	user     string          // Chat/Responses user, Messages metadata.user_id
	metadata json.RawMessage // Chat/Responses metadata (an object of strings)
	stream   bool
	n        int // Chat's choices per request (0: not said)

	// openai holds members Chat and Responses share under the same meaning
	// (prompt_cache_key, safety_identifier, service_tier, top_logprobs…),
	// carried between them and dropped toward Messages.
	openai map[string]json.RawMessage

	drops rqDrops
}

type rqChoice string

const (
	rqChoiceAuto     rqChoice = "auto"
	rqChoiceNone     rqChoice = "none"
	rqChoiceRequired rqChoice = "required" // Messages: any
	rqChoiceNamed    rqChoice = "named"
)

// rqRole is a message's author. rqSystem messages stay where the client
// put them for Chat and Responses; Messages hoists them all into system.
type rqRole uint8

const (
	rqUser rqRole = iota + 1
	rqAssistant
	rqSystem
)

type rqMessage struct {
	role   rqRole
	parts  []rqPart
	member string // the client's path, e.g. "messages[3]"
}

type rqPartKind uint8

const (
	rqText     rqPartKind = iota + 1
	rqImage               // url: an http(s) URL or a data: URI
	rqCall                // an assistant's tool call: id, name, args
	rqResult              // a tool's result: id, content, isError
	rqThinking            // text and signature (Messages), or reasoning text without one
	rqRedacted            // Messages' redacted_thinking: text holds its data
)

type rqPart struct {
	kind      rqPartKind
	text      string
	url       string // image
	detail    string // image: OpenAI's detail, which Messages has no word for
	id        string // call and result: the tool call's id
	name      string // call
	args      string // call: the arguments as a JSON text, "" for none
	content   []rqPart
	isError   bool
	signature string // thinking
	member    string // the client's path, for a drop
}

type rqTool struct {
	name        string
	description string
	params      json.RawMessage // JSON Schema of the arguments; nil for none
	strict      *bool
}

// rqFormat is structured output: a JSON Schema the answer follows
// (json_schema) or any JSON object (json_object).
type rqFormat struct {
	kind        string // json_schema or json_object
	name        string
	description string
	schema      json.RawMessage
	strict      *bool
	member      string
}

// add appends m, merging tool results into the message before when it holds
// nothing but tool results: Chat writes one message per result and
// Responses one item, Messages wants all results of a turn in one message.
func (r *rqRequest) addResult(p rqPart, member string) {
	if n := len(r.messages); n > 0 {
		last := &r.messages[n-1]
		if last.role == rqUser && rqOnlyResults(last.parts) {
			last.parts = append(last.parts, p)
			return
		}
	}
	r.messages = append(r.messages, rqMessage{role: rqUser, parts: []rqPart{p}, member: member})
}

// addCall appends an assistant's tool call, to the assistant message just
// before if there is one (Responses writes text and calls as separate items
// of one turn).
func (r *rqRequest) addCall(p rqPart, member string) {
	if n := len(r.messages); n > 0 && r.messages[n-1].role == rqAssistant {
		r.messages[n-1].parts = append(r.messages[n-1].parts, p)
		return
	}
	r.messages = append(r.messages, rqMessage{role: rqAssistant, parts: []rqPart{p}, member: member})
}

func rqOnlyResults(parts []rqPart) bool {
	for _, p := range parts {
		if p.kind != rqResult {
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
func (r *rqRequest) pairToolResults() {
	var open []string // calls of the last assistant turn not answered yet
	for i := range r.messages {
		m := &r.messages[i]
		if m.role == rqAssistant {
			open = open[:0]
		}
		for j := range m.parts {
			p := &m.parts[j]
			switch p.kind {
			case rqCall:
				if p.id == "" {
					p.id = "call_" + strconv.Itoa(i) + "_" + strconv.Itoa(j)
				}
				open = append(open, p.id)
			case rqResult:
				if p.id == "" && len(open) > 0 {
					p.id = open[0]
				}
				if k := rqIndex(open, p.id); k >= 0 {
					open = append(open[:k], open[k+1:]...)
				}
			}
		}
	}
}

func rqIndex(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// rqSanitizeID makes a tool call id fit Messages' ^[a-zA-Z0-9_-]+$ (docs/translation-facts.md#t3):
// ids from other engines ("functions.Bash:0") would be refused on the next
// turn. The same function is applied to a call and to its result, so they
// still pair.
func rqSanitizeID(id string) string {
	if id == "" {
		return "toolu_empty"
	}
	ok := true
	for i := 0; i < len(id); i++ {
		if !rqIDByte(id[i]) {
			ok = false
			break
		}
	}
	if ok {
		return id
	}
	b := []byte(id)
	for i := range b {
		if !rqIDByte(b[i]) {
			b[i] = '_'
		}
	}
	return string(b)
}

func rqIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// rqTexts is the text of parts' text parts, joined by sep.
func rqTexts(parts []rqPart, sep string) string {
	var b strings.Builder
	n := 0
	for _, p := range parts {
		if p.kind != rqText {
			continue
		}
		if n > 0 {
			b.WriteString(sep)
		}
		b.WriteString(p.text)
		n++
	}
	return b.String()
}

// rqSplitDataURI splits "data:<media type>;base64,<data>"; ok is false for
// any other URL.
func rqSplitDataURI(url string) (mediaType, data string, ok bool) {
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

// rqArgsObject is a tool call's arguments as the JSON object Messages'
// tool_use input must be: "" is {} (an engine sends no arguments for a tool
// that takes none); ok is false for a text that is not a JSON object.
func rqArgsObject(args string) (json.RawMessage, bool) {
	if strings.TrimSpace(args) == "" {
		return json.RawMessage("{}"), true
	}
	c := rqCompact([]byte(args))
	if len(c) == 0 || c[0] != '{' {
		return json.RawMessage("{}"), false
	}
	return c, true
}

// Budgets of Messages' extended thinking per OpenAI reasoning effort, as
// LiteLLM maps them (docs/translation-facts.md#requests); Messages' minimum budget is 1024.
const (
	rqBudgetMin    = 1024
	rqBudgetMedium = 2048
	rqBudgetHigh   = 4096
	rqBudgetMax    = 16384
)

// rqEffortBudget is the thinking budget for an effort; 0 for none.
func rqEffortBudget(effort string) int {
	switch effort {
	case "minimal", "low":
		return rqBudgetMin
	case "medium":
		return rqBudgetMedium
	case "high":
		return rqBudgetHigh
	case "xhigh", "max":
		return rqBudgetMax
	}
	return 0
}

// rqBudgetEffort is the effort for a thinking budget: up to the minimum is
// low, up to (not including) high's budget medium, so that an effort
// translated to a budget and back is the same effort.
func rqBudgetEffort(budget int) string {
	switch {
	case budget <= rqBudgetMin:
		return "low"
	case budget < rqBudgetHigh:
		return "medium"
	}
	return "high"
}
