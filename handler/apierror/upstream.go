package apierror

import (
	"encoding/json"
	"strings"
)

// WithAttempts adds the attempt list to an OpenAI-shaped error's message.
// A body of another shape is left alone (the X-LLM-Attempts header has it).
func WithAttempts(body []byte, attempts string) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	note := " (attempts: " + attempts + ")"
	switch e := doc["error"].(type) {
	case map[string]any:
		msg, _ := e["message"].(string)
		e["message"] = msg + note
	case string:
		doc["error"] = e + note
	default:
		return body
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// UpstreamMessage is the message of an upstream's error body, or the body.
func UpstreamMessage(body []byte) string {
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Error) > 0 {
		var e struct{ Message string }
		if json.Unmarshal(doc.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
		var s string
		if json.Unmarshal(doc.Error, &s) == nil {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}
