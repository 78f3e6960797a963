package handler

import (
	"bytes"
	"encoding/json"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// maxTranscript bounds the text kept per stream; beyond it a stream is no
// longer resumable (and the memory is given back).
const maxTranscript = 256 << 10

// transcript is what a resumable stream has sent so far.
type transcript struct {
	text    []byte
	id      json.RawMessage // of the chunks already sent
	created json.RawMessage
	off     bool            // tool calls, several choices, too long: not resumable
	gram    grammar.Grammar // the stream's grammar
	// resumable: a fallback may continue the stream; else only its trace
	// keeps its text (trace_content)
	resumable bool
}

// add records one event that went to the client.
func (t *transcript) add(ev []byte) {
	if t == nil || t.off {
		return
	}
	e := t.gram.Scan(ev, false)
	t.addScanned(&e)
}

// addScanned records one event from what its scan (grammar.Scan) found,
// reading the members it needs where the scan found them: no decoding, no
// allocation but the text's growth (this runs for every event of
// a resumable stream).
func (t *transcript) addScanned(e *grammar.Event) {
	if t == nil || t.off || e.Kind != grammar.Content || len(e.Data) == 0 || e.Data[0] != '{' {
		return
	}
	data := e.Data
	if t.gram.API == api.Messages {
		t.addAnthropic(data, e)
		return
	}
	if t.id == nil && e.ID.OK() {
		t.id = json.RawMessage(bytes.Clone(e.ID.Raw(data)))
		if e.Created.OK() {
			t.created = json.RawMessage(bytes.Clone(e.Created.Raw(data)))
		}
	}
	var ok bool
	if t.text, ok = grammar.AppendChoiceText(t.text, data, e.Choices); !ok {
		t.stop()
		return
	}
	if len(t.text) > maxTranscript {
		t.stop()
	}
}

// preamble reports whether an event of a continuation is one the client
// already has: OpenAI's role chunk, Anthropic's message_start,
// content_block_start and ping.
func (t *transcript) preamble(ev []byte) bool {
	g := grammar.Grammar{API: t.gram.API}
	return g.Scan(ev, true).Kind == grammar.Preamble
}

func (t *transcript) stop() {
	t.off, t.text = true, nil
}

// addAll records every event in a run of events.
func (t *transcript) addAll(events []byte) {
	for len(events) > 0 && t != nil && !t.off {
		n := sse.EventEnd(events)
		if n < 0 {
			n = len(events)
		}
		t.add(events[:n])
		events = events[n:]
	}
}
