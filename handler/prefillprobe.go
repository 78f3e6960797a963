package handler

import (
	"context"
	"encoding/json"
	"strings"
	"unicode"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// The prefill probe: `prefill on` is the operator's word that an
// engine continues a final assistant message instead of answering it anew,
// which is what a resumed stream relies on. A chat template that closes the
// last assistant turn (ollama's) makes the engine start a new answer, and a
// resume would then stitch two answers together. The probe asks for a count
// with its first numbers already said by the assistant: an engine that
// continues goes on from 6, one that starts anew says 1 again.

// prefillAsk is the probe's request, for the engine's model.
const prefillAsk = `,"messages":[{"role":"user","content":"Count from 1 to 20, the numbers separated by spaces, nothing else."},` +
	`{"role":"assistant","content":"1 2 3 4 5"}],"max_tokens":12,"temperature":0}`

// ProbePrefill checks the claim of every engine with prefill on. An engine
// whose answer cannot be read as a count fails with why; prefill stays as
// configured (the probe only reports).
func (g *Gateway) ProbePrefill(ctx context.Context) []ProbeResult {
	var out []ProbeResult
	for _, rt := range g.routes {
		if !rt.cfg.Prefills() {
			continue
		}
		model := rt.cfg.ModelName
		if model == "" {
			model = rt.cfg.Models[0]
		}
		body := []byte(`{"model":` + string(jsonmember.AppendString(nil, model)) + prefillAsk)
		res, answer := g.probeOnce(ctx, candidate{rt: rt, model: model, role: rolePrimary, acquire: true, label: rt.cfg.Name}, body)
		res.Member = rt.cfg.Name
		if res.Pass {
			res.Pass, res.Reason = prefillContinues(answer)
		}
		out = append(out, res)
	}
	return out
}

// prefillContinues judges a probe's answer by its first number: 6 goes on
// from the assistant's "1 2 3 4 5", 1 starts over.
func prefillContinues(answer []byte) (bool, string) {
	var a struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
		} `json:"choices"`
	}
	if json.Unmarshal(answer, &a) != nil || len(a.Choices) == 0 {
		return false, "prefill: the answer is not a chat completion"
	}
	text := a.Choices[0].Message.Content
	first := strings.FieldsFunc(text, func(r rune) bool { return !unicode.IsDigit(r) })
	switch {
	case len(first) == 0:
		return false, "prefill: the answer has no number to tell by: " + oneLine(text)
	case first[0] == "6":
		return true, "prefill: continues the assistant's message"
	case first[0] == "1":
		return false, "prefill on, but the engine answered the assistant's message anew instead of continuing it (its chat template closes the turn): turn prefill off, or set what makes it continue (vLLM: continue_final_message)"
	}
	return false, "prefill: the answer goes on from " + first[0] + ", not 6: " + oneLine(text)
}

// oneLine is text on one line, cut at 80 characters, for a table.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 80 {
		s = s[:77] + "..."
	}
	return s
}
