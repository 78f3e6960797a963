package translate

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// Reading a Gemini answer (generateContent, the Gemini API's and
// Vertex AI's alike):
//
//	{candidates:[{content:{role,parts:[text|thought text|functionCall…]},
//	  finishReason, safetyRatings}], promptFeedback{blockReason},
//	 usageMetadata{promptTokenCount, candidatesTokenCount,
//	  thoughtsTokenCount, cachedContentTokenCount, totalTokenCount},
//	 modelVersion, responseId}
//
// Function calls usually come without ids: each gets one made from the
// answer's, carrying the part's thought signature (gmCallID), so that the
// client's next request, whatever its API, gives the signature back.

type geminiAnswer struct {
	Candidates *[]struct {
		Index   int `json:"index"`
		Content *struct {
			Parts []geminiAnswerPart `json:"parts"`
		} `json:"content"`
		FinishReason string `json:"finishReason"`
	} `json:"candidates"`
	PromptFeedback *struct {
		BlockReason string `json:"blockReason"`
	} `json:"promptFeedback"`
	Usage        json.RawMessage `json:"usageMetadata"` // read by api.Gemini
	ModelVersion string          `json:"modelVersion"`
	ResponseID   string          `json:"responseId"`
	Error        json.RawMessage `json:"error"`
}

type geminiAnswerPart struct {
	Text         *string `json:"text"`
	Thought      bool    `json:"thought"`
	Signature    string  `json:"thoughtSignature"`
	FunctionCall *struct {
		ID   string          `json:"id"`
		Name string          `json:"name"`
		Args json.RawMessage `json:"args"`
	} `json:"functionCall"`
}

// GeminiStop reads a Gemini finishReason. The reasons of Google's filters
// (safety, recitation, block lists, personal data…) are StopFilter; a
// malformed function call ends the answer with what it said (the client
// sees no call, and can ask again); STOP after function calls becomes
// StopTool where the answer's parts are known (docs/translation-facts.md#t15).
func GeminiStop(reason string) Stop {
	switch reason {
	case "":
		return StopNone
	case "STOP":
		return StopEnd
	case "MAX_TOKENS":
		return StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
		"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR", "LANGUAGE":
		return StopFilter
	}
	return StopEnd // MALFORMED_FUNCTION_CALL, OTHER, UNEXPECTED_TOOL_CALL and what comes next
}

func anReadGemini(body []byte, model string) (anAnswer, error) {
	var g geminiAnswer
	if err := json.Unmarshal(body, &g); err != nil {
		return anAnswer{}, err
	}
	a := anAnswer{id: g.ResponseID, model: g.ModelVersion}
	if a.model == "" {
		a.model = model
	}
	a.usage, _ = api.Gemini.UsageOf(g.Usage)
	if g.Candidates == nil || len(*g.Candidates) == 0 {
		if g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" {
			// A blocked prompt is an answer, filtered whole: the client's
			// SDK says why instead of raising a gateway error.
			a.stop = StopFilter
			return a, nil
		}
		if g.Candidates == nil {
			return anAnswer{}, anNoAnswer("candidates", g.Error)
		}
		return anAnswer{}, errors.New("no candidate in candidates")
	}
	c := (*g.Candidates)[0]
	a.stop = GeminiStop(c.FinishReason)
	if c.Content == nil {
		return a, nil // a candidate filtered before it said anything
	}
	base := geminiAnswerBase(g.ResponseID, body)
	calls := 0
	for i, p := range c.Content.Parts {
		switch {
		case p.FunctionCall != nil:
			var args bytes.Buffer
			if in := bytes.TrimSpace(p.FunctionCall.Args); len(in) > 0 && string(in) != "null" {
				if err := json.Compact(&args, in); err != nil {
					return anAnswer{}, fmt.Errorf("candidates[0].content.parts[%d].functionCall.args: %w", i, err)
				}
			}
			id := anSanitizeID(p.FunctionCall.ID)
			if id == "" {
				id = "call_" + base + "_" + strconv.Itoa(calls)
			}
			id = string(geminiAppendSig([]byte(id), []byte(p.Signature)))
			a.parts = append(a.parts, anPart{kind: anTool, id: id, name: p.FunctionCall.Name, args: args.String()})
			calls++
		case p.Text == nil || *p.Text == "":
		case p.Thought:
			a.parts = anAppendText(a.parts, anThinking, *p.Text)
		default:
			a.parts = anAppendText(a.parts, anText, *p.Text)
		}
	}
	return a, nil
}

// anAppendText appends text to the last part when it is of kind k (Gemini
// may split one text into parts), else as a part of its own.
func anAppendText(parts []anPart, k anKind, text string) []anPart {
	if n := len(parts); n > 0 && parts[n-1].kind == k {
		parts[n-1].text += text
		return parts
	}
	return append(parts, anPart{kind: k, text: text})
}

// geminiAnswerBase is what made-up tool call ids start from: the answer's id,
// or a hash of its body (settle's), so that the same answer translated
// twice has the same ids (docs/translation-facts.md#t5).
func geminiAnswerBase(id string, body []byte) string {
	if id != "" {
		return anSanitizeID(id)
	}
	h := fnv.New64a()
	h.Write(body)
	return strconv.FormatUint(h.Sum64(), 16)
}
