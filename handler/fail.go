package handler

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The final error: when no candidate gave an answer, the client gets the
// first upstream error as it was sent (the primary's, normally), or the
// first failure as an error of the gateway's own, with every attempt listed
// when there were several.

// maxListedAttempts bounds the attempts named in an error and in
// X-LLM-Attempts.
const maxListedAttempts = 12

// fail answers when no candidate gave an answer: with the first upstream
// error (the primary's, normally) as it was sent, or the first failure as an
// error of ours, with every attempt listed when there were several.
func (g *Gateway) fail(rp *reply, failed []failure) {
	first := failed[0].a
	for _, f := range failed {
		if f.a.outcome == outcomeStatus {
			first = f.a
			break
		}
	}
	var labels []string
	if len(failed) > 1 {
		for i, f := range failed {
			if i == maxListedAttempts {
				labels = append(labels, fmt.Sprintf("… %d more", len(failed)-i))
				break
			}
			labels = append(labels, f.a.label(f.v))
		}
	}
	if first.outcome == outcomeStatus {
		g.passUpstreamError(rp, first, labels)
		return
	}
	e := first.failureError()
	if labels != nil {
		e.Message += " (attempts: " + strings.Join(labels, ", ") + ")"
	}
	if rp.preamble {
		rp.errorEvent(e)
		return
	}
	if labels != nil {
		rp.w.Header().Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	if first.outcome == outcomeBusy {
		rp.w.Header().Set("Retry-After", strconv.Itoa(int(first.busyRetryAfter()/time.Second)))
	}
	rp.firstByte(e.Status)
	e.writeAs(rp.w, rp.api)
}

// busyRetryAfter is when a request refused by an engine's max_concurrent may
// come back: the engine's estimate, else a second.
func (a *attempt) busyRetryAfter() time.Duration {
	var busy *engines.BusyError
	if errors.As(a.err, &busy) && busy.RetryAfter >= time.Second {
		return busy.RetryAfter
	}
	return time.Second
}

// passUpstreamError sends an upstream's error answer: status, headers and
// body as the upstream sent them, except that the attempts, when there were
// several, are added to the error's message.
func (g *Gateway) passUpstreamError(rp *reply, a *attempt, labels []string) {
	body := a.errBody
	if labels != nil {
		body = withAttempts(body, strings.Join(labels, ", "))
	}
	if rp.preamble {
		rp.errorEvent(&Error{a.resp.StatusCode, typeUpstream, "upstream_error", upstreamMessage(body)})
		return
	}
	h := rp.w.Header()
	copyHeader(h, a.resp.Header)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-LLM-Engine", a.c.rt.cfg.Name)
	if labels != nil {
		h.Set("X-LLM-Attempts", strings.Join(labels, ", "))
	}
	rp.firstByte(a.resp.StatusCode)
	rp.w.WriteHeader(a.resp.StatusCode)
	_, _ = rp.w.Write(body)
}

// withAttempts adds the attempt list to an OpenAI-shaped error's message.
// A body of another shape is left alone (the X-LLM-Attempts header has it).
func withAttempts(body []byte, attempts string) []byte {
	var doc map[string]any
	if json.Unmarshal(body, &doc) != nil {
		return body
	}
	note := " (attempts: " + attempts + ")"
	switch e := doc["error"].(type) {
	case map[string]any:
		msg, _ := e["message"].(string)
		e["message"] = msg + note
	case string:
		doc["error"] = e + note
	default:
		return body
	}
	out, err := json.Marshal(doc)
	if err != nil {
		return body
	}
	return out
}

// upstreamMessage is the message of an upstream's error body, or the body.
func upstreamMessage(body []byte) string {
	var doc struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &doc) == nil && len(doc.Error) > 0 {
		var e struct{ Message string }
		if json.Unmarshal(doc.Error, &e) == nil && e.Message != "" {
			return e.Message
		}
		var s string
		if json.Unmarshal(doc.Error, &s) == nil {
			return s
		}
	}
	s := strings.TrimSpace(string(body))
	if len(s) > 1000 {
		s = s[:1000] + "…"
	}
	return s
}
