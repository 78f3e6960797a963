package handler

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// trace_content: with it on, Result keeps the request's prompt
// and the answer's text for the request's trace span (caddymodule/traces.go),
// each at most maxTraceContent bytes. With it off (the default) nothing is
// kept: prompts are the callers'.

const maxTraceContent = 64 << 10

// notePrompt keeps the request's messages (or prompt, input) as sent.
func (g *Gateway) notePrompt(req *request, res *Result) {
	if !g.traceContent || !req.json() {
		return
	}
	m := req.fields.Messages
	for _, name := range []string{"prompt", "input"} {
		if m.OK() {
			break
		}
		m, _ = jsonmember.LastMember(req.body, jsonmember.SkipSpace(req.body, 0), name)
	}
	if m.OK() {
		v := req.body[m.Value.Start:m.Value.End]
		res.Prompt = bytes.Clone(v[:min(len(v), maxTraceContent)])
	}
}

// noteAnswer keeps the answer's text: a stream's transcript, or what a JSON
// answer says.
func (g *Gateway) noteAnswer(res *Result, text []byte) {
	if g.traceContent && len(text) > 0 {
		res.Answer = string(text[:min(len(text), maxTraceContent)])
	}
}
