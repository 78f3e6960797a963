package translate

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// A Responses answer: read into an Answer when a Responses engine answers
// a Chat or Messages client, and written from one when any other engine
// answers a Responses client (docs/translation-facts.md#non-streamed-answers).

// responsesAnswerIn is a Responses answer, the members read. Output is a
// pointer so that a body without it is told apart from an answer and
// reported with the engine's message (NoAnswer); status says how the
// answer ended, and incomplete_details why it is incomplete.
type responsesAnswerIn struct {
	ID         string      `json:"id"`
	CreatedAt  json.Number `json:"created_at"`
	Model      string      `json:"model"`
	Status     string      `json:"status"`
	Incomplete *struct {
		Reason string `json:"reason"`
	} `json:"incomplete_details"`
	Output *[]responsesAnswerItemIn `json:"output"`
	Usage  json.RawMessage          `json:"usage"` // read by api.Responses
	Error  json.RawMessage          `json:"error"`
}

// responsesAnswerItemIn is one output item, with the members of the types
// read: message (content parts), function_call and custom_tool_call
// (call_id, name, arguments or input), reasoning (summary, content,
// encrypted_content).
type responsesAnswerItemIn struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Content []struct {
		Type    string `json:"type"`
		Text    string `json:"text"`
		Refusal string `json:"refusal"`
	} `json:"content"`
	CallID    string          `json:"call_id"`
	Name      string          `json:"name"`
	Arguments json.RawMessage `json:"arguments"`
	Input     string          `json:"input"`
	Summary   []struct {
		Text string `json:"text"`
	} `json:"summary"`
	EncryptedContent *string `json:"encrypted_content"`
}

// responsesReadAnswer reads a Responses answer's output items in their
// order. A call's id is its call_id, which the client's next turn answers
// with; the item's own id (fc_…) only stands in for a missing one
// (docs/translation-facts.md#t6).
func responsesReadAnswer(body []byte, _ AnswerOptions) (Answer, error) {
	var r responsesAnswerIn
	if err := json.Unmarshal(body, &r); err != nil {
		return Answer{}, err
	}
	switch r.Status {
	case "failed", "cancelled", "queued", "in_progress":
		// No answer to give: a failure (or a background response not yet
		// done) the client must hear of as one.
		if msg := ErrorMessage(r.Error); msg != "" {
			return Answer{}, fmt.Errorf("the response is %s: %s", r.Status, msg)
		}
		return Answer{}, fmt.Errorf("the response is %s", r.Status)
	}
	if r.Output == nil {
		return Answer{}, NoAnswer("output", r.Error)
	}
	a := Answer{ID: r.ID, Model: r.Model, Created: unixTime(r.CreatedAt)}
	tools := false
	for i, it := range *r.Output {
		switch it.Type {
		case "message":
			for _, c := range it.Content {
				switch {
				case c.Type == "output_text" && c.Text != "":
					a.Blocks = append(a.Blocks, Block{Kind: BlockText, Text: c.Text})
				case c.Type == "refusal" && c.Refusal != "":
					a.Blocks = append(a.Blocks, Block{Kind: BlockRefusal, Text: c.Refusal})
				}
			}
		case "function_call":
			args, err := answerArgs(it.Arguments)
			if err != nil {
				return Answer{}, fmt.Errorf("output[%d].arguments: %w", i, err)
			}
			a.Blocks = append(a.Blocks, Block{Kind: BlockTool, ID: firstOf(it.CallID, it.ID), Name: it.Name, Args: args})
			tools = true
		case "custom_tool_call":
			// The other APIs know function tools only: the freeform input
			// becomes the one string parameter the request translator
			// declared for it.
			args, _ := Marshal(map[string]string{"input": it.Input})
			a.Blocks = append(a.Blocks, Block{Kind: BlockTool, ID: firstOf(it.CallID, it.ID), Name: it.Name, Args: string(args)})
			tools = true
		case "reasoning":
			a.Blocks = append(a.Blocks, responsesReasoningPart(it))
		}
		// Built-in tools' items (web_search_call, file_search_call…) ran
		// on OpenAI's side and have no counterpart: dropped.
	}
	reason := ""
	if r.Incomplete != nil {
		reason = r.Incomplete.Reason
	}
	// Responses has no status for "stopped to call tools": the items say
	// it (tools).
	a.Stop = ResponsesStop(r.Status, reason, tools)
	// input_tokens counts cached tokens, as Input does
	// (docs/translation-facts.md#usage).
	a.Usage, _ = api.Responses.UsageOf(r.Usage)

	return a, nil
}

