package translatetest

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/translate"
)

// The reassemblers read a client's stream as its SDK's accumulator does,
// and fail on what that accumulator rejects: chunks of another id, tool
// call indexes that skip, blocks started out of order, deltas for a block
// that is not open, sequence numbers that do not rise.

func reassembleChat(t *testing.T, evs []Event) Answer {
	t.Helper()
	var a Answer
	var text, thinking strings.Builder
	id := ""
	done := false
	for i, e := range evs {
		if done {
			t.Fatalf("event after [DONE]: %s", e.Data)
		}
		if e.Name != "" {
			t.Fatalf("a Chat stream has no event names: %q", e.Name)
		}
		if e.Data == "[DONE]" {
			done = true
			continue
		}
		m := Decode(t, e.Data)
		if errv, ok := m["error"]; ok {
			a.Err = Str(Obj(errv)["message"])
			continue
		}
		if id == "" {
			id = Str(m["id"])
		}
		if m["id"] != id || !strings.HasPrefix(id, "chatcmpl-") || m["object"] != "chat.completion.chunk" || Num(m["created"]) == 0 || Str(m["model"]) == "" {
			t.Fatalf("chunk %d: bad head: %s", i, e.Data)
		}
		choices, _ := m["choices"].([]any)
		if len(choices) == 0 {
			u := Obj(m["usage"])
			a.Usage = api.Usage{Input: Num(u["prompt_tokens"]), Output: Num(u["completion_tokens"]),
				CacheRead: Num(Obj(u["prompt_tokens_details"])["cached_tokens"])}
			continue
		}
		c := Obj(choices[0])
		d := Obj(c["delta"])
		if i == 0 && (d["role"] != "assistant" || d["content"] != "") {
			t.Fatalf("first chunk: %s", e.Data)
		}
		text.WriteString(Str(d["content"]))
		thinking.WriteString(Str(d["reasoning_content"]))
		calls, _ := d["tool_calls"].([]any)
		for _, call := range calls {
			call := Obj(call)
			k := Num(call["index"])
			f := Obj(call["function"])
			switch {
			case k == len(a.Tools):
				if call["type"] != "function" || Str(call["id"]) == "" || f["arguments"] != "" {
					t.Fatalf("first fragment of call %d: %s", k, e.Data)
				}
				a.Tools = append(a.Tools, Call{ID: Str(call["id"]), Name: Str(f["name"])})
			case k < len(a.Tools):
				if call["id"] != nil || f["name"] != nil {
					t.Fatalf("later fragment of call %d names it again: %s", k, e.Data)
				}
				a.Tools[k].Args += Str(f["arguments"])
			default:
				t.Fatalf("tool call index %d skips: %s", k, e.Data)
			}
		}
		if fr := Str(c["finish_reason"]); fr != "" {
			a.Stop = translate.ChatStop(fr)
		}
	}
	if a.Stop != translate.StopNone && !done {
		t.Fatal("a finished Chat stream ends with [DONE]")
	}
	a.Text, a.Thinking = text.String(), thinking.String()
	return a
}

func reassembleMessages(t *testing.T, evs []Event) Answer {
	t.Helper()
	var a Answer
	type block struct {
		typ, text, thinking, sig, input, id, name string
		stopped                                   bool
	}
	var blocks []*block
	started, stopped := false, false
	for _, e := range evs {
		m := Decode(t, e.Data)
		if e.Name != m["type"] {
			t.Fatalf("event %q carries type %v", e.Name, m["type"])
		}
		if stopped {
			t.Fatalf("event after message_stop: %s", e.Data)
		}
		if !started && e.Name != "message_start" && e.Name != "error" {
			t.Fatalf("%s before message_start", e.Name)
		}
		idx := Num(m["index"])
		switch e.Name {
		case "message_start":
			msg := Obj(m["message"])
			if started || !strings.HasPrefix(Str(msg["id"]), "msg_") || msg["role"] != "assistant" || msg["type"] != "message" || Str(msg["model"]) == "" {
				t.Fatalf("message_start: %s", e.Data)
			}
			started = true
		case "content_block_start":
			if idx != len(blocks) {
				t.Fatalf("block %d started at index %d", len(blocks), idx)
			}
			cb := Obj(m["content_block"])
			b := &block{typ: Str(cb["type"]), id: Str(cb["id"]), name: Str(cb["name"])}
			if b.typ == "tool_use" && (b.id == "" || b.name == "" || Obj(cb["input"]) == nil) {
				t.Fatalf("tool_use start: %s", e.Data)
			}
			blocks = append(blocks, b)
		case "content_block_delta":
			if idx >= len(blocks) || blocks[idx].stopped {
				t.Fatalf("delta for block %d, not open: %s", idx, e.Data)
			}
			b, d := blocks[idx], Obj(m["delta"])
			want := map[string]string{"text_delta": "text", "input_json_delta": "tool_use", "thinking_delta": "thinking", "signature_delta": "thinking"}[Str(d["type"])]
			if want != b.typ {
				t.Fatalf("%v for a %s block", d["type"], b.typ)
			}
			b.text += Str(d["text"])
			b.input += Str(d["partial_json"])
			b.thinking += Str(d["thinking"])
			b.sig += Str(d["signature"])
		case "content_block_stop":
			if idx >= len(blocks) || blocks[idx].stopped {
				t.Fatalf("stop for block %d, not open", idx)
			}
			blocks[idx].stopped = true
		case "message_delta":
			d, u := Obj(m["delta"]), Obj(m["usage"])
			a.Stop = translate.MessagesStop(Str(d["stop_reason"]))
			read, write := Num(u["cache_read_input_tokens"]), Num(u["cache_creation_input_tokens"])
			a.Usage = api.Usage{Input: Num(u["input_tokens"]) + read + write, CacheRead: read, CacheWrite: write, Output: Num(u["output_tokens"])}
		case "message_stop":
			stopped = true
		case "error":
			a.Err = Str(Obj(m["error"])["message"])
		default:
			t.Fatalf("unknown event %q", e.Name)
		}
	}
	if a.Stop != translate.StopNone && !stopped {
		t.Fatal("message_delta without message_stop")
	}
	for _, b := range blocks {
		if !b.stopped && a.Stop != translate.StopNone {
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
			a.Tools = append(a.Tools, Call{b.id, b.name, b.input})
		}
	}
	return a
}

