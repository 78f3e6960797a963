package translate_test

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

func stChatChunk(delta string, finish string) string {
	if finish != "" {
		finish = `"` + finish + `"`
	} else {
		finish = "null"
	}
	return `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + "}]}\n\n"
}

func TestStreamCommentsPassAndNonJSONIsDropped(t *testing.T) {
	for _, d := range stDirections {
		s := translate.NewStream(d[0], d[1], translate.StreamOptions{})
		got := translatetest.Feed(s, ": keep-alive\r\n\r\n", "data: not json\n\n", "event: x\n\n")
		if got != ": keep-alive\n\n" {
			t.Errorf("%v-%v: %q", d[0], d[1], got)
		}
	}
}

func TestStreamCutUpstreamGetsNoEnd(t *testing.T) {
	for _, d := range stDirections {
		text := map[api.API]string{
			api.Chat:      stChatChunk(`{"content":"Hi"}`, ""),
			api.Messages:  "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n",
			api.Responses: "event: response.output_text.delta\ndata: {\"type\":\"response.output_text.delta\",\"output_index\":0,\"delta\":\"Hi\"}\n\n",
		}[d[0]]
		s := translate.NewStream(d[0], d[1], translate.StreamOptions{})
		out := s.Event(nil, []byte(text))
		if !strings.Contains(string(out), "Hi") {
			t.Errorf("%v-%v: the text did not pass: %q", d[0], d[1], out)
		}
		if end := s.End(nil); len(end) != 0 {
			t.Errorf("%v-%v: End after a cut stream: %q", d[0], d[1], end)
		}
	}
}

func TestStreamMessagesPingBecomesAComment(t *testing.T) {
	s := translate.NewStream(api.Messages, api.Chat, translate.StreamOptions{})
	if got := translatetest.Feed(s, "event: ping\ndata: {\"type\":\"ping\"}\n\n", "event: future_thing\ndata: {\"type\":\"future_thing\"}\n\n"); got != ": ping\n\n" {
		t.Errorf("%q", got)
	}
}

// TestStreamChatToMessagesWaitsForContent: message_start goes out with the
// first block, so the role chunk alone sends nothing, and an engine that
// fails at once answers with the error event alone.
func TestStreamChatToMessagesWaitsForContent(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Messages, translate.StreamOptions{})
	if got := s.Event(nil, []byte(stChatChunk(`{"role":"assistant","content":""}`, ""))); len(got) != 0 {
		t.Errorf("role chunk: %q", got)
	}
	got := string(s.Event(nil, []byte(`data: {"error":{"message":"no","type":"rate_limit_exceeded","code":null}}`+"\n\n")))
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"rate_limit_error\",\"message\":\"no\"}}\n\n"
	if got != want {
		t.Errorf("got %q, want %q", got, want)
	}
	if more := translatetest.Feed(s, stChatChunk(`{"content":"late"}`, ""), "data: [DONE]\n\n"); more != "" {
		t.Errorf("after the error: %q", more)
	}
}

// TestStreamResponsesAnnouncesWithTheFirstBlock: a Responses client hears
// response.created with the first block, not with the engine's role-only
// chunk, so the gateway holds nothing but announcements until the first
// delta (issue 56: the stream committed at its first byte, and a slow first
// token was never hedged); an engine that fails before its first token
// answers with the error event alone.
func TestStreamResponsesAnnouncesWithTheFirstBlock(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Responses, translate.StreamOptions{})
	if got := s.Event(nil, []byte(stChatChunk(`{"role":"assistant","content":""}`, ""))); len(got) != 0 {
		t.Fatalf("role chunk: %q", got)
	}
	var names []string
	for _, e := range translatetest.Split(t, s.Event(nil, []byte(stChatChunk(`{"content":"Hi"}`, "")))) {
		names = append(names, e.Name)
	}
	if want := "response.created response.in_progress response.output_item.added response.content_part.added response.output_text.delta"; strings.Join(names, " ") != want {
		t.Fatalf("with the first text: %v, want %s", names, want)
	}

	s = translate.NewStream(api.Chat, api.Responses, translate.StreamOptions{})
	s.Event(nil, []byte(stChatChunk(`{"role":"assistant","content":""}`, "")))
	got := translatetest.Split(t, s.Event(nil, []byte(`data: {"error":{"message":"no","type":"server_error","code":null}}`+"\n\n")))
	if len(got) != 1 || got[0].Name != "error" {
		t.Fatalf("an error before content: %+v", got)
	}
}

// TestStreamChatToolCallsWithoutIDsOrIndexes: engines that leave out the
// index send calls one after another; a call without an id gets one.
func TestStreamChatToolCallsWithoutIDsOrIndexes(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Messages, translate.StreamOptions{})
	got := translatetest.Feed(s,
		stChatChunk(`{"tool_calls":[{"function":{"name":"a","arguments":"{}"}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"id":"x/1","function":{"name":"b","arguments":"{\"k\":"}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"function":{"arguments":"1}"}}]}`, ""),
		stChatChunk(`{}`, "stop"),
		"data: [DONE]\n\n")
	a := translatetest.Reassemble(t, api.Messages, translatetest.Split(t, []byte(got)))
	if len(a.Tools) != 2 || !strings.HasPrefix(a.Tools[0].ID, "toolu_") || a.Tools[0].Name != "a" || a.Tools[0].Args != "{}" ||
		a.Tools[1].ID != "x_1" || a.Tools[1].Args != `{"k":1}` || a.Stop != translate.StopTool {
		t.Errorf("%+v\n%s", a, got)
	}
}

// TestStreamMessagesToChatToolIndexCountsTools: a text block before the
// calls does not shift their index (docs/translation-facts.md#t7).
func TestStreamMessagesToChatToolIndexCountsTools(t *testing.T) {
	out := translatetest.Run(t, api.Messages, api.Chat, translate.StreamOptions{}, translatetest.Capture(t, api.Messages, "tools"))
	if !strings.Contains(string(out), `"tool_calls":[{"index":0,"id":"call_abc1","type":"function","function":{"name":"get_weather","arguments":""}}]`) ||
		!strings.Contains(string(out), `"tool_calls":[{"index":1,"id":"functions.get_time:1"`) {
		t.Errorf("%s", out)
	}
	if strings.Contains(string(out), `"usage"`) {
		t.Error("a usage chunk nobody asked for")
	}
}

func TestStreamResponsesCustomToolCall(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Responses, translate.StreamOptions{CustomTools: []string{"apply_patch"}})
	got := translatetest.Feed(s,
		stChatChunk(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"apply_patch","arguments":""}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"input\":\"*** Begin"}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":" Patch\\n\\\"x\\\"\"}"}}]}`, ""),
		stChatChunk(`{}`, "tool_calls"),
		"data: [DONE]\n\n")
	want := `"item":{"id":"ctc_` // checked whole below
	if !strings.Contains(got, want) {
		t.Fatalf("%s", got)
	}
	for _, e := range translatetest.Split(t, []byte(got)) {
		if e.Name != "response.output_item.done" {
			continue
		}
		m := translatetest.Obj(translatetest.Decode(t, e.Data)["item"])
		if m["type"] != "custom_tool_call" || m["call_id"] != "call_1" || m["name"] != "apply_patch" || m["input"] != "*** Begin Patch\n\"x\"" {
			t.Errorf("%v", m)
		}
		return
	}
	t.Errorf("no output_item.done: %s", got)
}

func TestStreamResetReuses(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Messages, translate.StreamOptions{})
	first := translatetest.Run(t, api.Chat, api.Messages, translate.StreamOptions{}, translatetest.Capture(t, api.Chat, "tools"))
	_ = translatetest.Feed(s, strings.SplitAfter(string(translatetest.Capture(t, api.Chat, "tools")), "\n\n")...)
	s.Reset(api.Messages, api.Responses, translate.StreamOptions{})
	s.Reset(api.Chat, api.Messages, translate.StreamOptions{})
	again := translatetest.Feed(s, strings.SplitAfter(string(translatetest.Capture(t, api.Chat, "tools")), "\n\n")...)
	if again != string(first) {
		t.Errorf("after Reset:\n%s\nfirst:\n%s", again, first)
	}
}

func TestStreamSameAPIPassesThrough(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Chat, translate.StreamOptions{})
	ev := stChatChunk(`{"content":"x"}`, "")
	if got := translatetest.Feed(s, ev); got != ev {
		t.Errorf("%q", got)
	}
}