// responsesReasoningPart is a Responses reasoning item as a part. Its summary is
// what OpenAI shows; open-weight servers (gpt-oss behind vLLM) put the
// text in content instead. An item with summary parts is a thinking
// block, even if their text is empty (Messages' signature-only thinking,
// docs/translation-facts.md#t8); one with none and encrypted content only is redacted.
func responsesReasoningPart(it responsesAnswerItemIn) Block {
	var texts []string
	for _, s := range it.Summary {
		texts = append(texts, s.Text)
	}
	if len(texts) == 0 {
		for _, c := range it.Content {
			if c.Type == "reasoning_text" {
				texts = append(texts, c.Text)
			}
		}
	}
	sig := ""
	if it.EncryptedContent != nil {
		sig = *it.EncryptedContent
	}
	if len(texts) == 0 && sig != "" {
		return Block{Kind: BlockRedacted, Sig: sig}
	}
	return Block{Kind: BlockThinking, Text: strings.Join(texts, "\n\n"), Sig: sig}
}

// responsesAnswerOut is a Responses answer with the members openai-go's
// responses.Response reads as required; the request's own settings
// (temperature, tools…) are not known here and are written as their
// defaults or null.
type responsesAnswerOut struct {
	ID                 string               `json:"id"`
	Object             string               `json:"object"`
	CreatedAt          int64                `json:"created_at"`
	Status             string               `json:"status"`
	Background         bool                 `json:"background"`
	Error              *struct{}            `json:"error"`
	IncompleteDetails  *responsesIncomplete `json:"incomplete_details"`
	Instructions       *string              `json:"instructions"`
	MaxOutputTokens    *int                 `json:"max_output_tokens"`
	Model              string               `json:"model"`
	Output             []any                `json:"output"`
	ParallelToolCalls  bool                 `json:"parallel_tool_calls"`
	PreviousResponseID *string              `json:"previous_response_id"`
	Reasoning          map[string]any       `json:"reasoning"`
	Store              bool                 `json:"store"`
	Temperature        *float64             `json:"temperature"`
	Text               map[string]any       `json:"text"`
	ToolChoice         string               `json:"tool_choice"`
	Tools              []json.RawMessage    `json:"tools"`
	TopP               *float64             `json:"top_p"`
	Truncation         string               `json:"truncation"`
	Usage              json.RawMessage      `json:"usage"`
	User               *string              `json:"user"`
	Metadata           map[string]string    `json:"metadata"`
}

// responsesIncomplete is incomplete_details: max_output_tokens or
// content_filter (Stop.Responses).
type responsesIncomplete struct {
	Reason string `json:"reason"`
}

// responsesOutMessage is a message item. Its id is msg_, the answer's base
// and its place in output: the same answer translated twice has the same
// ids.
type responsesOutMessage struct {
	Type    string `json:"type"`
	ID      string `json:"id"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

// responsesOutText is an output_text part; annotations and logprobs are [],
// which openai-go reads as required.
type responsesOutText struct {
	Type        string            `json:"type"`
	Text        string            `json:"text"`
	Annotations []json.RawMessage `json:"annotations"`
	Logprobs    []json.RawMessage `json:"logprobs"`
}

type responsesOutRefusal struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

// responsesOutFunctionCall is a function_call item: id is the item's own
// (fc_…), call_id the call's, which the client's output answers
// (docs/translation-facts.md#t6); namespace only for a namespace's tool.
type responsesOutFunctionCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Arguments string `json:"arguments"`
	Status    string `json:"status"`
}

// responsesOutCustomCall is a custom_tool_call item (ctc_…): the call of a
// tool the client declared custom, its freeform text in input.
type responsesOutCustomCall struct {
	Type      string `json:"type"`
	ID        string `json:"id"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
	Namespace string `json:"namespace,omitempty"`
	Input     string `json:"input"`
}

// responsesOutReasoning is a reasoning item: its text as one summary_text
// (summary is [] for redacted thinking, which has none), and a signature
// in encrypted_content.
type responsesOutReasoning struct {
	Type             string                 `json:"type"`
	ID               string                 `json:"id"`
	Summary          []responsesSummaryText `json:"summary"`
	EncryptedContent *string                `json:"encrypted_content,omitempty"`
}

