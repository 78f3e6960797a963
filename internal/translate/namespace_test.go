package translate_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate/translatetest"
)

// nsRequest declares what Codex does: a plain function, and MCP servers as
// namespaces, one with a function and one with a custom tool.
const nsRequest = `{"input":[],"tools":[{"type":"function","name":"shell","parameters":{"type":"object"}},` +
	`{"type":"namespace","name":"mcp__node_repl","description":"node","tools":[{"type":"function","name":"js","parameters":{"type":"object"}}]},` +
	`{"type":"namespace","name":"mcp__x","tools":[{"type":"custom","name":"exec"}]}]}`

// nsWant is each call's name, namespace and type as Codex must get them.
var nsWant = []struct{ typ, callID, name, namespace string }{
	{"function_call", "call_js", "js", "mcp__node_repl"},
	{"custom_tool_call", "call_ex", "exec", "mcp__x"},
	{"function_call", "call_sh", "shell", ""},
}

func nsCheck(t *testing.T, where string, items []responses.ResponseOutputItemUnion, whole bool) {
	t.Helper()
	if len(items) != len(nsWant) {
		t.Fatalf("%s: %d items, want %d", where, len(items), len(nsWant))
	}
	for i, w := range nsWant {
		it := items[i]
		translatetest.Eq(t, where+" type", it.Type, w.typ)
		if w.typ == "custom_tool_call" {
			c := it.AsCustomToolCall()
			translatetest.Eq(t, where+" call_id", c.CallID, w.callID)
			translatetest.Eq(t, where+" name", c.Name, w.name)
			translatetest.Eq(t, where+" namespace", c.Namespace, w.namespace)
			if whole {
				translatetest.Eq(t, where+" input", c.Input, "ls")
			}
			continue
		}
		c := it.AsFunctionCall()
		translatetest.Eq(t, where+" call_id", c.CallID, w.callID)
		translatetest.Eq(t, where+" name", c.Name, w.name)
		translatetest.Eq(t, where+" namespace", c.Namespace, w.namespace)
		if w.namespace == "" && c.JSON.Namespace.Valid() {
			t.Errorf("%s: a call of no namespace has a namespace member: %s", where, c.RawJSON())
		}
	}
}

func TestAnswerNamespaceCallsGoBackSplit(t *testing.T) {
	body := []byte(nsRequest)
	const chat = `{"id":"c","created":1,"model":"m","choices":[{"message":{"tool_calls":[
		{"id":"call_js","type":"function","function":{"name":"mcp__node_repl__js","arguments":"{\"code\":\"1\"}"}},
		{"id":"call_ex","type":"function","function":{"name":"mcp__x__exec","arguments":"{\"input\":\"ls\"}"}},
		{"id":"call_sh","type":"function","function":{"name":"shell","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`
	req := nsRead(t, body)
	out, err := translate.AnswerBody(api.Chat, api.Responses, []byte(chat), translate.AnswerOptions{CustomTools: req.Custom, Namespaces: req.Namespaces})
	if err != nil {
		t.Fatal(err)
	}
	r := translatetest.AsResponse(t, out)
	nsCheck(t, "answer", r.Output, true)
	translatetest.Eq(t, "arguments", r.Output[0].AsFunctionCall().Arguments, `{"code":"1"}`)
}

func TestStreamNamespaceCallsGoBackSplit(t *testing.T) {
	body := []byte(nsRequest)
	req := nsRead(t, body)
	o := translate.StreamOptions{CustomTools: req.Custom, Namespaces: req.Namespaces}
	upstream := []string{
		stChatChunk(`{"role":"assistant","tool_calls":[{"index":0,"id":"call_js","type":"function","function":{"name":"mcp__node_repl__js","arguments":""}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"index":0,"function":{"arguments":"{\"code\":\"1\"}"}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"index":1,"id":"call_ex","type":"function","function":{"name":"mcp__x__exec","arguments":"{\"input\":\"ls\"}"}}]}`, ""),
		stChatChunk(`{"tool_calls":[{"index":2,"id":"call_sh","type":"function","function":{"name":"shell","arguments":"{}"}}]}`, ""),
		stChatChunk(`{}`, "tool_calls"),
		"data: [DONE]\n\n",
	}
	s := translate.NewStream(api.Chat, api.Responses, o)
	got := translatetest.Feed(s, upstream...)
	var added, done []responses.ResponseOutputItemUnion
	var completed *responses.Response
	for _, e := range translatetest.Split(t, []byte(got)) {
		switch e.Name {
		case "response.output_item.added":
			var ev responses.ResponseOutputItemAddedEvent
			if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
				t.Fatalf("%v: %s", err, e.Data)
			}
			added = append(added, ev.Item)
		case "response.output_item.done":
			var ev responses.ResponseOutputItemDoneEvent
			if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
				t.Fatalf("%v: %s", err, e.Data)
			}
			done = append(done, ev.Item)
		case "response.completed":
			var ev responses.ResponseCompletedEvent
			if err := json.Unmarshal([]byte(e.Data), &ev); err != nil {
				t.Fatalf("%v: %s", err, e.Data)
			}
			completed = &ev.Response
		}
	}
	if completed == nil {
		t.Fatalf("no response.completed: %s", got)
	}
	nsCheck(t, "output_item.added", added, false)
	nsCheck(t, "output_item.done", done, true)
	nsCheck(t, "response.completed", completed.Output, true)
	if strings.Contains(got, "mcp__node_repl__js") || strings.Contains(got, "mcp__x__exec") {
		t.Errorf("a flattened name reached the client: %s", got)
	}

	// A pooled Stream writes these calls without allocating once warm:
	// the namespace is looked up when a call opens, into reused buffers.
	evs := make([][]byte, len(upstream))
	for i, ev := range upstream {
		evs[i] = []byte(ev)
	}
	out := make([]byte, 0, 64<<10)
	run := func() {
		s.Reset(api.Chat, api.Responses, o)
		out = out[:0]
		for _, ev := range evs {
			out = s.Event(out, ev)
		}
		out = s.End(out)
	}
	run()
	if n := testing.AllocsPerRun(100, run); n != 0 {
		t.Errorf("%v allocations per warm stream of namespace calls", n)
	}
}

// nsRead reads a Responses request, whose tool tables the answer's
// translation takes.
func nsRead(t *testing.T, body []byte) *translate.Request {
	t.Helper()
	r, err := translate.ReadRequest(api.Responses, body)
	if err != nil {
		t.Fatal(err)
	}
	return r
}
