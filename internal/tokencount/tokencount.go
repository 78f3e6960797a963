// Package tokencount counts a Chat Completions prompt's tokens, for
// Messages' count_tokens on an engine that has no count_tokens of its own
// (handler/counttokens.go, docs/translation.md#count_tokens): the text
// an engine's chat template is given (Read), the body that asks the
// engine's own tokenizer (TokenizeBody: llama-server's and vLLM's
// /tokenize each read the part they know), the answer read (Tokenized),
// and an estimate where the engine has no tokenizer (Prompt.Estimate). It
// knows nothing of requests.
package tokencount

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Prompt is what an engine's chat template is given, as text: each
// message's role and text, its tool calls' names and arguments, and the
// tools' definitions. Images and files are not text: the count leaves them
// out (an engine's tokenizer, given the messages, counts them its way).
type Prompt struct {
	Text     string
	Messages int
}

type chatBody struct {
	Messages []struct {
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		ToolCalls []struct {
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	} `json:"messages"`
	Tools []struct {
		Function json.RawMessage `json:"function"`
	} `json:"tools"`
}

// Read is the prompt of a Chat Completions request body.
func Read(chat []byte) (Prompt, error) {
	var c chatBody
	if err := json.Unmarshal(chat, &c); err != nil {
		return Prompt{}, err
	}
	if c.Messages == nil {
		return Prompt{}, errors.New("no messages")
	}
	var b strings.Builder
	for _, t := range c.Tools {
		// a template writes a tool's definition as JSON: name,
		// description and parameters, as the request has them
		var compact bytes.Buffer
		if json.Compact(&compact, t.Function) == nil {
			b.Write(compact.Bytes())
			b.WriteByte('\n')
		}
	}
	for _, m := range c.Messages {
		b.WriteString(m.Role)
		b.WriteByte('\n')
		writeContent(&b, m.Content)
		for _, tc := range m.ToolCalls {
			b.WriteString(tc.Function.Name)
			b.WriteByte(' ')
			b.WriteString(tc.Function.Arguments)
			b.WriteByte('\n')
		}
	}
	return Prompt{Text: b.String(), Messages: len(c.Messages)}, nil
}

// writeContent writes a message's content: a string, or the text of its
// parts.
func writeContent(b *strings.Builder, raw json.RawMessage) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		if s != "" {
			b.WriteString(s)
			b.WriteByte('\n')
		}
		return
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	json.Unmarshal(raw, &parts)
	for _, p := range parts {
		if p.Text != "" {
			b.WriteString(p.Text)
			b.WriteByte('\n')
		}
	}
}

// Estimate is the prompt's tokens without a tokenizer: a token for every
// four bytes of its text (the rule the gateway reserves a prompt's tokens
// by; English prose runs about four characters a token, code and other
// scripts fewer, so the estimate errs high for those), and the
// per-message tokens a chat template adds: four for each message and
// three that start the answer, as OpenAI counts them for its models.
func (p Prompt) Estimate() int {
	return (len(p.Text)+3)/4 + 4*p.Messages + 3
}

// TokenizeBody is the body of a POST /tokenize that llama-server's and
// vLLM's tokenizers both read: llama-server tokenizes "content" (the
// prompt's text; its /tokenize knows no chat template), vLLM renders
// "messages" and "tools" with the model's own chat template
// (add_generation_prompt, as a request would be) and counts that. Each
// ignores the members it does not know.
func TokenizeBody(model string, chat []byte, p Prompt) []byte {
	out := []byte(`{"model":`)
	out = jsonmember.AppendString(out, model)
	for _, name := range [...]string{"messages", "tools"} {
		if s, e, ok := jsonmember.Find(chat, jsonmember.SkipSpace(chat, 0), name); ok {
			out = append(out, `,"`+name+`":`...)
			out = append(out, chat[s:e]...)
		}
	}
	out = append(out, `,"add_generation_prompt":true,"add_special":true,"content":`...)
	out = jsonmember.AppendString(out, p.Text)
	return append(out, '}')
}

// Tokenized reads a /tokenize answer: vLLM's count, else the length of
// llama-server's tokens (ids, or {id, piece} objects with with_pieces).
func Tokenized(body []byte) (int, bool) {
	if !json.Valid(body) {
		return 0, false
	}
	v := jsonmember.SkipSpace(body, 0)
	if s, e, ok := jsonmember.Find(body, v, "count"); ok && body[s] >= '0' && body[s] <= '9' {
		return jsonmember.Count(body, s, e), true
	}
	s, _, ok := jsonmember.Find(body, v, "tokens")
	if !ok || body[s] != '[' {
		return 0, false
	}
	n := 0
	for it := jsonmember.Array(body, s); ; n++ {
		if _, _, _, more := it.Next(); !more {
			return n, true
		}
	}
}