type responsesSummaryText struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// responsesWriteAnswer writes a for a Responses client. Text and refusals
// go into one message item until another item comes between them; each
// call and each reasoning is an item of its own, in the answer's order. A
// message's status follows the response's: incomplete when it was cut
// short.
func responsesWriteAnswer(a *Answer, o AnswerOptions) ([]byte, error) {
	status, reason := a.Stop.Responses()
	out := responsesAnswerOut{
		ID:                "resp_" + a.Base,
		Object:            "response",
		CreatedAt:         a.Created,
		Status:            status,
		Model:             a.Model,
		Output:            []any{},
		ParallelToolCalls: true,
		Reasoning:         map[string]any{"effort": nil, "summary": nil},
		Text:              map[string]any{"format": map[string]string{"type": "text"}},
		ToolChoice:        "auto",
		Tools:             []json.RawMessage{},
		Truncation:        "disabled",
		Usage:             usageMember(api.Responses, a.Usage),
		Metadata:          map[string]string{},
	}
	if reason != "" {
		out.IncompleteDetails = &responsesIncomplete{Reason: reason}
	}
	itemStatus := "completed"
	if status == "incomplete" {
		itemStatus = "incomplete"
	}
	var msg *responsesOutMessage // the message item texts go into until a non-text item
	tools := 0
	for i := range a.Blocks {
		p := &a.Blocks[i]
		n := strconv.Itoa(len(out.Output))
		switch p.Kind {
		case BlockText, BlockRefusal:
			if msg == nil {
				msg = &responsesOutMessage{Type: "message", ID: "msg_" + a.Base + "_" + n, Status: itemStatus, Role: "assistant"}
				out.Output = append(out.Output, msg)
			}
			if p.Kind == BlockRefusal {
				msg.Content = append(msg.Content, responsesOutRefusal{Type: "refusal", Refusal: p.Text})
			} else {
				msg.Content = append(msg.Content, responsesOutText{Type: "output_text", Text: p.Text, Annotations: []json.RawMessage{}, Logprobs: []json.RawMessage{}})
			}
			continue
		case BlockTool:
			id := answerToolID(api.Responses, p.ID, a.Base, tools)
			tools++
			// The item's id is its own, fc_…; the call's id is call_id
			// (docs/translation-facts.md#t6).
			// A namespace's tool went upstream under its flattened name;
			// Codex runs the call only as {namespace, name}.
			namespace, name := "", p.Name
			if nn, ok := o.Namespaces[p.Name]; ok {
				namespace, name = nn[0], nn[1]
			}
			if slices.Contains(o.CustomTools, p.Name) {
				out.Output = append(out.Output, responsesOutCustomCall{Type: "custom_tool_call", ID: "ctc_" + SanitizeID(id), CallID: id, Name: name, Namespace: namespace, Input: responsesCustomInput(p.Args)})
			} else {
				out.Output = append(out.Output, responsesOutFunctionCall{Type: "function_call", ID: "fc_" + SanitizeID(id), CallID: id, Name: name, Namespace: namespace, Arguments: firstOf(p.Args, "{}"), Status: "completed"})
			}
		case BlockThinking, BlockRedacted:
			r := responsesOutReasoning{Type: "reasoning", ID: "rs_" + a.Base + "_" + n, Summary: []responsesSummaryText{}}
			if p.Kind == BlockThinking {
				r.Summary = append(r.Summary, responsesSummaryText{Type: "summary_text", Text: p.Text})
			}
			// Messages' signature (or redacted data) rides in
			// encrypted_content, the one opaque member a reasoning item
			// has, which a client keeps with the item. The request side
			// does not replay it: a reasoning item in history is dropped
			// (docs/translation.md#what-carries).
			if p.Sig != "" {
				r.EncryptedContent = &p.Sig
			}
			out.Output = append(out.Output, r)
		}
		msg = nil
	}
	return Marshal(out)
}

// responsesCustomInput is a custom tool's freeform input from the arguments of the
// function tool it went upstream as: its "input" string, or the arguments
// themselves when the model did not keep to that shape.
func responsesCustomInput(args string) string {
	var in struct {
		Input *string `json:"input"`
	}
	if json.Unmarshal([]byte(args), &in) == nil && in.Input != nil {
		return *in.Input
	}
	return strings.TrimSpace(args)
}
