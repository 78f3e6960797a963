package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// A Chat Completions answer: read into an Answer when a Chat engine
// answers a Messages or Responses client, and written from one when any
// other engine answers a Chat client. Shapes and sources:
// docs/translation-facts.md#non-streamed-answers.

// chatAnswerIn is a Chat Completions answer, the members read. Choices is
// a pointer so that a body without it, an engine's error sent with a 200,
// is told apart from an answer and reported with the engine's message
// (NoAnswer).
type chatAnswerIn struct {
	ID      string          `json:"id"`
	Created json.Number     `json:"created"`
	Model   string          `json:"model"`
	Choices *[]chatChoiceIn `json:"choices"`
	Usage   json.RawMessage `json:"usage"` // read by api.Chat
	Error   json.RawMessage `json:"error"`
	// llama-server's debugging copy of its native answer (-lv 10 and
	// above), the one place its OpenAI answers name the stop string.
	Verbose *struct {
		StoppingWord string `json:"stopping_word"`
	} `json:"__verbose"`
}

// chatChoiceIn is one of choices[]. function_call is the member OpenAI had
// before tool_calls, which older servers still write: read as a call when
// there are no tool_calls.
type chatChoiceIn struct {
	Message struct {
		Content   json.RawMessage `json:"content"`
		Refusal   *string         `json:"refusal"`
		Reasoning *string         `json:"reasoning_content"`
		// vLLM's newer servers and OpenRouter say "reasoning".
		ReasoningAlt json.RawMessage `json:"reasoning"`
		ToolCalls    []struct {
			ID       string `json:"id"`
			Function struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
		FunctionCall *struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function_call"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
	// vLLM's stop_reason and SGLang's matched_stop: the stop string, or
	// the id of a stop token (a number, not a sequence the client asked
	// for).
	StopReason  json.RawMessage `json:"stop_reason"`
	MatchedStop json.RawMessage `json:"matched_stop"`
}

// chatReadAnswer reads choice 0 of a Chat answer into blocks in the order
// a Messages answer gives them: reasoning, text, refusal, tool calls. The
// stop string an engine matched is read from vLLM's stop_reason or SGLang's
// matched_stop, else from llama-server's __verbose
// (docs/translation-facts.md#engines-own-words).
func chatReadAnswer(body []byte, _ AnswerOptions) (Answer, error) {
	var c chatAnswerIn
	if err := json.Unmarshal(body, &c); err != nil {
		return Answer{}, err
	}
	if c.Choices == nil {
		return Answer{}, NoAnswer("choices", c.Error)
	}
	if len(*c.Choices) == 0 {
		return Answer{}, errors.New("no choice in choices")
	}
	// Messages and Responses answer one choice; the request translator
	// refuses n > 1, so a second choice is an engine's extra.
	ch := (*c.Choices)[0]
	m := ch.Message
	a := Answer{ID: c.ID, Model: c.Model, Created: unixTime(c.Created)}
	if ch.FinishReason != nil {
		a.Stop = ChatStop(*ch.FinishReason)
	}
	a.StopSequence = firstOf(stopString(ch.StopReason), stopString(ch.MatchedStop))
	if c.Verbose != nil && a.StopSequence == "" {
		a.StopSequence = c.Verbose.StoppingWord
	}
	// reasoning_content (DeepSeek's, llama-server's) wins over reasoning
	// when an engine writes both; reasoning counts only as a string.
	reasoning := ""
	if m.Reasoning != nil {
		reasoning = *m.Reasoning
	} else if len(m.ReasoningAlt) > 0 && m.ReasoningAlt[0] == '"' {
		_ = json.Unmarshal(m.ReasoningAlt, &reasoning)
	}
	if reasoning != "" {
		a.Blocks = append(a.Blocks, Block{Kind: BlockThinking, Text: reasoning})
	}
	text, err := chatAnswerContent(m.Content)
	if err != nil {
		return Answer{}, fmt.Errorf("choices[0].message.content: %w", err)
	}
	if text != "" {
		a.Blocks = append(a.Blocks, Block{Kind: BlockText, Text: text})
	}
	if m.Refusal != nil && *m.Refusal != "" {
		a.Blocks = append(a.Blocks, Block{Kind: BlockRefusal, Text: *m.Refusal})
	}
	for i, tc := range m.ToolCalls {
		args, err := answerArgs(tc.Function.Arguments)
		if err != nil {
			return Answer{}, fmt.Errorf("choices[0].message.tool_calls[%d].function.arguments: %w", i, err)
		}
		a.Blocks = append(a.Blocks, Block{Kind: BlockTool, ID: tc.ID, Name: tc.Function.Name, Args: args})
	}
	if fc := m.FunctionCall; fc != nil && len(m.ToolCalls) == 0 && fc.Name != "" {
		args, err := answerArgs(fc.Arguments)
		if err != nil {
			return Answer{}, fmt.Errorf("choices[0].message.function_call.arguments: %w", err)
		}
		a.Blocks = append(a.Blocks, Block{Kind: BlockTool, Name: fc.Name, Args: args})
	}
	// prompt_tokens counts cached tokens, as api.Usage's Input does
	// (docs/translation-facts.md#usage); an answer without usage is zero.
	a.Usage, _ = api.Chat.UsageOf(c.Usage)
	return a, nil
}

// chatAnswerContent is a Chat message's content: a string, null, or (from
// some engines) an array of text parts.
func chatAnswerContent(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", err
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// chatAnswerOut is the answer a Chat client is given: one choice, and
// every member openai-go's ChatCompletion reads as required present, null
// where the gateway has nothing to say (logprobs, a refusal) and [] for
// the annotations.
type chatAnswerOut struct {
	ID      string                 `json:"id"`
	Object  string                 `json:"object"`
	Created int64                  `json:"created"`
	Model   string                 `json:"model"`
	Choices [1]chatAnswerChoiceOut `json:"choices"`
	Usage   json.RawMessage        `json:"usage"`
}

type chatAnswerChoiceOut struct {
	Index        int                  `json:"index"`
	Message      chatAnswerMessageOut `json:"message"`
	Logprobs     *struct{}            `json:"logprobs"`
	FinishReason string               `json:"finish_reason"`
}

type chatAnswerMessageOut struct {
	Role    string  `json:"role"`
	Content *string `json:"content"`
	Refusal *string `json:"refusal"`
	// LiteLLM's name for the reasoning, which the OpenAI-compatible
	// clients that show reasoning read (DeepSeek's, vLLM's).
	Reasoning   string              `json:"reasoning_content,omitempty"`
	ToolCalls   []chatAnswerCallOut `json:"tool_calls,omitempty"`
	Annotations []json.RawMessage   `json:"annotations"`
}

type chatAnswerCallOut struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

// chatWriteAnswer writes a for a Chat client. Its id is chatcmpl- and the
// answer's base (settle), so an upstream answer keeps its id in every
// API; tool call ids come from answerToolID, and a call without arguments
// gets "{}", since clients parse arguments as JSON.
func chatWriteAnswer(a *Answer, _ AnswerOptions) ([]byte, error) {
	out := chatAnswerOut{
		ID:      "chatcmpl-" + a.Base,
		Object:  "chat.completion",
		Created: a.Created,
		Model:   a.Model,
		Usage:   usageMember(api.Chat, a.Usage),
	}
	m := &out.Choices[0].Message
	m.Role = "assistant"
	m.Annotations = []json.RawMessage{}
	m.Reasoning = a.join(BlockThinking)
	// A refusal has its own member beside content in Chat, which is where
	// a Messages refusal's text or a Responses refusal part goes.
	if a.has(BlockRefusal) {
		r := a.join(BlockRefusal)
		m.Refusal = &r
	}
	for _, p := range a.Blocks {
		if p.Kind != BlockTool {
			continue
		}
		c := chatAnswerCallOut{ID: answerToolID(api.Chat, p.ID, a.Base, len(m.ToolCalls)), Type: "function"}
		c.Function.Name = p.Name
		c.Function.Arguments = firstOf(p.Args, "{}")
		m.ToolCalls = append(m.ToolCalls, c)
	}
	// OpenAI's content is null beside tool calls or a refusal and a string
	// otherwise, even an empty one.
	if text := a.join(BlockText); text != "" || (len(m.ToolCalls) == 0 && m.Refusal == nil) {
		m.Content = &text
	}
	out.Choices[0].FinishReason = a.Stop.Chat()
	return Marshal(out)
}