func reassembleResponses(t *testing.T, evs []Event) Answer {
	t.Helper()
	var a Answer
	type item struct {
		added, done map[string]any
		deltas      string
	}
	var items []*item
	var final map[string]any
	for seq, e := range evs {
		m := Decode(t, e.Data)
		if e.Name != m["type"] || Num(m["sequence_number"]) != seq || m["sequence_number"] == nil {
			t.Fatalf("event %d %q: %s", seq, e.Name, e.Data)
		}
		if final != nil {
			t.Fatalf("event after the terminal one: %s", e.Data)
		}
		if (seq == 0) != (e.Name == "response.created") && e.Name != "error" {
			t.Fatalf("event %d is %s", seq, e.Name)
		}
		oi := Num(m["output_index"])
		at := func() *item {
			if oi >= len(items) || items[oi].done != nil {
				t.Fatalf("%s for item %d, not open", e.Name, oi)
			}
			it := items[oi]
			if e.Name != "response.output_item.done" && m["item_id"] != it.added["id"] {
				t.Fatalf("%s: item_id %v, item %v", e.Name, m["item_id"], it.added["id"])
			}
			return it
		}
		switch e.Name {
		case "response.created", "response.in_progress":
			r := Obj(m["response"])
			if !strings.HasPrefix(Str(r["id"]), "resp_") || r["status"] != "in_progress" || r["object"] != "response" {
				t.Fatalf("%s", e.Data)
			}
		case "response.output_item.added":
			if oi != len(items) {
				t.Fatalf("item %d added at %d", len(items), oi)
			}
			items = append(items, &item{added: Obj(m["item"])})
		case "response.content_part.added", "response.reasoning_summary_part.added":
			at()
		case "response.output_text.delta", "response.function_call_arguments.delta", "response.reasoning_summary_text.delta":
			at().deltas += Str(m["delta"])
		case "response.output_text.done", "response.reasoning_summary_text.done":
			if it := at(); it.deltas != Str(m["text"]) {
				t.Fatalf("%s says %q after deltas %q", e.Name, m["text"], it.deltas)
			}
		case "response.function_call_arguments.done":
			if it := at(); it.deltas != Str(m["arguments"]) && !(it.deltas == "" && m["arguments"] == "{}") {
				t.Fatalf("%s says %q after deltas %q", e.Name, m["arguments"], it.deltas)
			}
		case "response.content_part.done", "response.reasoning_summary_part.done",
			"response.custom_tool_call_input.delta", "response.custom_tool_call_input.done":
			at()
		case "response.output_item.done":
			it := at()
			it.done = Obj(m["item"])
			if it.done["id"] != it.added["id"] || it.done["type"] != it.added["type"] {
				t.Fatalf("item %d done as %v, added as %v", oi, it.done, it.added)
			}
		case "response.completed", "response.incomplete":
			final = Obj(m["response"])
		case "error":
			a.Err = Str(m["message"])
		default:
			t.Fatalf("unknown event %q", e.Name)
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
			a.Text += Str(Obj(content[0])["text"])
		case "function_call":
			tools = true
			a.Tools = append(a.Tools, Call{Str(it.done["call_id"]), Str(it.done["name"]), Str(it.done["arguments"])})
		case "reasoning":
			summary, _ := it.done["summary"].([]any)
			for _, p := range summary {
				a.Thinking += Str(Obj(p)["text"])
			}
			a.Signature += Str(it.done["encrypted_content"])
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
	u := Obj(final["usage"])
	a.Usage = api.Usage{Input: Num(u["input_tokens"]), Output: Num(u["output_tokens"]),
		CacheRead: Num(Obj(u["input_tokens_details"])["cached_tokens"])}
	a.Stop = translate.ResponsesStop(Str(final["status"]), Str(Obj(final["incomplete_details"])["reason"]), tools)
	return a
}
