package translate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// The engines' own ways of naming the stop string they matched, as they
// send them (docs/translation.md#stop-reasons).
const (
	// vLLM: choices[].stop_reason is the string, beside finish_reason
	// "stop" (SGLang's is matched_stop).
	stopVLLM = `{"id":"chatcmpl-v","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
	"message":{"role":"assistant","content":"one, two"},"finish_reason":"stop","stop_reason":"three"}],
	"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}`
	// vLLM's stop token: a number, no string the client asked for.
	stopVLLMToken = `{"id":"chatcmpl-v","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,
	"message":{"role":"assistant","content":"done"},"finish_reason":"stop","stop_reason":151645}]}`
	// llama-server with -lv 10: its native answer under __verbose.
	stopLlamaVerbose = `{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"one, two","role":"assistant"}}],
	"created":1,"model":"m","object":"chat.completion","usage":{"completion_tokens":3,"prompt_tokens":5,"total_tokens":8},
	"id":"chatcmpl-l","__verbose":{"content":"one, two","stop":true,"stop_type":"word","stopping_word":"three","tokens_predicted":3}}`
	// llama-server's Messages answer: stop_sequence beside end_turn.
	stopLlamaMessages = `{"id":"chatcmpl-l","type":"message","role":"assistant","content":[{"type":"text","text":"one, two"}],
	"model":"m","stop_reason":"end_turn","stop_sequence":"three","usage":{"input_tokens":5,"output_tokens":3}}`
)

func TestAnswerStopSequenceReachesMessagesClients(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		reason     string
		seq        string
	}{
		{"vLLM stop_reason", stopVLLM, "stop_sequence", "three"},
		{"vLLM stop token", stopVLLMToken, "end_turn", ""},
		{"SGLang matched_stop", strings.Replace(stopVLLM, "stop_reason", "matched_stop", 1), "stop_sequence", "three"},
		{"llama-server __verbose", stopLlamaVerbose, "stop_sequence", "three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			translated := translatetest.Translated(t, api.Chat, api.Messages, tc.body)
			m := translatetest.AsMessage(t, translated)
			translatetest.Eq(t, "stop_reason", string(m.StopReason), tc.reason)
			translatetest.Eq(t, "stop_sequence", m.StopSequence, tc.seq)
			// Chat and Responses have no member for the string: a plain stop
			translatetest.Eq(t, "finish_reason", translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, string(translated))).Choices[0].FinishReason, "stop")
			translatetest.Eq(t, "status", string(translatetest.AsResponse(t, translatetest.Translated(t, api.Chat, api.Responses, tc.body)).Status), "completed")
		})
	}
}

func TestAnswerMessagesStopSequenceBesideEndTurnIsRead(t *testing.T) {
	a, err := translate.ReadAnswerOf(api.Messages, []byte(stopLlamaMessages))
	if err != nil {
		t.Fatal(err)
	}
	a.Settle(nil)
	translatetest.Eq(t, "stop", a.Stop, translate.StopSequence)
	translatetest.Eq(t, "seq", a.StopSequence, "three")
	translatetest.Eq(t, "finish_reason", translatetest.AsChat(t, translatetest.Translated(t, api.Messages, api.Chat, stopLlamaMessages)).Choices[0].FinishReason, "stop")
}

func TestAnswerStopSequenceWithToolsIsAToolStop(t *testing.T) {
	const body = `{"id":"c","created":1,"model":"m","choices":[{"message":{"content":null,
	"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop","stop_reason":"three"}]}`
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, body))
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "tool_use")
	translatetest.Eq(t, "stop_sequence", m.StopSequence, "")
}

func TestAnswerOverlongStopSequenceIsDropped(t *testing.T) {
	long := strings.Repeat("x", translate.MaxStopSequence+1)
	body := strings.Replace(stopVLLM, `"three"`, `"`+long+`"`, 1)
	m := translatetest.AsMessage(t, translatetest.Translated(t, api.Chat, api.Messages, body))
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "end_turn")
}

// stAccumulate reads a Messages client's stream as the Anthropic SDK does.
func stAccumulate(t *testing.T, out string) anthropic.Message {
	t.Helper()
	var m anthropic.Message
	for _, ev := range strings.Split(out, "\n\n") {
		_, data, ok := strings.Cut(ev, "data: ")
		if !ok {
			continue
		}
		var e anthropic.MessageStreamEventUnion
		if err := json.Unmarshal([]byte(data), &e); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
		if err := m.Accumulate(e); err != nil {
			t.Fatalf("%v: %s", err, data)
		}
	}
	return m
}

func TestStreamStopSequenceReachesMessagesClients(t *testing.T) {
	vllmFinish := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"three"}]}` + "\n\n"
	llamaFinal := `data: {"choices":[{"finish_reason":null,"index":0,"delta":{"content":","}}],"created":1,"id":"chatcmpl-1","model":"m","object":"chat.completion.chunk",` +
		`"__verbose":{"stop_type":"word","stopping_word":"th\"ree"}}` + "\n\n"
	usage := `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3,"total_tokens":8}}` + "\n\n"
	for _, tc := range []struct {
		name string
		from api.API
		evs  []string
		seq  string
	}{
		{"vLLM", api.Chat, []string{stChatChunk(`{"role":"assistant","content":"one, two"}`, ""), vllmFinish, usage, "data: [DONE]\n\n"}, "three"},
		{"SGLang", api.Chat, []string{stChatChunk(`{"role":"assistant","content":"one, two"}`, ""), strings.Replace(vllmFinish, "stop_reason", "matched_stop", 1), usage, "data: [DONE]\n\n"}, "three"},
		{"llama-server __verbose", api.Chat, []string{stChatChunk(`{"content":"one"}`, ""), llamaFinal, stChatChunk(`{}`, "stop"), usage, "data: [DONE]\n\n"}, `th"ree`},
		{"llama-server Messages", api.Messages, []string{
			"event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":5,\"output_tokens\":0}}}\n\n",
			"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n",
			"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"one\"}}\n\n",
			"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n",
			"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":\"three\"},\"usage\":{\"output_tokens\":3}}\n\n",
			"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n",
		}, "three"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.from == api.Messages {
				// carried toward Chat as "stop", the one word it has
				got := translatetest.Feed(translate.NewStream(tc.from, api.Chat, translate.StreamOptions{}), tc.evs...)
				if !strings.Contains(got, `"finish_reason":"stop"`) {
					t.Errorf("%s", got)
				}
				return
			}
			m := stAccumulate(t, translatetest.Feed(translate.NewStream(tc.from, api.Messages, translate.StreamOptions{}), tc.evs...))
			translatetest.Eq(t, "stop_reason", string(m.StopReason), "stop_sequence")
			translatetest.Eq(t, "stop_sequence", m.StopSequence, tc.seq)
		})
	}
}

func TestStreamStopSequenceKeepsNoStringAcrossStreams(t *testing.T) {
	s := translate.NewStream(api.Chat, api.Messages, translate.StreamOptions{})
	translatetest.Feed(s, stChatChunk(`{"content":"a"}`, ""), `data: {"choices":[{"index":0,"delta":{},"finish_reason":"stop","stop_reason":"x"}]}`+"\n\n", "data: [DONE]\n\n")
	s.Reset(api.Chat, api.Messages, translate.StreamOptions{})
	m := stAccumulate(t, translatetest.Feed(s, stChatChunk(`{"content":"a"}`, "stop"), "data: [DONE]\n\n"))
	translatetest.Eq(t, "stop_reason", string(m.StopReason), "end_turn")
}
