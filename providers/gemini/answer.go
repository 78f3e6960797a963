package gemini

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"net/http"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
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
// answer's, carrying the part's thought signature (geminiAppendSig), so
// that the client's next request, whatever its API, gives the signature
// back (docs/translation-facts.md#t9).

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

// finishStop reads a Gemini finishReason. The reasons of Google's filters
// (safety, recitation, block lists, personal data…) are StopFilter; a
// malformed function call ends the answer with what it said (the client
// sees no call, and can ask again); STOP after function calls becomes
// StopTool where the answer's parts are known (docs/translation-facts.md#t15).
func finishStop(reason string) translate.Stop {
	switch reason {
	case "":
		return translate.StopNone
	case "STOP":
		return translate.StopEnd
	case "MAX_TOKENS":
		return translate.StopLength
	case "SAFETY", "RECITATION", "BLOCKLIST", "PROHIBITED_CONTENT", "SPII", "IMAGE_SAFETY",
		"IMAGE_PROHIBITED_CONTENT", "IMAGE_RECITATION", "MODEL_ARMOR", "LANGUAGE":
		return translate.StopFilter
	}
	return translate.StopEnd // MALFORMED_FUNCTION_CALL, OTHER, UNEXPECTED_TOOL_CALL and what comes next
}

func geminiReadAnswer(body []byte, o translate.AnswerOptions) (translate.Answer, error) {
	model := o.Model
	var g geminiAnswer
	if err := json.Unmarshal(body, &g); err != nil {
		return translate.Answer{}, err
	}
	a := translate.Answer{ID: g.ResponseID, Model: g.ModelVersion}
	if a.Model == "" {
		a.Model = model
	}
	a.Usage, _ = api.Gemini.UsageOf(g.Usage)
	if g.Candidates == nil || len(*g.Candidates) == 0 {
		if g.PromptFeedback != nil && g.PromptFeedback.BlockReason != "" {
			// A blocked prompt is an answer, filtered whole: the client's
			// SDK says why instead of raising a gateway error.
			a.Stop = translate.StopFilter
			return a, nil
		}
		if g.Candidates == nil {
			return translate.Answer{}, translate.NoAnswer("candidates", g.Error)
		}
		return translate.Answer{}, errors.New("no candidate in candidates")
	}
	c := (*g.Candidates)[0]
	a.Stop = finishStop(c.FinishReason)
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
					return translate.Answer{}, fmt.Errorf("candidates[0].content.parts[%d].functionCall.args: %w", i, err)
				}
			}
			id := translate.SanitizeID(p.FunctionCall.ID)
			if id == "" {
				id = "call_" + base + "_" + strconv.Itoa(calls)
			}
			id = string(geminiAppendSig([]byte(id), []byte(p.Signature)))
			a.Blocks = append(a.Blocks, translate.Block{Kind: translate.BlockTool, ID: id, Name: p.FunctionCall.Name, Args: args.String()})
			calls++
		case p.Text == nil || *p.Text == "":
		case p.Thought:
			a.Blocks = appendText(a.Blocks, translate.BlockThinking, *p.Text)
		default:
			a.Blocks = appendText(a.Blocks, translate.BlockText, *p.Text)
		}
	}
	return a, nil
}

// appendText appends text to the last part when it is of kind k (Gemini
// may split one text into parts), else as a part of its own.
func appendText(parts []translate.Block, k translate.BlockKind, text string) []translate.Block {
	if n := len(parts); n > 0 && parts[n-1].Kind == k {
		parts[n-1].Text += text
		return parts
	}
	return append(parts, translate.Block{Kind: k, Text: text})
}

// geminiAnswerBase is what made-up tool call ids start from: the answer's id,
// or a hash of its body (as translate.AnswerBody makes one), so that the same answer translated
// twice has the same ids (docs/translation-facts.md#t5).
func geminiAnswerBase(id string, body []byte) string {
	if id != "" {
		return translate.SanitizeID(id)
	}
	h := fnv.New64a()
	h.Write(body)
	return strconv.FormatUint(h.Sum64(), 16)
}

// geminiErrorStatus is the HTTP status of a Google error's status word
// ({"error":{"code","message","status"}}), whose clients' SDKs know the
// status only; 0 for a word that says no more than the HTTP status.
func geminiErrorStatus(word string) int {
	switch word {
	case "RESOURCE_EXHAUSTED":
		return http.StatusTooManyRequests
	case "UNAVAILABLE":
		return http.StatusServiceUnavailable
	case "INVALID_ARGUMENT", "FAILED_PRECONDITION", "OUT_OF_RANGE":
		return http.StatusBadRequest
	case "PERMISSION_DENIED":
		return http.StatusForbidden
	case "UNAUTHENTICATED":
		return http.StatusUnauthorized
	case "NOT_FOUND":
		return http.StatusNotFound
	case "DEADLINE_EXCEEDED":
		return http.StatusGatewayTimeout
	case "INTERNAL", "UNKNOWN":
		return http.StatusInternalServerError
	}
	return 0
}

// geminiErrorWord is the status word of a Google error body, "" for another
// body.
func geminiErrorWord(body []byte) string {
	var e struct {
		Error struct {
			Status string `json:"status"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	return e.Error.Status
}

// geminiReadError reads a Google error ({"error":{"code","message",
// "status"}}): a streamed request's may come as a one-element array, and
// its status word is more precise than a proxy's HTTP status.
func geminiReadError(status int, body []byte) (int, []byte) {
	var list []json.RawMessage
	if t := bytes.TrimSpace(body); len(t) > 0 && t[0] == '[' && json.Unmarshal(t, &list) == nil && len(list) > 0 {
		body = list[0]
	}
	if s := geminiErrorStatus(geminiErrorWord(body)); s != 0 {
		status = s
	}
	return status, body
}
