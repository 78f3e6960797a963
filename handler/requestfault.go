package handler

import (
	"bytes"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// A request's fault is not the engine's. An engine's error answer that is
// about the request, not about the engine's health (a parameter it does
// not take, tools it cannot use, a tool schema or a grammar it cannot
// compile, a prompt longer than its context), is the client's to hear, in
// its own API's shape, as a 400: it never counts against the model's
// breaker, is never retried, and never fails over to another engine as a
// failure would (a context too long still goes to context_fallback). A
// warning names what the engine refused and how to make it accept it.
//
// Engines say so in words, not codes (llama-server answers
// "Unsupported param: tools" with a 500 server_error), so an answer is
// recognised by its words, by the first row of this table whose words its
// body holds (case aside), on a status that can carry them (400, 413, 422,
// 500; the others' row, last, only on a 4xx: its words on a 500 may be an
// engine's trouble of its own); docs/errors.md lists the rows with the
// bodies they were read from.
//
//	engine        its words                                         kind            how to make it accept it
//	llama-server  tools param requires --jinja                      tools           start it with --jinja, or strip tools
//	llama-server  unsupported param: tools, … tool_choice           tools           a llama-server with --jinja, or strip tools
//	llama-server  cannot use tools with stream                      tools           a newer llama-server, or strip tools
//	vLLM          tool choice requires --enable-auto-tool-choice    tools           --enable-auto-tool-choice --tool-call-parser, or strip tools
//	ollama        does not support tools                            tools           a model ollama lists with tools, or strip tools
//	ollama        does not support thinking                         param           strip think
//	llama-server  unsupported param: <member>                       param           strip the member
//	llama-server  only one completion choice is allowed             param           strip n
//	llama-server  exceeds the available context size                context_length  a larger context (-c), or context_fallback
//	llama-server  input is too large to process                     context_length  a larger batch (-b, -ub), or context_fallback
//	vLLM, OpenAI  maximum context length, context_length_exceeded   context_length  a larger context (--max-model-len), or context_fallback
//	llama-server  failed to parse grammar, unrecognized schema,     grammar         a grammar or schema the engine compiles
//	              json schema conversion failed
//	vLLM          not supported by xgrammar, guided decoding        grammar         a schema its guided decoding takes
//	others (4xx)  context length, context window, prompt is too     context_length  context_fallback
//	              long, too many tokens
//
// A grammar fault of a request that has tools is a tool_schema fault: the
// engine compiles each tool's parameters into a grammar.

// faultKind is what an engine refused of a request.
type faultKind string

const (
	faultTools      faultKind = "tools"
	faultParam      faultKind = "param"
	faultContext    faultKind = "context_length"
	faultGrammar    faultKind = "grammar"
	faultToolSchema faultKind = "tool_schema"
)

// code is the error code a client hears the fault by.
func (k faultKind) code() string {
	switch k {
	case faultTools:
		return "tools_not_supported"
	case faultToolSchema:
		return "tool_schema_not_supported"
	case faultContext:
		return "context_length_exceeded"
	case faultGrammar:
		return "invalid_grammar"
	}
	return "unsupported_parameter"
}

// requestFault is an engine's answer that is about the request.
type requestFault struct {
	kind faultKind
	what string // what the engine said, in its words
	fix  string // how to make it accept such a request
}

// faultRule is a row of the table.
type faultRule struct {
	words []string // any of them, lower case
	kind  faultKind
	fix   string
}

// stripTools is the engine's own way to take tools out of every request.
const stripTools = "or let the gateway drop them: strip tools tool_choice parallel_tool_calls on the engine"

var faultRules = []faultRule{
	{[]string{"tools param requires --jinja"}, faultTools, "start llama-server with --jinja (its chat template then takes tools), " + stripTools},
	{[]string{"unsupported param: tools", "unsupported param: tool_choice"}, faultTools, "run a llama-server that takes tools (--jinja), " + stripTools},
	{[]string{"cannot use tools with stream"}, faultTools, "run a newer llama-server (it streams tool calls), " + stripTools},
	{[]string{"tool choice requires --enable-auto-tool-choice"}, faultTools, "start vLLM with --enable-auto-tool-choice --tool-call-parser <parser>, " + stripTools},
	{[]string{"does not support tools"}, faultTools, "serve a model ollama lists with tools, " + stripTools},
	{[]string{"does not support thinking"}, faultParam, "serve a model that thinks, or strip think on the engine"},
	{[]string{"unsupported param: "}, faultParam, "strip that member on the engine"},
	{[]string{"only one completion choice is allowed"}, faultParam, "strip n on the engine"},
	{[]string{"exceeds the available context size", "exceed_context_size_error"}, faultContext, "give llama-server a larger context (-c), or the engine a context_fallback"},
	{[]string{"input is too large to process"}, faultContext, "give llama-server a larger batch (-b and -ub at least the prompt), or the engine a context_fallback"},
	{[]string{"maximum context length", "context_length_exceeded"}, faultContext, "give the engine a larger context (vLLM's --max-model-len), or a context_fallback"},
	{[]string{"failed to parse grammar", "unrecognized schema", "json schema conversion failed"}, faultGrammar, "send a grammar or JSON schema the engine compiles"},
	{[]string{"not supported by xgrammar", "guided decoding"}, faultGrammar, "send a JSON schema the engine's guided decoding takes"},
}

// looseContext is the others' row, read last and only on a 4xx: its words
// are too loose to blame the request for an engine's 500 ("context length"
// in a failure of its own).
var looseContext = faultRule{[]string{"context length", "context window", "prompt is too long", "too many tokens"}, faultContext, "give the engine a context_fallback"}

// maxFaultMessage bounds the engine's words quoted in the client's error
// and the warning.
const maxFaultMessage = 300

// maxFaultScan bounds what of an error body is read for the table's words.
const maxFaultScan = 8 << 10

// recogniseFault reads an engine's error answer (status, body) of a
// request (sent: the body it was sent) and returns the request's fault
// it says, or nil for an answer about the engine.
func recogniseFault(status int, body, sent []byte) *requestFault {
	switch status {
	case 400, 413, 422, 500:
	default:
		return nil
	}
	text := bytes.ToLower(body[:min(len(body), maxFaultScan)])
	rules := faultRules
	if status < 500 {
		rules = append(rules[:len(rules):len(rules)], looseContext)
	}
	for _, r := range rules {
		for _, w := range r.words {
			if !bytes.Contains(text, []byte(w)) {
				continue
			}
			f := &requestFault{kind: r.kind, what: faultMessage(body), fix: r.fix}
			if f.kind == faultGrammar && hasTools(sent) {
				f.kind, f.fix = faultToolSchema, "send tool parameters the engine's grammar compiles (plain JSON schema types), "+stripTools
			}
			return f
		}
	}
	return nil
}

// faultMessage is the engine's own message: its error's, else a top-level
// "message" (vLLM's older {"object":"error","message":…}), else the body.
func faultMessage(body []byte) string {
	m := apierror.UpstreamMessage(body)
	if strings.HasPrefix(m, "{") {
		if mm, ok := jsonmember.LastMember(body, jsonmember.SkipSpace(body, 0), "message"); ok {
			if s, ok := jsonmember.StringValue(body, mm); ok && len(s) > 0 {
				m = string(s)
			}
		}
	}
	if len(m) > maxFaultMessage {
		// cut on a character's start: the message goes into JSON and logs
		n := maxFaultMessage
		for n > 0 && !utf8.RuneStart(m[n]) {
			n--
		}
		m = m[:n] + "…"
	}
	return m
}

// hasTools reports whether a request body names tools.
func hasTools(body []byte) bool {
	start := jsonmember.SkipSpace(body, 0)
	if start >= len(body) || body[start] != '{' {
		return false
	}
	m, ok := jsonmember.LastMember(body, start, "tools")
	return ok && body[m.Value.Start] == '[' && m.Value.End-m.Value.Start > 2
}

// faultLog keeps the request faults' warnings to one a minute per engine
// and kind: an agent that sends tools on every turn is told of once, not
// on every turn.
type faultLog struct {
	mu   sync.Mutex
	last map[string]time.Time
}

// due reports whether a warning of engine's kind is due now, and notes it.
func (l *faultLog) due(engine string, kind faultKind, now time.Time) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	key := engine + "\x00" + string(kind)
	if t, ok := l.last[key]; ok && now.Sub(t) < time.Minute {
		return false
	}
	if l.last == nil {
		l.last = map[string]time.Time{}
	}
	l.last[key] = now
	return true
}
