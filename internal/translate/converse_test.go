package translate

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The Converse captures (testdata/streams/converse_*.sse) are what the
// bedrock provider makes of AWS's event stream: one SSE event per frame,
// named by its event type, with Bedrock's "p" padding in the payloads.

func TestStreamConverseDirections(t *testing.T) {
	for _, to := range conversations {
		for scenario := range stScenarios {
			t.Run(fmt.Sprintf("converse-%v/%s", to, scenario), func(t *testing.T) {
				out := stRun(t, api.Converse, to, StreamOptions{IncludeUsage: true, Model: "us.anthropic.claude-sonnet-4-5"}, stCapture(t, api.Converse, scenario))
				got := stReassemble(t, to, stSplit(t, out))
				if want := stExpect(scenario, api.Converse, to); !reflect.DeepEqual(got, want) {
					t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
				}
				if scenario == "text" && !strings.Contains(string(out), `"model":"us.anthropic.claude-sonnet-4-5"`) {
					t.Errorf("the model sent is not in the stream:\n%s", out)
				}
			})
		}
	}
}

// TestStreamConverseWaitsForMetadata: the usage comes after messageStop,
// so the client's end waits for it; a stream whose metadata never came
// still ends, at End, with what it said.
func TestStreamConverseWaitsForMetadata(t *testing.T) {
	evs := strings.SplitAfter(string(stCapture(t, api.Converse, "length")), "\n\n")
	var stop, meta string
	for _, e := range evs {
		switch {
		case strings.HasPrefix(e, "event: messageStop"):
			stop = e
		case strings.HasPrefix(e, "event: metadata"):
			meta = e
		}
	}
	for _, to := range conversations {
		s := NewStream(api.Converse, to, StreamOptions{IncludeUsage: true, Model: "m"})
		var out []byte
		for _, e := range evs {
			if e == meta {
				break
			}
			out = s.Event(out, []byte(e))
			if e == stop && (strings.Contains(string(out), `"stop_reason":"max_tokens"`) || strings.Contains(string(out), `"finish_reason":"length"`) || strings.Contains(string(out), "event: response.incomplete")) {
				t.Errorf("%v: the end went out before metadata: %s", to, out)
			}
		}
		withMeta := string(s.Event(append([]byte(nil), out...), []byte(meta)))
		got := stReassemble(t, to, stSplit(t, []byte(withMeta)))
		if got.Stop != StopLength || got.Usage.Output != 3 {
			t.Errorf("%v with metadata: %+v", to, got)
		}
		s = NewStream(api.Converse, to, StreamOptions{IncludeUsage: true, Model: "m"})
		out = out[:0]
		for _, e := range evs {
			if e != meta {
				out = s.Event(out, []byte(e))
			}
		}
		got = stReassemble(t, to, stSplit(t, s.End(out)))
		if got.Stop != StopLength || got.Text != "The answer is" {
			t.Errorf("%v without metadata: %+v", to, got)
		}
	}
}

func TestStreamConverseExceptions(t *testing.T) {
	for _, c := range []struct{ name, messagesType, chatType string }{
		{"throttlingException", "rate_limit_error", "rate_limit_error"},
		{"serviceUnavailableException", "overloaded_error", "server_error"},
		{"validationException", "invalid_request_error", "invalid_request_error"},
		{"modelStreamErrorException", "api_error", "server_error"},
		{"internalServerException", "api_error", "server_error"},
	} {
		ev := "event: " + c.name + "\ndata: {\"message\":\"went wrong\"}\n\n"
		m := stFeed(NewStream(api.Converse, api.Messages, StreamOptions{}), ev)
		if want := `{"type":"error","error":{"type":"` + c.messagesType + `","message":"went wrong"}}`; !strings.Contains(m, want) {
			t.Errorf("%s → Messages: %q", c.name, m)
		}
		ch := stFeed(NewStream(api.Converse, api.Chat, StreamOptions{}), ev)
		if !strings.Contains(ch, `"message":"went wrong","type":"`+c.chatType+`"`) {
			t.Errorf("%s → Chat: %q", c.name, ch)
		}
	}
}

// BenchmarkStreamConverse is BenchmarkStream's measure for a Converse
// upstream: one text delta, pooled Stream, reused buffer.
func BenchmarkStreamConverse(b *testing.B) {
	prelude := []byte("event: messageStart\ndata: {\"p\":\"abcdefghij\",\"role\":\"assistant\"}\n\n")
	delta := []byte("event: contentBlockDelta\ndata: {\"contentBlockIndex\":0,\"delta\":{\"text\":\" the quick brown fox\"},\"p\":\"abcdefghijklmnopqrstu\"}\n\n")
	for _, to := range conversations {
		b.Run("converse-"+to.String(), func(b *testing.B) {
			o := StreamOptions{IncludeUsage: true, Model: "us.anthropic.claude-sonnet-4-5"}
			s := NewStream(api.Converse, to, o)
			out := make([]byte, 0, 64<<10)
			start := func() {
				s.Reset(api.Converse, to, o)
				out = s.Event(out[:0], prelude)
			}
			for range 2 {
				start()
				for range 1000 {
					out = s.Event(out[:0], delta)
				}
			}
			b.ReportAllocs()
			b.SetBytes(int64(len(delta)))
			b.ResetTimer()
			for i := range b.N {
				if i%1000 == 0 {
					start()
				}
				out = s.Event(out[:0], delta)
			}
		})
	}
}

