package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// AnswerOptions are what the client's request said that its answer's shape
// depends on.
type AnswerOptions struct {
	// CustomTools are, for Responses clients, the names of the tools the
	// request declared `custom` (freeform). They went upstream as function
	// tools with one string parameter "input"; their calls go back to the
	// client as custom_tool_call items {call_id, name, input}.
	CustomTools []string
	// Namespaces are, for Responses clients, the function names Request
	// gave the tools of the request's namespaces (Codex's MCP servers),
	// each with its namespace and name (Request.Namespaces): Codex runs a call
	// only when it names both, so a call of a flattened name goes back as
	// {namespace, name}.
	Namespaces map[string][2]string
	// Model is the model sent, for answers that do not name it
	// (Converse's; Gemini's without a modelVersion).
	Model string
}

// AnswerBody translates a whole JSON answer (status 200) of API from into API
// to. A body that is not an answer of from (not JSON, a member of the wrong
// type, no choices/content/output, or a Responses answer that failed or
// has not finished) is an error: the gateway answers it with a 502 naming
// the engine, because a client cannot be given an answer that was not
// there.
//
// What carries and what is dropped, direction by direction, is the table
// in docs/translation.md; in short: text, refusals, tool calls (ids kept,
// sanitized toward Messages), reasoning (its signature only where the
// target has a place for it), the stop reason through Stop and the counts
// through Usage.
func AnswerBody(from, to api.API, body []byte, o AnswerOptions) ([]byte, error) {
	if from == to {
		return body, nil
	}
	read, write := codecOf(from), codecOf(to)
	if read == nil || read.ReadAnswer == nil {
		return nil, fmt.Errorf("an answer of %s: no translation reads it", from)
	}
	if write == nil || write.WriteAnswer == nil {
		return nil, fmt.Errorf("an answer for %s: no translation writes it", to)
	}
	a, err := read.ReadAnswer(body, o)
	if err != nil {
		return nil, fmt.Errorf("reading the engine's %s answer: %w", from, err)
	}
	a.settle(body)
	return write.WriteAnswer(&a, o)
}

// Answer is one answer in none of the three APIs' words: each reader
// fills it, each writer writes it.
type Answer struct {
	ID      string // the upstream's, as it came (any prefix)
	Base    string // id without its API's prefix, or a hash of the body: what the client's ids derive from
	Model   string
	Created int64 // unix seconds; 0 when the upstream API has none
	Blocks  []Block
	Stop    Stop
	// StopSequence is the stop sequence that ended it, when the engine
	// named it (stop.go)
	StopSequence string
	Usage        api.Usage
}

// BlockKind is what a part of an answer is.
type BlockKind uint8

const (
	BlockText     BlockKind = iota + 1
	BlockRefusal            // the model declined: Chat's message.refusal, Responses' refusal part
	BlockTool               // a function (or Responses custom) tool call
	BlockThinking           // visible reasoning, with Messages' signature if it came with one
	BlockRedacted           // reasoning the client may only replay: Messages' redacted_thinking data
)

// Block is one block of an answer, in the order the upstream said them.
type Block struct {
	Kind BlockKind
	Text string // text, refusal or thinking
	ID   string // tool call id (Chat id, Messages tool_use id, Responses call_id)
	Name string // tool name
	Args string // tool arguments, a JSON text ("" for none)
	Sig  string // thinking: Messages' signature or Responses' encrypted_content; redacted: its data
}

// settle fills what every writer needs but some readers cannot say: the
// base of the client's ids and a stop reason that agrees with the parts.
func (a *Answer) settle(body []byte) {
	a.Base = stripIDPrefix(a.ID)
	if a.Base == "" {
		// An engine that sends no id still gets the same id for the same
		// answer: a client retrying a request sees what it would see twice.
		h := fnv.New64a()
		h.Write(body)
		a.Base = strconv.FormatUint(h.Sum64(), 16)
	}
	tools := a.has(BlockTool)
	// Engines that say "stop" (Gemini's STOP, some OpenAI-compatible
	// servers) after calling tools: clients that run tools only on
	// tool_use/tool_calls would otherwise stall (docs/translation-facts.md#t15).
	if tools && (a.Stop == StopEnd || a.Stop == StopNone) {
		a.Stop = StopTool
	}
	if len(a.StopSequence) > maxStopSequence {
		a.StopSequence = ""
	}
	a.Stop = a.Stop.matched(a.StopSequence != "")
	if a.Created == 0 {
		a.Created = time.Now().Unix()
	}
}

