package translate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"hash/fnv"
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
	// Model is the model sent, for APIs whose answers do not name it
	// (Converse, Gemini).
	Model string
}

// Answer translates a whole JSON answer (status 200) of API from into API
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
func Answer(from, to api.API, body []byte, o AnswerOptions) ([]byte, error) {
	if from == to {
		return body, nil
	}
	var a anAnswer
	var err error
	switch from {
	case api.Chat:
		a, err = anReadChat(body)
	case api.Messages:
		a, err = anReadMessages(body)
	case api.Responses:
		a, err = anReadResponses(body)
	case api.Converse:
		a, err = anReadConverse(body, o.Model)
	case api.Gemini:
		a, err = anReadGemini(body, o.Model)
	default:
		return nil, fmt.Errorf("answer of unknown API %d", from)
	}
	if err != nil {
		return nil, fmt.Errorf("reading the engine's %s answer: %w", from, err)
	}
	a.settle(body)
	switch to {
	case api.Chat:
		return anWriteChat(&a)
	case api.Messages:
		return anWriteMessages(&a)
	case api.Responses:
		return anWriteResponses(&a, o)
	}
	return nil, fmt.Errorf("answer to unknown API %d", to)
}

// anAnswer is one answer in none of the three APIs' words: each reader
// fills it, each writer writes it.
type anAnswer struct {
	id      string // the upstream's, as it came (any prefix)
	base    string // id without its API's prefix, or a hash of the body: what the client's ids derive from
	model   string
	created int64 // unix seconds; 0 when the upstream API has none
	parts   []anPart
	stop    Stop
	seq     string // the stop sequence that ended it, when the engine named it (stop.go)
	usage   api.Usage
}

// anKind is what a part of an answer is.
type anKind uint8

const (
	anText     anKind = iota + 1
	anRefusal         // the model declined: Chat's message.refusal, Responses' refusal part
	anTool            // a function (or Responses custom) tool call
	anThinking        // visible reasoning, with Messages' signature if it came with one
	anRedacted        // reasoning the client may only replay: Messages' redacted_thinking data
)

// anPart is one block of an answer, in the order the upstream said them.
type anPart struct {
	kind anKind
	text string // text, refusal or thinking
	id   string // tool call id (Chat id, Messages tool_use id, Responses call_id)
	name string // tool name
	args string // tool arguments, a JSON text ("" for none)
	sig  string // thinking: Messages' signature or Responses' encrypted_content; redacted: its data
}

// settle fills what every writer needs but some readers cannot say: the
// base of the client's ids and a stop reason that agrees with the parts.
func (a *anAnswer) settle(body []byte) {
	a.base = anStripPrefix(a.id)
	if a.base == "" {
		// An engine that sends no id still gets the same id for the same
		// answer: a client retrying a request sees what it would see twice.
		h := fnv.New64a()
		h.Write(body)
		a.base = strconv.FormatUint(h.Sum64(), 16)
	}
	tools := a.anHas(anTool)
	// Engines that say "stop" (Gemini's STOP, some OpenAI-compatible
	// servers) after calling tools: clients that run tools only on
	// tool_use/tool_calls would otherwise stall (docs/translation-facts.md#t15).
	if tools && (a.stop == StopEnd || a.stop == StopNone) {
		a.stop = StopTool
	}
	if len(a.seq) > maxStopSequence {
		a.seq = ""
	}
	a.stop = a.stop.matched(a.seq != "")
	if a.created == 0 {
		a.created = time.Now().Unix()
	}
}

// anStripPrefix is id without the prefix of any of the three APIs.
func anStripPrefix(id string) string {
	for _, p := range [...]string{"chatcmpl-", "msg_", "resp_"} {
		if s, ok := strings.CutPrefix(id, p); ok {
			return s
		}
	}
	return id
}

// anToolID is a tool call's id as the client's API has it: the engine's,
// sanitized for Messages (whose tool_use ids must match
// ^[a-zA-Z0-9_-]+$), or, for a call the engine gave no id, one made up
// from the answer's id and the call's place: stable, so that the same
// answer translated twice says the same (docs/translation-facts.md#t5).
func anToolID(to api.API, id, base string, n int) string {
	switch {
	case id == "" && to == api.Messages:
		return "toolu_" + anSanitizeID(base) + "_" + strconv.Itoa(n)
	case id == "":
		return "call_" + anSanitizeID(base) + "_" + strconv.Itoa(n)
	case to == api.Messages:
		return anSanitizeID(id)
	}
	return id
}

// anSanitizeID is id with every byte Messages refuses in a tool_use id
// (anything outside ^[a-zA-Z0-9_-]+$) replaced by '_' (docs/translation-facts.md#t3). The
// request translator sanitizes tool_result ids the same way, so a pair
// still matches.
func anSanitizeID(id string) string {
	clean := true
	for i := 0; i < len(id); i++ {
		if !anIDByte(id[i]) {
			clean = false
			break
		}
	}
	if clean {
		return id
	}
	b := []byte(id)
	for i, c := range b {
		if !anIDByte(c) {
			b[i] = '_'
		}
	}
	return string(b)
}

func anIDByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
}

// anObjectArgs is a tool call's arguments as a JSON object: Messages'
// tool_use input must be one. "" (an engine's call without arguments) is
// {}; arguments that are not an object (cut short by max_tokens, or an
// engine's mistake) are {} too, because a client cannot be handed an input
// that is not an object, and the stop reason (max_tokens) tells it why.
func anObjectArgs(args string) json.RawMessage {
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

// anArgsText is a tool call's arguments as a JSON text read from a member
// that should be a string holding JSON (OpenAI's arguments) but that some
// engines (Ollama's OpenAI layer) send as the object itself.
func anArgsText(raw json.RawMessage) (string, error) {
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

// anMarshal is v as JSON, with <, > and & as they are: model text is full
// of them, and a client shows what the model wrote.
func anMarshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// anUsage is u written as API a says it, as a member value.
func anUsage(a api.API, u api.Usage) json.RawMessage {
	return a.AppendUsage(make([]byte, 0, 200), u)
}

// anJoin concatenates the texts of the parts of kind k.
func (a *anAnswer) anJoin(k anKind) string {
	var b strings.Builder
	for _, p := range a.parts {
		if p.kind == k {
			b.WriteString(p.text)
		}
	}
	return b.String()
}

// anHas says whether the answer has a part of kind k.
func (a *anAnswer) anHas(k anKind) bool {
	for _, p := range a.parts {
		if p.kind == k {
			return true
		}
	}
	return false
}
