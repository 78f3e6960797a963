package bedrock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Reading a Bedrock Converse answer:
//
//	{output:{message:{role, content:[text|toolUse|reasoningContent…]}},
//	 stopReason, usage{inputTokens, outputTokens, totalTokens,
//	 cacheReadInputTokens, cacheWriteInputTokens}, metrics}
//
// It names neither an id nor the model: the id is the hub's hash of the
// body (translate.AnswerBody settles it), the model the one the request sent (AnswerOptions.Model). Converse
// is an engine's API only: its answers are read, never written.

// converseAnswer is a Converse answer, the members read. An error body that
// came with a 200 has a message and no output.
type converseAnswer struct {
	Output *struct {
		Message *struct {
			Content []converseAnswerBlock `json:"content"`
		} `json:"message"`
	} `json:"output"`
	StopReason string          `json:"stopReason"`
	Usage      json.RawMessage `json:"usage"`   // read by api.Converse
	Message    json.RawMessage `json:"message"` // an error body's, when one came as a 200
}

// converseAnswerBlock is one member of the ContentBlock union: text,
// toolUse, or Claude's reasoningContent.
type converseAnswerBlock struct {
	Text    *string `json:"text"`
	ToolUse *struct {
		ToolUseID string          `json:"toolUseId"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
	} `json:"toolUse"`
	Reasoning *struct {
		Text *struct {
			Text      string `json:"text"`
			Signature string `json:"signature"`
		} `json:"reasoningText"`
		Redacted string `json:"redactedContent"` // base64, as the JSON carries bytes
	} `json:"reasoningContent"`
}

// converseReadAnswer reads a Converse answer's content blocks in their
// order. inputTokens leaves the cache out, as Messages' input_tokens does;
// api.Converse adds it back (docs/translation-facts.md#t11).
func converseReadAnswer(body []byte, o translate.AnswerOptions) (translate.Answer, error) {
	model := o.Model
	var c converseAnswer
	if err := json.Unmarshal(body, &c); err != nil {
		return translate.Answer{}, err
	}
	if c.Output == nil || c.Output.Message == nil {
		if msg := translate.ErrorMessage(c.Message); msg != "" {
			return translate.Answer{}, fmt.Errorf("no output.message, an error: %s", msg)
		}
		return translate.Answer{}, errors.New("no output.message")
	}
	a := translate.Answer{Model: model, Stop: converseStop(c.StopReason)}
	a.Usage, _ = api.Converse.UsageOf(c.Usage)
	// A guardrail's or filter's text is what the model was made to say
	// instead of answering: Chat and Responses have a place for that.
	textKind := translate.BlockText
	if a.Stop == translate.StopFilter {
		textKind = translate.BlockRefusal
	}
	for i, b := range c.Output.Message.Content {
		switch {
		case b.Text != nil:
			if *b.Text != "" {
				a.Blocks = append(a.Blocks, translate.Block{Kind: textKind, Text: *b.Text})
			}
		case b.ToolUse != nil:
			var args bytes.Buffer
			if in := bytes.TrimSpace(b.ToolUse.Input); len(in) > 0 && string(in) != "null" {
				if err := json.Compact(&args, in); err != nil {
					return translate.Answer{}, fmt.Errorf("output.message.content[%d].toolUse.input: %w", i, err)
				}
			}
			a.Blocks = append(a.Blocks, translate.Block{Kind: translate.BlockTool, ID: b.ToolUse.ToolUseID, Name: b.ToolUse.Name, Args: args.String()})
		case b.Reasoning != nil && b.Reasoning.Text != nil:
			t := b.Reasoning.Text
			a.Blocks = append(a.Blocks, translate.Block{Kind: translate.BlockThinking, Text: t.Text, Sig: t.Signature})
		case b.Reasoning != nil && b.Reasoning.Redacted != "":
			a.Blocks = append(a.Blocks, translate.Block{Kind: translate.BlockRedacted, Sig: b.Reasoning.Redacted})
		}
		// image, document, citations, guardContent…: no counterpart in
		// an answer of the other APIs.
	}
	return a, nil
}

// converseStop reads a Converse stopReason. Its first four are Messages' words;
// a guardrail or content filter is a refusal; malformed model output or
// tool use ended the answer with what was said
// (docs/translation-facts.md#cloud-providers).
func converseStop(s string) translate.Stop {
	switch s {
	case "":
		return translate.StopNone
	case "end_turn":
		return translate.StopEnd
	case "tool_use":
		return translate.StopTool
	case "max_tokens":
		return translate.StopLength
	case "stop_sequence":
		return translate.StopSequence
	case "guardrail_intervened", "content_filtered":
		return translate.StopFilter
	case "model_context_window_exceeded":
		return translate.StopContext
	}
	return translate.StopEnd // malformed_model_output, malformed_tool_use, and what comes next
}
