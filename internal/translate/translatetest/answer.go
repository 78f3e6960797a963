// Package translatetest is what a codec's tests check translation with, in
// internal/translate and in a provider's package that brings the codec of
// its API (providers/bedrock's Converse, providers/gemini's
// generateContent): the client's side of an exchange, read as the client's
// SDK reads it. Answers decode into the official SDKs' types (AsChat,
// AsMessage, AsResponse); a client's stream is split into events (Split),
// reassembled as its SDK's accumulator does (Reassemble) and read by that
// accumulator itself (ReadSDK), against the scenarios every capture of an
// upstream stream tells (Scenarios, Expect, the captures in the caller's
// testdata/streams, whose README.md says where each came from); a
// translated request is checked member by member (RequestCase, RunRequests).
package translatetest

import (
	"encoding/json"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// Translated is a JSON answer of from translated for a client of to,
// failing the test when it is no JSON.
func Translated(t *testing.T, from, to api.API, body string) []byte {
	t.Helper()
	out, err := translate.AnswerBody(from, to, []byte(body), translate.AnswerOptions{})
	if err != nil {
		t.Fatalf("Answer(%s→%s): %v", from, to, err)
	}
	if !json.Valid(out) {
		t.Fatalf("Answer(%s→%s) is not JSON: %s", from, to, out)
	}
	return out
}

// The official SDKs' types are the check: an answer a client's SDK reads
// wrong is wrong, whatever the table says.
func AsChat(t *testing.T, b []byte) openai.ChatCompletion {
	t.Helper()
	var c openai.ChatCompletion
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatalf("openai.ChatCompletion: %v\n%s", err, b)
	}
	return c
}

// AsMessage reads b as the Anthropic SDK's Message.
func AsMessage(t *testing.T, b []byte) anthropic.Message {
	t.Helper()
	var m anthropic.Message
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("anthropic.Message: %v\n%s", err, b)
	}
	return m
}

// AsResponse reads b as the OpenAI SDK's Responses Response.
func AsResponse(t *testing.T, b []byte) responses.Response {
	t.Helper()
	var r responses.Response
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("responses.Response: %v\n%s", err, b)
	}
	return r
}

// Eq checks that got is want, saying what.
func Eq[T comparable](t *testing.T, what string, got, want T) {
	t.Helper()
	if got != want {
		t.Errorf("%s = %v, want %v", what, got, want)
	}
}

// JSONEq checks that got and want are the same JSON, whatever their spacing.
func JSONEq(t *testing.T, what, got, want string) {
	t.Helper()
	var g, w any
	if json.Unmarshal([]byte(got), &g) != nil || json.Unmarshal([]byte(want), &w) != nil {
		t.Errorf("%s = %s, want %s (not JSON)", what, got, want)
		return
	}
	gb, _ := json.Marshal(g)
	wb, _ := json.Marshal(w)
	if string(gb) != string(wb) {
		t.Errorf("%s = %s, want %s", what, got, want)
	}
}
