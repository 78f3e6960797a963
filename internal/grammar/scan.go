package grammar

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// Grammar is how one stream is read: the API whose events it carries
// (Anthropic's typed events, the Responses API's, or OpenAI's chunks), how
// its answer says it is whole (the API's End) and how it reports its
// usage. api.Other reads any of them: a passthrough's answer, whose API
// the gateway does not know.
type Grammar struct {
	API api.API
}

// reads reports whether the grammar reads events of API a.
func (g Grammar) reads(a api.API) bool { return g.API == a || g.API == api.Other }

// Event is what one pass over an event tells the relay (the
// classifiers in one pass). Before this, an event was classified, then
// searched for the end of the answer, for an empty choices array, for
// Anthropic's prompt usage, and scanned again to rewrite its ids.
type Event struct {
	Kind     Kind
	Usage    api.Usage
	HasUsage bool
	// Whole: the event says the answer is whole, by the grammar's End: a
	// choice's finish_reason, a Responses event of type
	// response.completed, .incomplete or .failed, Anthropic's
	// message_stop. [DONE] is Kind Done.
	Whole bool
	// NoChoices: "choices" is an empty array: the usage chunk of
	// stream_options.include_usage
	NoChoices bool
	// Data is the event's data payload, and ID, Created, Model and
	// UsageAt where those members sit in it (for Kind Content with a JSON
	// object), so that a rewrite of a resumed stream's ids needs no second
	// scan.
	Data                        []byte
	ID, Created, Model, UsageAt jsonmember.Member
	Type, Choices               jsonmember.Member // for a resumable stream's transcript
	// Seq is a Responses event's sequence_number, when it has one
	// (HasSeq): an error the gateway adds to the stream takes the next
	Seq    int
	HasSeq bool
}

// Scan reads one event in one validating pass over its data. With probe
// (before the commit point, a handful of events) it also tells a preamble
// from content and an error event (probe: a role-only chunk, Anthropic's
// message_start, the Responses API's response.created, …). Without, every
// valid data event is content.
func (g Grammar) Scan(ev []byte, probe bool) Event { return g.scan(ev, probe, nil) }

// ScanMemo is Scan of a committed stream's event (probe false) that takes
// up the event where it starts to differ from the last one m saw (memo.go).
func (g Grammar) ScanMemo(ev []byte, m *Memo) Event { return g.scan(ev, false, m) }

func (g Grammar) scan(ev []byte, probe bool, m *Memo) (e Event) { // e named: filled where the caller has it, not copied there
	data, ok := sse.Data(ev)
	if !ok {
		return Event{Kind: Comment}
	}
	data = bytes.TrimSpace(data)
	switch {
	case string(data) == "[DONE]":
		return Event{Kind: Done}
	case len(data) == 0:
		return Event{Kind: Comment}
	case data[0] != '{':
		if end, err := jsonmember.SkipValue(data, 0, 1); err != nil || end != len(data) {
			return Event{Kind: Malformed}
		}
		return Event{Kind: Content} // valid JSON of another shape: not ours to judge
	}
	var f jsonmember.Fields
	mode := jsonmember.Answer
	if probe {
		mode = jsonmember.FirstAnswer
	}
	if err := m.scan(&f, data, mode); err != nil {
		return Event{Kind: Malformed}
	}
	e.Kind, e.Data, e.NoChoices = Content, data, f.NoChoices
	e.ID, e.Created, e.Model, e.UsageAt, e.Type, e.Choices = f.ID, f.Created, f.Model, f.Usage, f.Type, f.Choices
	if f.Usage.OK() {
		e.Usage, e.HasUsage = usageAt(g.API, data, f.Usage)
	}
	if f.Seq.OK() {
		e.Seq, e.HasSeq = jsonmember.Count(data, f.Seq.Value.Start, f.Seq.Value.End), true
	}
	typ := memberBytes(data, f.Type)
	if g.reads(api.Messages) && string(typ) == `"message_start"` && f.Message.OK() && data[f.Message.Value.Start] == '{' {
		// the prompt's usage sits in the message
		e.Usage, e.HasUsage = nestedUsage(g.API, data[f.Message.Value.Start:f.Message.Value.End])
	}
	ends := false
	switch string(typ) {
	case `"response.completed"`, `"response.incomplete"`, `"response.failed"`:
		if ends = g.reads(api.Responses); ends {
			// the answer's usage sits in the response it ends with: once
			// a stream, so a second look costs nothing per event
			if r, ok := jsonmember.LastMember(data, 0, "response"); ok && data[r.Value.Start] == '{' {
				e.Usage, e.HasUsage = nestedUsage(g.API, data[r.Value.Start:r.Value.End])
			}
		}
	case `"message_stop"`:
		ends = true
	}
	switch g.API.End() {
	case api.EndFinish:
		e.Whole = f.Finished
	case api.EndResponse, api.EndMessage:
		e.Whole = ends
	}
	if probe {
		e.Kind = g.probe(data, &f, typ)
	}
	return e
}

