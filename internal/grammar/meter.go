package grammar

import (
	"bytes"

	"github.com/llmgateway/caddy-llm-gateway/internal/sse"
)

// Meter reads the usage an answer reports while it is relayed: a JSON
// answer's (up to Max bytes), or a stream's usage events. It
// holds at most one event, or one answer, however long the answer.
type Meter struct {
	SSE   bool
	Max   int // bytes of a JSON answer scanned
	buf   []byte
	usage Usage
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
	if u, ok := MessageStartUsage(ev); ok {
		m.usage, m.has = m.usage.Update(u), true
		return
	}
	if data, ok := sse.Data(ev); ok {
		if u, ok := UsageOf(bytes.TrimSpace(data)); ok {
			m.usage, m.has = m.usage.Update(u), true
		}
	}
}

// Result is the usage the answer reported, if it did.
func (m *Meter) Result() (Usage, bool) {
	if !m.SSE && !m.over && len(m.buf) > 0 {
		if u, ok := UsageOf(m.buf); ok {
			return u, true
		}
	}
	return m.usage, m.has
}
