package caddymodule

import (
	"encoding/json"
	"strings"

	"go.opentelemetry.io/otel/attribute"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// With trace_content on, a request's span holds its prompt and its answer,
// in OpenTelemetry's GenAI shape: gen_ai.input.messages and
// gen_ai.output.messages, JSON arrays of {role, parts: [{type, content}]}.
// The handler keeps at most 64 KiB of each; off, it keeps nothing and no
// attribute is written.

type genAIPart struct {
	Type    string `json:"type"`
	Content string `json:"content"`
}

type genAIMessage struct {
	Role  string      `json:"role"`
	Parts []genAIPart `json:"parts"`
}

// contentAttrs are the prompt and answer attributes of res, none without
// trace_content.
func contentAttrs(res *handler.Result) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	if len(res.Prompt) > 0 {
		attrs = append(attrs, attribute.String("gen_ai.input.messages", inputMessages(res.Prompt)))
	}
	if res.Answer != "" {
		out, _ := json.Marshal([]genAIMessage{{Role: "assistant", Parts: []genAIPart{{Type: "text", Content: strings.ToValidUTF8(res.Answer, "")}}}})
		attrs = append(attrs, attribute.String("gen_ai.output.messages", string(out)))
	}
	return attrs
}

// inputMessages turns a request's messages (OpenAI's or Anthropic's: a
// content string, or parts with text) into GenAI messages; a prompt
// string, or messages cut at 64 KiB, become one user message of the raw
// text.
func inputMessages(prompt []byte) string {
	var msgs []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	var out []genAIMessage
	if json.Unmarshal(prompt, &msgs) == nil {
		for _, m := range msgs {
			gm := genAIMessage{Role: m.Role, Parts: []genAIPart{}}
			var text string
			var parts []struct {
				Type string `json:"type"`
				Text string `json:"text"`
			}
			switch {
			case json.Unmarshal(m.Content, &text) == nil:
				gm.Parts = append(gm.Parts, genAIPart{Type: "text", Content: text})
			case json.Unmarshal(m.Content, &parts) == nil:
				for _, p := range parts {
					if p.Text != "" {
						gm.Parts = append(gm.Parts, genAIPart{Type: "text", Content: p.Text})
					}
				}
			}
			out = append(out, gm)
		}
	} else {
		raw := string(prompt)
		var s string
		if json.Unmarshal(prompt, &s) == nil {
			raw = s
		}
		out = []genAIMessage{{Role: "user", Parts: []genAIPart{{Type: "text", Content: strings.ToValidUTF8(raw, "")}}}}
	}
	b, _ := json.Marshal(out)
	return string(b)
}
