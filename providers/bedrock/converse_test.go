package bedrock

import (
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// The Converse captures (testdata/streams/converse_*.sse, written by hand:
// its README.md says after what) are what the bedrock provider makes of
// AWS's event stream: one SSE event per frame, named by its event type,
// with Bedrock's "p" padding in the payloads.

func TestStreamConverseDirections(t *testing.T) {
	for _, to := range translatetest.Clients {
		for scenario := range translatetest.Scenarios {
			t.Run(fmt.Sprintf("converse-%v/%s", to, scenario), func(t *testing.T) {
				out := translatetest.Run(t, api.Converse, to, translate.StreamOptions{IncludeUsage: true, Model: "us.anthropic.claude-sonnet-4-5"}, translatetest.Capture(t, api.Converse, scenario))
				evs := translatetest.Split(t, out)
				got := translatetest.Reassemble(t, to, evs)
				want := translatetest.Expect(scenario, api.Converse, to)
				if !reflect.DeepEqual(got, want) {
					t.Errorf("reassembled:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
				}
				if scenario == "text" && !strings.Contains(string(out), `"model":"us.anthropic.claude-sonnet-4-5"`) {
					t.Errorf("the model sent is not in the stream:\n%s", out)
				}
				if scenario == "error" {
					return // an SDK stops at the error: Reassemble's alone
				}
				want.Thinking, want.Signature = "", ""
				if got := translatetest.ReadSDK(t, to, evs); !reflect.DeepEqual(got, want) {
					t.Errorf("read by the SDK:\n got %+v\nwant %+v\nstream:\n%s", got, want, out)
				}
			})
		}
	}
}

// TestStreamConverseWaitsForMetadata: the usage comes after messageStop,
// so the client's end waits for it; a stream whose metadata never came
// still ends, at End, with what it said.
func TestStreamConverseWaitsForMetadata(t *testing.T) {
	evs := strings.SplitAfter(string(translatetest.Capture(t, api.Converse, "length")), "\n\n")
	var stop, meta string
	for _, e := range evs {
		switch {
		case strings.HasPrefix(e, "event: messageStop"):
			stop = e
		case strings.HasPrefix(e, "event: metadata"):
			meta = e
		}
	}
	for _, to := range translatetest.Clients {
		s := translate.NewStream(api.Converse, to, translate.StreamOptions{IncludeUsage: true, Model: "m"})
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
		got := translatetest.Reassemble(t, to, translatetest.Split(t, []byte(withMeta)))
		if got.Stop != translate.StopLength || got.Usage.Output != 3 {
			t.Errorf("%v with metadata: %+v", to, got)
		}
		s = translate.NewStream(api.Converse, to, translate.StreamOptions{IncludeUsage: true, Model: "m"})
		out = out[:0]
		for _, e := range evs {
			if e != meta {
				out = s.Event(out, []byte(e))
			}
		}
		got = translatetest.Reassemble(t, to, translatetest.Split(t, s.End(out)))
		if got.Stop != translate.StopLength || got.Text != "The answer is" {
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
		m := translatetest.Feed(translate.NewStream(api.Converse, api.Messages, translate.StreamOptions{}), ev)
		if want := `{"type":"error","error":{"type":"` + c.messagesType + `","message":"went wrong"}}`; !strings.Contains(m, want) {
			t.Errorf("%s → Messages: %q", c.name, m)
		}
		ch := translatetest.Feed(translate.NewStream(api.Converse, api.Chat, translate.StreamOptions{}), ev)
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
	for _, to := range translatetest.Clients {
		b.Run("converse-"+to.String(), func(b *testing.B) {
			o := translate.StreamOptions{IncludeUsage: true, Model: "us.anthropic.claude-sonnet-4-5"}
			translatetest.BenchStream(b, api.Converse, to, o, [][]byte{prelude}, delta)
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
	out, err := translate.AnswerBody(api.Converse, api.Chat, []byte(cvAnswerFixture), translate.AnswerOptions{Model: "us.anthropic.claude-x"})
	if err != nil {
		t.Fatal(err)
	}
	c := translatetest.AsChat(t, out)
	translatetest.Eq(t, "model", c.Model, "us.anthropic.claude-x")
	translatetest.Eq(t, "id prefix", strings.HasPrefix(c.ID, "chatcmpl-"), true)
	translatetest.Eq(t, "content", c.Choices[0].Message.Content, "Hi <there>")
	translatetest.Eq(t, "finish_reason", c.Choices[0].FinishReason, "tool_calls")
	translatetest.Eq(t, "tool id", c.Choices[0].Message.ToolCalls[0].ID, "tooluse_ab.c")
	translatetest.JSONEq(t, "arguments", c.Choices[0].Message.ToolCalls[0].Function.Arguments, `{"q":"x","n":[1,2]}`)
	translatetest.Eq(t, "prompt_tokens", c.Usage.PromptTokens, 45)
	translatetest.Eq(t, "cached", c.Usage.PromptTokensDetails.CachedTokens, 30)
	translatetest.Eq(t, "completion_tokens", c.Usage.CompletionTokens, 7)
	again, _ := translate.AnswerBody(api.Converse, api.Chat, []byte(cvAnswerFixture), translate.AnswerOptions{})
	translatetest.Eq(t, "the same id for the same answer", translatetest.AsChat(t, again).ID, c.ID)
}

func TestAnswerConverseToMessages(t *testing.T) {
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Converse, api.Messages, cvAnswerFixture))
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "tool_use")
	translatetest.Eq(t, "blocks", len(m.Content), 3)
	translatetest.Eq(t, "thinking", m.Content[0].Thinking, "hmm")
	translatetest.Eq(t, "signature", m.Content[0].Signature, "sig==")
	translatetest.Eq(t, "tool id sanitized", m.Content[2].ID, "tooluse_ab_c")
	translatetest.Eq(t, "input_tokens", m.Usage.InputTokens, int64(10))
	translatetest.Eq(t, "cache read", m.Usage.CacheReadInputTokens, int64(30))
	translatetest.Eq(t, "cache write", m.Usage.CacheCreationInputTokens, int64(5))
}

func TestAnswerConverseToResponses(t *testing.T) {
	r := translatetest.AsResponse(t, translatetest.Translated(t, api.Converse, api.Responses, cvAnswerFixture))
	translatetest.Eq(t, "status", string(r.Status), "completed")
	translatetest.Eq(t, "input_tokens", r.Usage.InputTokens, int64(45))
	var kinds []string
	for _, it := range r.Output {
		kinds = append(kinds, it.Type)
	}
	translatetest.Eq(t, "items", strings.Join(kinds, ","), "reasoning,message,function_call")
}

func TestAnswerConverseStops(t *testing.T) {
	for reason, want := range map[string]string{
		"end_turn": "stop", "stop_sequence": "stop", "max_tokens": "length", "guardrail_intervened": "content_filter",
		"content_filtered": "content_filter", "model_context_window_exceeded": "length", "malformed_model_output": "stop",
	} {
		body := `{"output":{"message":{"role":"assistant","content":[{"text":"x"}]}},"stopReason":"` + reason + `","usage":{}}`
		c := translatetest.AsChat(t, translatetest.Translated(t, api.Converse, api.Chat, body))
		translatetest.Eq(t, reason, c.Choices[0].FinishReason, want)
	}
	if _, err := translate.AnswerBody(api.Converse, api.Chat, []byte(`{"message":"The security token included in the request is invalid."}`), translate.AnswerOptions{}); err == nil || !strings.Contains(err.Error(), "security token") {
		t.Errorf("an error body as an answer: %v", err)
	}
}

func TestErrorBodyConverse(t *testing.T) {
	for _, body := range []string{`{"message":"Too many requests"}`, `{"Message":"Too many requests"}`} {
		var m struct {
			Error struct{ Type, Message string }
		}
		if err := json.Unmarshal(translate.ErrorBody(api.Converse, api.Messages, 429, []byte(body)), &m); err != nil {
			t.Fatal(err)
		}
		translatetest.Eq(t, "type", m.Error.Type, "rate_limit_error")
		translatetest.Eq(t, "message", m.Error.Message, "Too many requests")
		if err := json.Unmarshal(translate.ErrorBody(api.Converse, api.Chat, 429, []byte(body)), &m); err != nil {
			t.Fatal(err)
		}
		translatetest.Eq(t, "chat message", m.Error.Message, "Too many requests")
	}
}

// TestCheckMediaConverse: a Converse body sent as written keeps its bytes,
// and refuses an S3 object, read with the operator's credentials.
func TestCheckMediaConverse(t *testing.T) {
	for _, c := range []struct {
		name, body   string
		allow        []string
		member, kind string
	}{
		{"converse bytes", `{"messages":[{"role":"user","content":[{"image":{"format":"png","source":{"bytes":"AAAA"}}}]}]}`, nil, "", ""},
		{"converse s3", `{"messages":[{"role":"user","content":[{"document":{"format":"pdf","name":"d","source":{"s3Location":{"uri":"s3://b/d.pdf"}}}}]}]}`, nil, "messages[0].content[0].document.source.s3Location.uri", "s3"},
	} {
		t.Run(c.name, func(t *testing.T) {
			translatetest.CheckMedia(t, api.Converse, c.body, c.allow, c.member, c.kind)
		})
	}
}

// converseHuge is a Converse engine answering with size bytes of text, or
// of one tool call's arguments.
func converseHuge(tool bool, size int) *translatetest.Huge {
	piece := strings.Repeat("a", translatetest.PieceSize)
	ev := translatetest.SSE
	h := &translatetest.Huge{N: size / translatetest.PieceSize, Head: []string{ev("messageStart", `{"role":"assistant"}`)},
		Piece: ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"text":"`+piece+`"}}`)}
	if tool {
		h.Head = append(h.Head, ev("contentBlockStart", `{"contentBlockIndex":0,"start":{"toolUse":{"toolUseId":"tu_1","name":"write"}}}`))
		h.Piece = ev("contentBlockDelta", `{"contentBlockIndex":0,"delta":{"toolUse":{"input":"`+piece+`"}}}`)
	}
	h.Tail = []string{ev("contentBlockStop", `{"contentBlockIndex":0}`), ev("messageStop", `{"stopReason":"end_turn"}`),
		ev("metadata", `{"usage":{"inputTokens":1,"outputTokens":2}}`)}
	return h
}

// TestStreamConverseHugeAnswersKeepMemoryFlat: the hub's bound holds for a
// Converse engine's huge answer, as internal/translate checks it for the
// clients' APIs.
func TestStreamConverseHugeAnswersKeepMemoryFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("100 MB through each direction")
	}
	for _, size := range translatetest.HugeSizes {
		for _, to := range translatetest.Clients {
			t.Run(fmt.Sprintf("%s/converse-%v", size.Name, to), func(t *testing.T) {
				translatetest.KeepsMemoryFlat(t, api.Converse, to, size.N, func(n int) io.Reader { return converseHuge(size.Tool, n) })
			})
		}
	}
}