// nestedUsage is the usage in an object an event holds: Anthropic's
// message_start message, the Responses API's final response; a function of
// its own, so that its Fields takes stack room only while it runs
// (jsonmember.Fields.Scan).
//
//go:noinline
func nestedUsage(a api.API, msg []byte) (api.Usage, bool) {
	var f jsonmember.Fields
	if err := f.Scan(msg, jsonmember.Answer); err != nil {
		return api.Usage{}, false
	}
	return usageAt(a, msg, f.Usage)
}

// probe is what an object event is before the commit point: first content
// means content in every grammar (issue 56), the first text, tool call or
// reasoning; what each API says before it announces the answer and is
// held, so that a stream whose first token is late can still be hedged,
// failed over and cut by first_token_timeout, whatever the client's API:
//
//	Chat       a chunk whose choices name a role and say nothing
//	Messages   message_start, ping, content_block_start and _stop
//	Responses  response.created, .queued, .in_progress,
//	           .output_item.added, .content_part.added,
//	           .reasoning_summary_part.added
//
// An error before content is an error event: Chat's {"error": …},
// Messages' and Responses' `error`, and response.failed. Anything else is
// content (an event type yet to come included: committing early is the
// old behaviour, holding it back forever is not).
func (g Grammar) probe(data []byte, f *jsonmember.Fields, typ []byte) Kind {
	if g.API == api.Responses || g.API == api.Other && bytes.HasPrefix(typ, []byte(`"response.`)) {
		return probeResponses(typ)
	}
	if g.API == api.Messages {
		switch string(typ) {
		case `"message_start"`, `"ping"`, `"content_block_start"`, `"content_block_stop"`:
			return Preamble
		case `"error"`:
			return ErrorEvent
		}
		return Content
	}
	if f.Error.OK() && string(memberBytes(data, f.Error)) != "null" {
		return ErrorEvent
	}
	// only a chunk whose choices name a role and say nothing is role-only;
	// no choices, or an empty array (a usage chunk ends an answer), is content
	if f.Role && !f.Said && !f.NoChoices {
		return Preamble
	}
	return Content
}

// probeResponses is what a Responses event is before the commit point, by
// its type (the raw JSON string).
func probeResponses(typ []byte) Kind {
	switch string(typ) {
	case `"response.created"`, `"response.queued"`, `"response.in_progress"`, `"response.output_item.added"`,
		`"response.content_part.added"`, `"response.reasoning_summary_part.added"`:
		return Preamble
	case `"error"`, `"response.failed"`:
		return ErrorEvent
	}
	return Content
}

// memberBytes is a member's raw value, nil when absent.
func memberBytes(data []byte, m jsonmember.Member) []byte {
	if !m.OK() {
		return nil
	}
	return data[m.Value.Start:m.Value.End]
}
