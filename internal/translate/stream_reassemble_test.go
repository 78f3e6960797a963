package translate

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// The reassemblers read a client's stream as its SDK's accumulator does,
// and fail on what that accumulator rejects: chunks of another id, tool
// call indexes that skip, blocks started out of order, deltas for a block
// that is not open, sequence numbers that do not rise.

func stReassembleChat(t *testing.T, evs []stTestEvent) stAnswer {
	t.Helper()
	var a stAnswer
	var text, thinking strings.Builder
	id := ""
	done := false
	for i, e := range evs {
		if done {
			t.Fatalf("event after [DONE]: %s", e.data)
		}
		if e.name != "" {
			t.Fatalf("a Chat stream has no event names: %q", e.name)
		}
		if e.data == "[DONE]" {
			done = true
			continue
		}
		m := stDecode(t, e.data)
		if errv, ok := m["error"]; ok {
			a.Err = stS(stM(errv)["message"])
			continue
		}
		if id == "" {
			id = stS(m["id"])
		}
		if m["id"] != id || !strings.HasPrefix(id, "chatcmpl-") || m["object"] != "chat.completion.chunk" || stNum(m["created"]) == 0 || stS(m["model"]) == "" {
			t.Fatalf("chunk %d: bad head: %s", i, e.data)
		}
		choices, _ := m["choices"].([]any)
		if len(choices) == 0 {
			u := stM(m["usage"])
			a.Usage = api.Usage{Input: stNum(u["prompt_tokens"]), Output: stNum(u["completion_tokens"]),
				CacheRead: stNum(stM(u["prompt_tokens_details"])["cached_tokens"])}
			continue
		}
		c := stM(choices[0])
		d := stM(c["delta"])
		if i == 0 && (d["role"] != "assistant" || d["content"] != "") {
			t.Fatalf("first chunk: %s", e.data)
		}
		text.WriteString(stS(d["content"]))
		thinking.WriteString(stS(d["reasoning_content"]))
		calls, _ := d["tool_calls"].([]any)
		for _, call := range calls {
			call := stM(call)
			k := stNum(call["index"])
			f := stM(call["function"])
			switch {
			case k == len(a.Tools):
				if call["type"] != "function" || stS(call["id"]) == "" || f["arguments"] != "" {
					t.Fatalf("first fragment of call %d: %s", k, e.data)
				}
				a.Tools = append(a.Tools, stCall{ID: stS(call["id"]), Name: stS(f["name"])})
			case k < len(a.Tools):
				if call["id"] != nil || f["name"] != nil {
					t.Fatalf("later fragment of call %d names it again: %s", k, e.data)
				}
				a.Tools[k].Args += stS(f["arguments"])
			default:
				t.Fatalf("tool call index %d skips: %s", k, e.data)
			}
		}
		if fr := stS(c["finish_reason"]); fr != "" {
			a.Stop = ChatStop(fr)
		}
	}
	if a.Stop != StopNone && !done {
		t.Fatal("a finished Chat stream ends with [DONE]")
	}
	a.Text, a.Thinking = text.String(), thinking.String()
	return a
}

