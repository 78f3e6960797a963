package grammar

import (
	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// Meter reads the usage an answer reports while it is relayed: a JSON
// answer's (up to Max bytes), or a stream's usage events. It
// holds at most one event, or one answer, however long the answer.
type Meter struct {
	SSE bool
	Max int // bytes of a JSON answer scanned
	// API is the answer's, when it is known; api.Other reads the usage
	// of any of them.
	API   api.API
	buf   []byte
	usage api.Usage
	has   bool
	over  bool // the answer outgrew what is scanned
}

func (m *Meter) Write(p []byte) {
	if m.over {
		return
	}
	m.buf = append(m.buf, p...)
	for m.SSE {
		end := sse.EventEnd(m.buf)
		if end < 0 {
			break
		}
		m.event(m.buf[:end])
		m.buf = append(m.buf[:0], m.buf[end:]...)
	}
	if len(m.buf) > m.Max {
		m.over, m.buf = true, nil
	}
}

func (m *Meter) event(ev []byte) {
	if e := (Grammar{API: m.API}).Scan(ev, false); e.HasUsage {
		m.usage, m.has = m.usage.Update(e.Usage), true
	}
}

// Result is the usage the answer reported, if it did.
func (m *Meter) Result() (api.Usage, bool) {
	if !m.SSE && !m.over && len(m.buf) > 0 {
		if u, ok := AnswerUsage(m.API, m.buf); ok {
			return u, true
		}
	}
	return m.usage, m.has
}
