package gemini

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

const gmAnswerTools = `{"candidates":[{"content":{"role":"model","parts":[
	{"text":"Checking the weather","thought":true},
	{"text":"Let me "},{"text":"check."},
	{"functionCall":{"name":"get_weather","args":{"city":"Paris"}},"thoughtSignature":"CiQB/+w="},
	{"functionCall":{"name":"get_time","args":{"tz":"CET"}}}]},
	"finishReason":"STOP","index":0,"safetyRatings":[]}],
	"usageMetadata":{"promptTokenCount":300,"candidatesTokenCount":40,"thoughtsTokenCount":10,"cachedContentTokenCount":200,"totalTokenCount":350},
	"modelVersion":"gemini-3-pro-preview","responseId":"abc123"}`

func TestAnswerGeminiToolsEachClient(t *testing.T) {
	for _, to := range translatetest.Clients {
		out, err := translate.AnswerBody(api.Gemini, to, []byte(gmAnswerTools), translate.AnswerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := translate.AnswerBody(api.Gemini, to, []byte(gmAnswerTools), translate.AnswerOptions{}); !strings.Contains(string(again), gmToolID(t, out)) {
			t.Errorf("%v: the same answer translated twice has other ids", to)
		}
		var calls []translatetest.Call
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		switch to {
		case api.Chat:
			msg := translatetest.Obj(translatetest.Obj(m["choices"].([]any)[0])["message"])
			translatetest.Eq(t, "finish", translatetest.Str(translatetest.Obj(m["choices"].([]any)[0])["finish_reason"]), "tool_calls")
			translatetest.Eq(t, "content", translatetest.Str(msg["content"]), "Let me check.")
			translatetest.Eq(t, "reasoning", translatetest.Str(msg["reasoning_content"]), "Checking the weather")
			for _, c := range msg["tool_calls"].([]any) {
				f := translatetest.Obj(translatetest.Obj(c)["function"])
				calls = append(calls, translatetest.Call{ID: translatetest.Str(translatetest.Obj(c)["id"]), Name: translatetest.Str(f["name"]), Args: translatetest.Str(f["arguments"])})
			}
			u := translatetest.Obj(m["usage"])
			translatetest.Eq(t, "prompt_tokens", translatetest.Num(u["prompt_tokens"]), 300)
			translatetest.Eq(t, "completion_tokens", translatetest.Num(u["completion_tokens"]), 50)
			translatetest.Eq(t, "reasoning_tokens", translatetest.Num(translatetest.Obj(u["completion_tokens_details"])["reasoning_tokens"]), 10)
			translatetest.Eq(t, "cached_tokens", translatetest.Num(translatetest.Obj(u["prompt_tokens_details"])["cached_tokens"]), 200)
			translatetest.Eq(t, "model", translatetest.Str(m["model"]), "gemini-3-pro-preview")
		case api.Messages:
			translatetest.Eq(t, "stop_reason", translatetest.Str(m["stop_reason"]), "tool_use")
			for _, b := range m["content"].([]any) {
				if b := translatetest.Obj(b); b["type"] == "tool_use" {
					args, _ := json.Marshal(b["input"])
					calls = append(calls, translatetest.Call{ID: translatetest.Str(b["id"]), Name: translatetest.Str(b["name"]), Args: string(args)})
				}
			}
			translatetest.Eq(t, "input_tokens", translatetest.Num(translatetest.Obj(m["usage"])["input_tokens"]), 100)
		case api.Responses:
			for _, it := range m["output"].([]any) {
				if it := translatetest.Obj(it); it["type"] == "function_call" {
					calls = append(calls, translatetest.Call{ID: translatetest.Str(it["call_id"]), Name: translatetest.Str(it["name"]), Args: translatetest.Str(it["arguments"])})
				}
			}
		}
		if len(calls) != 2 {
			t.Fatalf("%v: calls %+v in %s", to, calls, out)
		}
		if _, sig := geminiSplitID(calls[0].ID); sig != "CiQB/+w=" || strings.Contains(calls[1].ID, geminiSigMark) {
			t.Errorf("%v: ids %q %q", to, calls[0].ID, calls[1].ID)
		}
		gmCheckNext(t, to, calls, "CiQB/+w=")
	}
}

func TestAnswerGeminiStops(t *testing.T) {
	cases := []struct {
		body       string
		chat, msgs string
		text       string
	}{
		{`{"promptFeedback":{"blockReason":"PROHIBITED_CONTENT"},"usageMetadata":{"promptTokenCount":9}}`, "content_filter", "refusal", ""},
		{`{"candidates":[{"finishReason":"SAFETY","index":0}]}`, "content_filter", "refusal", ""},
		{`{"candidates":[{"content":{"parts":[{"text":"ab"}]},"finishReason":"MAX_TOKENS"}]}`, "length", "max_tokens", "ab"},
		{`{"candidates":[{"content":{"parts":[{"text":"x"}]},"finishReason":"RECITATION"}]}`, "content_filter", "refusal", "x"},
		{`{"candidates":[{"finishReason":"MALFORMED_FUNCTION_CALL"}]}`, "stop", "end_turn", ""},
		{`{"candidates":[{"content":{"parts":[{"text":"done"}]},"finishReason":"STOP"}]}`, "stop", "end_turn", "done"},
	}
	for _, c := range cases {
		out, err := translate.AnswerBody(api.Gemini, api.Chat, []byte(c.body), translate.AnswerOptions{Model: "gemini-2.5-flash"})
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		ch := translatetest.AsChat(t, out)
		translatetest.Eq(t, c.body+" finish", ch.Choices[0].FinishReason, c.chat)
		translatetest.Eq(t, c.body+" model", ch.Model, "gemini-2.5-flash")
		translatetest.Eq(t, c.body+" text", ch.Choices[0].Message.Content, c.text)
		out, err = translate.AnswerBody(api.Gemini, api.Messages, []byte(c.body), translate.AnswerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			StopReason string `json:"stop_reason"`
		}
		_ = json.Unmarshal(out, &msg)
		translatetest.Eq(t, c.body+" stop_reason", msg.StopReason, c.msgs)
	}
}

func TestAnswerGeminiNotAnAnswer(t *testing.T) {
	for _, body := range []string{`{"error":{"code":500,"message":"boom","status":"INTERNAL"}}`, `{"candidates":[]}`, `[]`} {
		if _, err := translate.AnswerBody(api.Gemini, api.Chat, []byte(body), translate.AnswerOptions{}); err == nil {
			t.Errorf("%s: no error", body)
		}
	}
}

func TestErrorBodyGemini(t *testing.T) {
	cases := []struct {
		status     int
		body       string
		chat, msgs string
	}{
		{429, `{"error":{"code":429,"message":"Quota exceeded","status":"RESOURCE_EXHAUSTED"}}`, "rate_limit_error", "rate_limit_error"},
		{500, `[{"error":{"code":503,"message":"The model is overloaded.","status":"UNAVAILABLE"}}]`, "server_error", "overloaded_error"},
		{400, `{"error":{"code":400,"message":"bad","status":"FAILED_PRECONDITION"}}`, "invalid_request_error", "invalid_request_error"},
		{403, `{"error":{"code":403,"message":"no","status":"PERMISSION_DENIED"}}`, "permission_error", "permission_error"},
		{401, `{"error":{"code":401,"message":"who","status":"UNAUTHENTICATED"}}`, "authentication_error", "authentication_error"},
		{404, `{"error":{"code":404,"message":"models/x is not found","status":"NOT_FOUND"}}`, "invalid_request_error", "not_found_error"},
	}
	for _, c := range cases {
		var o struct {
			Error struct{ Message, Type string } `json:"error"`
		}
		if err := json.Unmarshal(translate.ErrorBody(api.Gemini, api.Chat, c.status, []byte(c.body)), &o); err != nil {
			t.Fatal(err)
		}
		translatetest.Eq(t, c.body+" chat type", o.Error.Type, c.chat)
		if o.Error.Message == "" || strings.Contains(o.Error.Message, "{") {
			t.Errorf("%s: message %q", c.body, o.Error.Message)
		}
		if err := json.Unmarshal(translate.ErrorBody(api.Gemini, api.Messages, c.status, []byte(c.body)), &o); err != nil {
			t.Fatal(err)
		}
		translatetest.Eq(t, c.body+" messages type", o.Error.Type, c.msgs)
	}
}

func TestRequestGeminiResultWithoutCall(t *testing.T) {
	body := `{"model":"g","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"nowhere","content":"x"}]}`
	_, _, err := translate.RequestBody(api.Chat, api.Gemini, []byte(body), translate.RequestOptions{})
	var e *translate.Error
	if !errors.As(err, &e) {
		t.Fatalf("err %v", err)
	}
}

// gmToolID is the first made-up call id in an answer.
func gmToolID(t *testing.T, out []byte) string {
	t.Helper()
	i := strings.Index(string(out), "call_abc123_0")
	if i < 0 {
		t.Fatalf("no call_abc123_0 in %s", out)
	}
	return "call_abc123_0" + geminiSigMark
}
