package translate

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// A Messages answer: read into an Answer when a Messages engine answers a
// Chat or Responses client, and written from one when any other engine
// answers a Messages client, such as Claude Code
// (docs/translation-facts.md#non-streamed-answers).

// messagesAnswerIn is a Messages answer, the members read. Content is a
// pointer so that a body without it, or Anthropic's error shape
// ({"type":"error",…}) sent with a 200, is told apart from an answer and
// reported with the engine's message (NoAnswer). stop_details may explain
// a refusal, which Chat and Responses can show as its text.
type messagesAnswerIn struct {
	ID         string                   `json:"id"`
	Type       string                   `json:"type"`
	Model      string                   `json:"model"`
	Content    *[]messagesAnswerBlockIn `json:"content"`
	StopReason *string                  `json:"stop_reason"`
	// The matched stop sequence; llama-server names it beside an
	// end_turn stop_reason.
	StopSequence *string         `json:"stop_sequence"`
	Usage        json.RawMessage `json:"usage"` // read by api.Messages
	StopDetails  *struct {
		Explanation *string `json:"explanation"`
	} `json:"stop_details"`
	Error json.RawMessage `json:"error"`
}

// messagesAnswerBlockIn is one content block, with the members of the types
// read: text, tool_use, thinking and redacted_thinking.
type messagesAnswerBlockIn struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Thinking  string          `json:"thinking"`
	Signature string          `json:"signature"`
	Data      string          `json:"data"`
}

// messagesReadAnswer reads a Messages answer's blocks in their order.
func messagesReadAnswer(body []byte, _ AnswerOptions) (Answer, error) {
	var m messagesAnswerIn
	if err := json.Unmarshal(body, &m); err != nil {
		return Answer{}, err
	}
	if m.Content == nil || m.Type == "error" {
		return Answer{}, NoAnswer("content", m.Error)
	}
	a := Answer{ID: m.ID, Model: m.Model}
	if m.StopReason != nil {
		a.Stop = MessagesStop(*m.StopReason)
	}
	if m.StopSequence != nil {
		a.StopSequence = *m.StopSequence
	}
	// input_tokens leaves the cache's reads and writes out; api.Messages
	// adds them back, so Input counts every prompt token as Chat's does
	// (docs/translation-facts.md#t11).
	a.Usage, _ = api.Messages.UsageOf(m.Usage)
	// A refusal's text is what the model said instead of answering: Chat
	// and Responses have a place for exactly that.
	textKind := BlockText
	if a.Stop == StopFilter {
		textKind = BlockRefusal
	}
	for i, b := range *m.Content {
		switch b.Type {
		case "text":
			if b.Text != "" {
				a.Blocks = append(a.Blocks, Block{Kind: textKind, Text: b.Text})
			}
		case "tool_use":
			// input is an object; the other APIs carry arguments as a JSON
			// text, compacted as OpenAI writes them. A missing input is no
			// arguments ("").
			var args bytes.Buffer
			if len(b.Input) > 0 && string(b.Input) != "null" {
				if err := json.Compact(&args, b.Input); err != nil {
					return Answer{}, fmt.Errorf("content[%d].input: %w", i, err)
				}
			}
			a.Blocks = append(a.Blocks, Block{Kind: BlockTool, ID: b.ID, Name: b.Name, Args: args.String()})
		case "thinking":
			// The signature goes along: a Responses client keeps it in
			// encrypted_content, a Messages one in its block.
			a.Blocks = append(a.Blocks, Block{Kind: BlockThinking, Text: b.Thinking, Sig: b.Signature})
		case "redacted_thinking":
			a.Blocks = append(a.Blocks, Block{Kind: BlockRedacted, Sig: b.Data})
		}
		// Server tools' blocks (server_tool_use, web_search_tool_result…)
		// ran on Anthropic's side and have no counterpart: dropped.
	}
	if a.Stop == StopFilter && !a.has(BlockRefusal) && m.StopDetails != nil && m.StopDetails.Explanation != nil {
		a.Blocks = append(a.Blocks, Block{Kind: BlockRefusal, Text: *m.StopDetails.Explanation})
	}
	return a, nil
}