const cvAnswerFixture = `{"output":{"message":{"role":"assistant","content":[
	{"reasoningContent":{"reasoningText":{"text":"hmm","signature":"sig=="}}},
	{"text":"Hi <there>"},
	{"toolUse":{"toolUseId":"tooluse_ab.c","name":"get","input":{"q":"x","n":[1, 2]}}}]}},
	"stopReason":"tool_use",
	"usage":{"inputTokens":10,"outputTokens":7,"totalTokens":52,"cacheReadInputTokens":30,"cacheWriteInputTokens":5},
	"metrics":{"latencyMs":100}}`

func TestAnswerConverseToChat(t *testing.T) {
	out, err := AnswerBody(api.Converse, api.Chat, []byte(cvAnswerFixture), AnswerOptions{Model: "us.anthropic.claude-x"})
	if err != nil {
		t.Fatal(err)
	}
	c := anAsChat(t, out)
	anEq(t, "model", c.Model, "us.anthropic.claude-x")
	anEq(t, "id prefix", strings.HasPrefix(c.ID, "chatcmpl-"), true)
	anEq(t, "content", c.Choices[0].Message.Content, "Hi <there>")
	anEq(t, "finish_reason", c.Choices[0].FinishReason, "tool_calls")
	anEq(t, "tool id", c.Choices[0].Message.ToolCalls[0].ID, "tooluse_ab.c")
	anJSONEq(t, "arguments", c.Choices[0].Message.ToolCalls[0].Function.Arguments, `{"q":"x","n":[1,2]}`)
	anEq(t, "prompt_tokens", c.Usage.PromptTokens, 45)
	anEq(t, "cached", c.Usage.PromptTokensDetails.CachedTokens, 30)
	anEq(t, "completion_tokens", c.Usage.CompletionTokens, 7)
	again, _ := AnswerBody(api.Converse, api.Chat, []byte(cvAnswerFixture), AnswerOptions{})
	anEq(t, "the same id for the same answer", anAsChat(t, again).ID, c.ID)
}

func TestAnswerConverseToMessages(t *testing.T) {
	m := anAsMessage(t, anTranslate(t, api.Converse, api.Messages, cvAnswerFixture))
	anEq(t, "stop_reason", string(m.StopReason), "tool_use")
	anEq(t, "blocks", len(m.Content), 3)
	anEq(t, "thinking", m.Content[0].Thinking, "hmm")
	anEq(t, "signature", m.Content[0].Signature, "sig==")
	anEq(t, "tool id sanitized", m.Content[2].ID, "tooluse_ab_c")
	anEq(t, "input_tokens", m.Usage.InputTokens, int64(10))
	anEq(t, "cache read", m.Usage.CacheReadInputTokens, int64(30))
	anEq(t, "cache write", m.Usage.CacheCreationInputTokens, int64(5))
}

func TestAnswerConverseToResponses(t *testing.T) {
	r := anAsResponse(t, anTranslate(t, api.Converse, api.Responses, cvAnswerFixture))
	anEq(t, "status", string(r.Status), "completed")
	anEq(t, "input_tokens", r.Usage.InputTokens, int64(45))
	var kinds []string
	for _, it := range r.Output {
		kinds = append(kinds, it.Type)
	}
	anEq(t, "items", strings.Join(kinds, ","), "reasoning,message,function_call")
}

func TestAnswerConverseStops(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "guardrail_intervened": "content_filter",
		"content_filtered": "content_filter", "model_context_window_exceeded": "length", "malformed_model_output": "stop",
	} {
		body := `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"` + reason + `","usage":{}}`
		c := anAsChat(t, anTranslate(t, api.Converse, api.Chat, body))
		anEq(t, reason, c.Choices[0].FinishReason, want)
	}
	if _, err := AnswerBody(api.Converse, api.Chat, []byte(`{"message":"The security token included in the request is invalid."}`), AnswerOptions{}); err == nil || !strings.Contains(err.Error(), "security token") {
		t.Errorf("an error body as an answer: %v", err)
	}
}

func TestErrorBodyConverse(t *testing.T) {
	for _, body := range []string{`{"message":"Too many requests"}`, `{"Message":"Too many requests"}`} {
		var m struct {
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(ErrorBody(api.Converse, api.Messages, 429, []byte(body)), &m); err != nil {
			t.Fatal(err)
		}
		anEq(t, "type", m.Error.Type, "rate_limit_error")
		anEq(t, "message", m.Error.Message, "Too many requests")
		if err := json.Unmarshal(ErrorBody(api.Converse, api.Chat, 429, []byte(body)), &m); err != nil {
			t.Fatal(err)
		}
		anEq(t, "chat message", m.Error.Message, "Too many requests")
	}
}