func stReassembleMessages(t *testing.T, evs []stTestEvent) stAnswer {
	t.Helper()
	var a stAnswer
	type block struct {
		typ, text, thinking, sig, input, id, name string
		stopped                                   bool
	}
	var blocks []*block
	started, stopped := false, false
	for _, e := range evs {
		m := stDecode(t, e.data)
		if e.name != m["type"] {
			t.Fatalf("event %q carries type %v", e.name, m["type"])
		}
		if stopped {
			t.Fatalf("event after message_stop: %s", e.data)
		}
		if !started && e.name != "message_start" && e.name != "error" {
			t.Fatalf("%s before message_start", e.name)
		}
		idx := stNum(m["index"])
		switch e.name {
		case "message_start":
			msg := stM(m["message"])
			if started || !strings.HasPrefix(stS(msg["id"]), "msg_") || msg["role"] != "assistant" || msg["type"] != "message" || stS(msg["model"]) == "" {
				t.Fatalf("message_start: %s", e.data)
			}
			started = true
		case "content_block_start":
			if idx != len(blocks) {
				t.Fatalf("block %d started at index %d", len(blocks), idx)
			}
			cb := stM(m["content_block"])
			b := &block{typ: stS(cb["type"]), id: stS(cb["id"]), name: stS(cb["name"])}
			if b.typ == "tool_use" && (b.id == "" || b.name == "" || stM(cb["input"]) == nil) {
				t.Fatalf("tool_use start: %s", e.data)
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			if idx >= len(blocks) || blocks[idx].stopped {
				t.Fatalf("delta for block %d, not open: %s", idx, e.data)
			}
			b, d := blocks[idx], stM(m["delta"])
			want := map[string]string{"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking", "signature_delta": "thinking"}[stS(d["type"])]
			if want != b.typ {
				t.Fatalf("%v for a %s block", d["type"], b.typ)
			}
			b.text += stS(d["text"])
			b.input += stS(d["partial_json"])
			b.thinking += stS(d["thinking"])
			b.sig += stS(d["signature"])
		case "content_block_stop":
			if idx >= len(blocks) || blocks[idx].stopped {
				t.Fatalf("stop for block %d, not open", idx)
			}
			blocks[idx].stopped = true
		case "message_delta":
			d, u := stM(m["delta"]), stM(m["usage"])
			a.Stop = MessagesStop(stS(d["stop_reason"]))
			read, write := stNum(u["cache_read_input_tokens"]), stNum(u["cache_creation_input_tokens"])
			a.Usage = api.Usage{Input: stNum(u["input_tokens"]) + read + write, CacheRead: read, CacheWrite: write, Output: stNum(u["output_tokens"])}
		case "message_stop":
			stopped = true
		case "error":
			a.Err = stS(stM(m["error"])["message"])
		default:
			t.Fatalf("unknown event %q", e.name)
		}
	}
	if a.Stop != StopNone && !stopped {
		t.Fatal("message_delta without message_stop")
	}
	for _, b := range blocks {
		if !b.stopped && a.Stop != StopNone {
			t.Fatalf("block %+v never stopped", b)
		}
		switch b.typ {
		case "text":
			if b.text == "" {
				t.Fatal("an empty text block")
			}
			a.Text += b.text
		case "thinking":
			a.Thinking += b.thinking
			a.Signature += b.sig
		case "tool_use":
			if !json.Valid([]byte(b.input)) {
				t.Fatalf("tool input %q", b.input)
			}
			a.Tools = append(a.Tools, stCall{b.id, b.name, b.input})
		}
	}
	return a
}

func stReassembleResponses(t *testing.T, evs []stTestEvent) stAnswer {
	t.Helper()
	var a stAnswer
	type item struct {
		added, done map[string]any
		deltas      string
	}
	var items []*item
	var final map[string]any
	for seq, e := range evs {
		m := stDecode(t, e.data)
		if e.name != m["type"] || stNum(m["sequence_number"]) != seq || m["sequence_number"] == nil {
			t.Fatalf("event %d %q: %s", seq, e.name, e.data)
		}
		if final != nil {
			t.Fatalf("event after the terminal one: %s", e.data)
		}
		if (seq == 0) != (e.name == "response.created") && e.name != "error" {
			t.Fatalf("event %d is %s", seq, e.name)
		}
		oi := stNum(m["output_index"])
		at := func() *item {
			if oi >= len(items) || items[oi].done != nil {
				t.Fatalf("%s for item %d, not open", e.name, oi)
			}
			it := items[oi]
			if e.name != "response.output_item.done" && m["item_id"] != it.added["id"] {
				t.Fatalf("%s: item_id %v, item %v", e.name, m["item_id"], it.added["id"])
			}
			return it
		}
		switch e.name {
		case "response.created", "response.in_progress":
			r := stM(m["response"])
			if !strings.HasPrefix(stS(r["id"]), "resp_") || r["status"] != "in_progress" || r["object"] != "response" {
				t.Fatalf("%s", e.data)
			}
		case "response.output_item.added":
			if oi != len(items) {
				t.Fatalf("item %d added at %d", len(items), oi)
			}
			items = append(items, &item{added: stM(m["item"])})
		case "response.content_part.added", "response.reasoning_summary_part.added":
			at()
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
			at().deltas += stS(m["delta"])
		case "response.output_text.done", "response.reasoning_summary_text.done":
			if it := at(); it.deltas != stS(m["text"]) {
				t.Fatalf("%s says %q after deltas %q", e.name, m["text"], it.deltas)
			}
		case "response.function_call_arguments.done":
			if it := at(); it.deltas != stS(m["arguments"]) && !(it.deltas == "" && m["arguments"] == "{}") {
				t.Fatalf("%s says %q after deltas %q", e.name, m["arguments"], it.deltas)
			}
		case "response.content_part.done", "response.reasoning_summary_part.done",
			"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done":
			at()
		case "response.output_item.done":
			it := at()
			it.done = stM(m["item"])
			if it.done["id"] != it.added["id"] || it.done["type"] != it.added["type"] {
				t.Fatalf("item %d done as %v, added as %v", oi, it.done, it.added)
			}
		case "response.completed", "response.incomplete":
			final = stM(m["response"])
		case "error":
			a.Err = stS(m["message"])
		default:
			t.Fatalf("unknown event %q", e.name)
		}
	}
	tools := false
	for i, it := range items {
		if it.done == nil {
			if final != nil {
				t.Fatalf("item %d never done", i)
			}
			continue
		}
		switch it.done["type"] {
		case "message":
			content, _ := it.done["content"].([]any)
			a.Text += stS(stM(content[0])["text"])
		case "function_call":
			tools = true
			a.Tools = append(a.Tools, stCall{stS(it.done["call_id"]), stS(it.done["name"]), stS(it.done["arguments"])})
		case "reasoning":
			summary, _ := it.done["summary"].([]any)
			for _, p := range summary {
				a.Thinking += stS(stM(p)["text"])
			}
			a.Signature += stS(it.done["encrypted_content"])
		}
	}
	if final == nil {
		// cut by an error: what the client saw is in the deltas
		a.Text = ""
		for _, it := range items {
			if it.added["type"] == "message" {
				a.Text += it.deltas
			}
		}
		return a
	}
	output, _ := final["output"].([]any)
	if len(output) != len(items) {
		t.Fatalf("final output has %d items, the stream %d", len(output), len(items))
	}
	for i, o := range output {
		got, _ := json.Marshal(o)
		want, _ := json.Marshal(items[i].done)
		if string(got) != string(want) {
			t.Fatalf("final output item %d:\n%s\nstream's:\n%s", i, got, want)
		}
	}
	u := stM(final["usage"])
	a.Usage = api.Usage{Input: stNum(u["input_tokens"]), Output: stNum(u["output_tokens"]),
		CacheRead: stNum(stM(u["input_tokens_details"])["cached_tokens"])}
	a.Stop = ResponsesStop(stS(final["status"]), stS(stM(final["incomplete_details"])["reason"]), tools)
	return a
}
