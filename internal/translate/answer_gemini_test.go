package translate

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
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
	for _, to := range conversations {
		out, err := AnswerBody(api.Gemini, to, []byte(gmAnswerTools), AnswerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if again, _ := AnswerBody(api.Gemini, to, []byte(gmAnswerTools), AnswerOptions{}); !strings.Contains(string(again), gmToolID(t, out)) {
			t.Errorf("%v: the same answer translated twice has other ids", to)
		}
		var calls []stCall
		var m map[string]any
		if err := json.Unmarshal(out, &m); err != nil {
			t.Fatal(err)
		}
		switch to {
		case api.Chat:
			msg := stM(stM(m["choices"].([]any)[0])["message"])
			anEq(t, "finish", stS(stM(m["choices"].([]any)[0])["finish_reason"]), "tool_calls")
			anEq(t, "content", stS(msg["content"]), "Let me check.")
			anEq(t, "reasoning", stS(msg["reasoning_content"]), "Checking the weather")
			for _, c := range msg["tool_calls"].([]any) {
				f := stM(stM(c)["function"])
				calls = append(calls, stCall{stS(stM(c)["id"]), stS(f["name"]), stS(f["arguments"])})
			}
			u := stM(m["usage"])
			anEq(t, "prompt_tokens", stNum(u["prompt_tokens"]), 300)
			anEq(t, "completion_tokens", stNum(u["completion_tokens"]), 50)
			anEq(t, "reasoning_tokens", stNum(stM(u["completion_tokens_details"])["reasoning_tokens"]), 10)
			anEq(t, "cached_tokens", stNum(stM(u["prompt_tokens_details"])["cached_tokens"]), 200)
			anEq(t, "model", stS(m["model"]), "gemini-3-pro-preview")
		case api.Messages:
			anEq(t, "stop_reason", stS(m["stop_reason"]), "tool_use")
			for _, b := range m["content"].([]any) {
				if b := stM(b); b["type"] == "tool_use" {
					args, _ := json.Marshal(b["input"])
					calls = append(calls, stCall{stS(b["id"]), stS(b["name"]), string(args)})
				}
			}
			anEq(t, "input_tokens", stNum(stM(m["usage"])["input_tokens"]), 100)
		case api.Responses:
			for _, it := range m["output"].([]any) {
				if it := stM(it); it["type"] == "function_call" {
					calls = append(calls, stCall{stS(it["call_id"]), stS(it["name"]), stS(it["arguments"])})
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
		out, err := AnswerBody(api.Gemini, api.Chat, []byte(c.body), AnswerOptions{Model: "gemini-2.5-flash"})
		if err != nil {
			t.Fatalf("%s: %v", c.body, err)
		}
		var ch chatAnswerIn
		if err := json.Unmarshal(out, &ch); err != nil {
			t.Fatal(err)
		}
		anEq(t, c.body+" finish", *(*ch.Choices)[0].FinishReason, c.chat)
		anEq(t, c.body+" model", ch.Model, "gemini-2.5-flash")
		text := ""
		_ = json.Unmarshal((*ch.Choices)[0].Message.Content, &text)
		anEq(t, c.body+" text", text, c.text)
		out, err = AnswerBody(api.Gemini, api.Messages, []byte(c.body), AnswerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		var msg struct {
			StopReason string `json:"stop_reason"`
		}
		_ = json.Unmarshal(out, &msg)
		anEq(t, c.body+" stop_reason", msg.StopReason, c.msgs)
	}
}

func TestAnswerGeminiNotAnAnswer(t *testing.T) {
	for _, body := range []string{`{"error":{"code":500,"message":"boom","status":"INTERNAL"}}`, `{"candidates":[]}`, `[]`} {
		if _, err := AnswerBody(api.Gemini, api.Chat, []byte(body), AnswerOptions{}); err == nil {
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
		if err := json.Unmarshal(ErrorBody(api.Gemini, api.Chat, c.status, []byte(c.body)), &o); err != nil {
			t.Fatal(err)
		}
		anEq(t, c.body+" chat type", o.Error.Type, c.chat)
		if o.Error.Message == "" || strings.Contains(o.Error.Message, "{") {
			t.Errorf("%s: message %q", c.body, o.Error.Message)
		}
		if err := json.Unmarshal(ErrorBody(api.Gemini, api.Messages, c.status, []byte(c.body)), &o); err != nil {
			t.Fatal(err)
		}
		anEq(t, c.body+" messages type", o.Error.Type, c.msgs)
	}
}

func TestRequestGeminiResultWithoutCall(t *testing.T) {
	body := `{"model":"g","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"nowhere","content":"x"}]}`
	_, _, err := RequestBody(api.Chat, api.Gemini, []byte(body), RequestOptions{})
	var e *Error
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