// messagesAnswerOut is the answer a Messages client is given, with every
// member Anthropic's SDKs read as required present: stop_sequence,
// stop_details and container null where there is nothing to say.
type messagesAnswerOut struct {
	ID           string                   `json:"id"`
	Type         string                   `json:"type"`
	Role         string                   `json:"role"`
	Model        string                   `json:"model"`
	Content      []messagesAnswerBlockOut `json:"content"`
	StopReason   string                   `json:"stop_reason"`
	StopSequence *string                  `json:"stop_sequence"`
	StopDetails  *messagesRefusalDetails  `json:"stop_details"`
	Container    *struct{}                `json:"container"`
	Usage        json.RawMessage          `json:"usage"`
}

// messagesRefusalDetails is stop_details beside a refusal; the gateway knows
// no category or explanation, which are null.
type messagesRefusalDetails struct {
	Type        string  `json:"type"`
	Category    *string `json:"category"`
	Explanation *string `json:"explanation"`
}

// messagesAnswerBlockOut is one content block; its members are pointers so
// that each type writes exactly its own (thinking's empty signature, a
// text's empty citations are members the SDKs expect).
type messagesAnswerBlockOut struct {
	Type      string          `json:"type"`
	Text      *string         `json:"text,omitempty"`
	ID        string          `json:"id,omitempty"`
	Name      string          `json:"name,omitempty"`
	Input     json.RawMessage `json:"input,omitempty"`
	Thinking  *string         `json:"thinking,omitempty"`
	Signature *string         `json:"signature,omitempty"`
	Data      *string         `json:"data,omitempty"`
}

// messagesWriteAnswer writes a for a Messages client: msg_ and the answer's
// base as its id, tool_use ids sanitized (answerToolID) and inputs made
// objects (objectArgs), and usage with input_tokens less the cache's, as
// Anthropic reports it (api.Messages).
func messagesWriteAnswer(a *Answer, _ AnswerOptions) ([]byte, error) {
	out := messagesAnswerOut{
		ID:      "msg_" + a.Base,
		Type:    "message",
		Role:    "assistant",
		Model:   a.Model,
		Content: []messagesAnswerBlockOut{},
		Usage:   usageMember(api.Messages, a.Usage),
	}
	stop := a.Stop
	if a.has(BlockRefusal) && (stop == StopEnd || stop == StopNone || stop == StopSequence) {
		// Messages says a refusal only by its stop reason.
		stop = StopFilter
	}
	tools := 0
	for i := range a.Blocks {
		p := &a.Blocks[i]
		switch p.Kind {
		case BlockText, BlockRefusal:
			// Adjacent texts are one block, as Anthropic writes them.
			if n := len(out.Content); n > 0 && out.Content[n-1].Type == "text" {
				t := *out.Content[n-1].Text + p.Text
				out.Content[n-1].Text = &t
				continue
			}
			out.Content = append(out.Content, messagesAnswerBlockOut{Type: "text", Text: &p.Text})
		case BlockTool:
			out.Content = append(out.Content, messagesAnswerBlockOut{
				Type:  "tool_use",
				ID:    answerToolID(api.Messages, p.ID, a.Base, tools),
				Name:  p.Name,
				Input: objectArgs(p.Args),
			})
			tools++
		case BlockThinking:
			// A thinking block from an API without signatures carries an
			// empty one: a client shows it and may replay it, and the SDKs
			// expect the member. Anthropic refuses an unsigned thinking
			// block replayed to it, so a request translated toward
			// Messages has to drop those (an OpenAI engine never needed
			// them back).
			out.Content = append(out.Content, messagesAnswerBlockOut{Type: "thinking", Thinking: &p.Text, Signature: &p.Sig})
		case BlockRedacted:
			out.Content = append(out.Content, messagesAnswerBlockOut{Type: "redacted_thinking", Data: &p.Sig})
		}
	}
	out.StopReason = stop.Messages()
	// The stop string, when the engine named the one it matched: Chat and
	// Responses have no member for it (docs/translation-facts.md#t12).
	if stop == StopSequence && a.StopSequence != "" {
		out.StopSequence = &a.StopSequence
	}
	if stop == StopFilter {
		out.StopDetails = &messagesRefusalDetails{Type: "refusal"}
	}
	return Marshal(out)
}