// stripIDPrefix is id without the prefix of any of the three APIs.
func stripIDPrefix(id string) string {
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_"} {
		if s, ok := strings.CutPrefix(id, p); ok {
			return s
		}
	}
	return id
}

// answerToolID is a tool call's id as the client's API has it: the engine's,
// sanitized for Messages (whose tool_use ids must match
// ^[a-zA-Z0-9_-]+$), or, for a call the engine gave no id, one made up
// from the answer's id and the call's place: stable, so that the same
// answer translated twice says the same (docs/translation-facts.md#t5).
func answerToolID(to api.API, id, base string, n int) string {
	cl := codecOf(to).client
	switch {
	case id == "":
		return cl.toolPrefix + SanitizeID(base) + "_" + strconv.Itoa(n)
	case cl.sanitizesIDs:
		return SanitizeID(id)
	}
	return id
}

// objectArgs is a tool call's arguments as a JSON object: Messages'
// tool_use input must be one. "" (an engine's call without arguments) is
// {}; arguments that are not an object (cut short by max_tokens, or an
// engine's mistake) are {} too, because a client cannot be handed an input
// that is not an object, and the stop reason (max_tokens) tells it why.
func objectArgs(args string) json.RawMessage {
	s := bytes.TrimSpace([]byte(args))
	if len(s) == 0 || s[0] != '{' || !json.Valid(s) {
		return json.RawMessage(`{}`)
	}
	var b bytes.Buffer
	if json.Compact(&b, s) != nil {
		return json.RawMessage(`{}`)
	}
	return b.Bytes()
}

// answerArgs is a tool call's arguments as a JSON text read from a member
// that should be a string holding JSON (OpenAI's arguments) but that some
// engines (Ollama's OpenAI layer) send as the object itself.
func answerArgs(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		return "", err
	}
	return b.String(), nil
}

// usageMember is u written as API a says it, as a member value.
func usageMember(a api.API, u api.Usage) json.RawMessage {
	return a.AppendUsage(make([]byte, 0, 200), u)
}

// join concatenates the texts of the blocks of kind k.
func (a *Answer) join(k BlockKind) string {
	var b strings.Builder
	for _, p := range a.Blocks {
		if p.Kind == k {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}

// has says whether the answer has a block of kind k.
func (a *Answer) has(k BlockKind) bool {
	for _, p := range a.Blocks {
		if p.Kind == k {
			return true
		}
	}
	return false
}

// The readers take what each API's answer says into an Answer. They are
// lenient where engines are known to differ from the API's owner
// (arguments as an object, content as parts, a float for a time) and
// strict where a wrong shape means there is no answer: a missing
// choices/content/output, or a member of the wrong type. The writers write
// an Answer in each API's words, with every member its official SDKs read
// as required present (null where the gateway has nothing to say), in the
// order the API's owner writes them.

// NoAnswer is the error for a body without the member that holds an
// answer, with the engine's own error message when it sent one instead.
func NoAnswer(member string, errMember json.RawMessage) error {
	if msg := ErrorMessage(errMember); msg != "" {
		return fmt.Errorf("no %s, an error: %s", member, msg)
	}
	return fmt.Errorf("no %s", member)
}

// ErrorMessage is the message of an error member: a string, or an
// object with a string message.
func ErrorMessage(raw json.RawMessage) string {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return boundMessage(s)
	}
	var o struct {
		Message string `json:"message"`
	}
	if json.Unmarshal(raw, &o) == nil {
		return boundMessage(o.Message)
	}
	return ""
}

// unixTime reads a time in seconds that the API says is an integer but
// openai-go reads as a float (Responses' created_at): both are taken.
func unixTime(n json.Number) int64 {
	if n == "" {
		return 0
	}
	if i, err := n.Int64(); err == nil {
		return i
	}
	f, err := n.Float64()
	if err != nil || math.IsNaN(f) || f < 0 || f > math.MaxInt32*4 {
		return 0
	}
	return int64(f)
}

// stopString is a stop_reason member that names a stop string, else "".
func stopString(raw json.RawMessage) string {
	var s string
	if len(raw) == 0 || raw[0] != '"' || json.Unmarshal(raw, &s) != nil {
		return ""
	}
	return s
}

func firstOf(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
