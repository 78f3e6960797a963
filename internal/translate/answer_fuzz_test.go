package translate_test

import (
	"encoding/json"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// FuzzAnswer: whatever an engine sends, Answer does not panic, and what
// it returns without an error is JSON in every direction; ErrorBody's
// reshaping of the same bytes is JSON too.
func FuzzAnswer(f *testing.F) {
	for _, s := range []string{
		anChatFixture, anMessagesFixture, anResponsesFixture,
		`{"choices":[{"message":{"content":null,"refusal":"no"},"finish_reason":"content_filter"}]}`,
		`{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}}]}}]}`,
		`{"type":"message","content":[{"type":"redacted_thinking","data":"x"},{"type":"tool_use","id":"a.b","input":null}],"stop_reason":"refusal"}`,
		`{"status":"incomplete","incomplete_details":{"reason":"content_filter"},"output":[{"type":"custom_tool_call","call_id":"c","name":"p","input":"x"}]}`,
		`{"created_at":1e300,"output":[]}`, `{"created":"12"}`, `<html><title>x</title></html>`, `{"error":{"message":"m"}}`, ``,
	} {
		f.Add([]byte(s))
	}
	o := translate.AnswerOptions{CustomTools: []string{"p", "apply_patch"}}
	f.Fuzz(func(t *testing.T, body []byte) {
		for _, from := range translatetest.Clients {
			for _, to := range translatetest.Clients {
				if from == to {
					continue
				}
				out, err := translate.AnswerBody(from, to, body, o)
				if err == nil && !json.Valid(out) {
					t.Fatalf("Answer(%s→%s, %q) = %q: not JSON", from, to, body, out)
				}
				if e := translate.ErrorBody(from, to, 500, body); !json.Valid(e) {
					t.Fatalf("ErrorBody(%s→%s, %q) = %q: not JSON", from, to, body, e)
				}
			}
		}
	})
}
