// Package apierror is the gateway's own answers: errors shaped as OpenAI's
// and Anthropic's APIs shape theirs, in bodies and in streams.
package apierror

import (
	"net/http"
	"strconv"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Error is an answer the gateway makes itself, shaped as OpenAI's errors are
// so that every SDK surfaces its message:
//
//	{"error":{"message":"…","type":"…","code":"…"}}
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
}

func (e *Error) Error() string { return e.Message }

// The error types OpenAI's SDKs know, plus ours for upstream trouble.
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypeUpstream       = "upstream_error"
	TypeUnavailable    = "service_unavailable"
	TypeTimeout        = "timeout_error"
	TypeRateLimit      = "rate_limit_error"
)

func BadRequest(code, msg string) *Error {
	return &Error{http.StatusBadRequest, TypeInvalidRequest, code, msg}
}

// JSON returns the error's OpenAI-shaped body.
func (e *Error) JSON() []byte {
	return append(e.appendObject(make([]byte, 0, 64+len(e.Message)), false), '\n')
}

// appendObject appends {"error":{…}}, with the status inside when the
// error travels in a stream (whose HTTP status went out long ago).
func (e *Error) appendObject(b []byte, withStatus bool) []byte {
	b = append(b, `{"error":{"message":`...)
	b = jsonmember.AppendString(b, e.Message)
	b = append(b, `,"type":`...)
	b = jsonmember.AppendString(b, e.Type)
	b = append(b, `,"code":`...)
	b = jsonmember.AppendString(b, e.Code)
	if withStatus {
		b = append(b, `,"status":`...)
		b = strconv.AppendInt(b, int64(e.Status), 10)
	}
	return append(b, "}}"...)
}

// WriteAs sends the error as the whole response, in the shape the
// clients of API a read errors in.
func (e *Error) WriteAs(w http.ResponseWriter, a api.API) {
	if a.Errors() != api.AnthropicErrors {
		e.Write(w)
		return
	}
	status, body := e.Anthropic()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// EventAs is the error as the in-band stream events of API a's clients,
// for a stream whose status went out long ago: OpenAI's data-only error
// chunk, Anthropic's `event: error`, or the Responses API's `event: error`
// followed by `response.failed` (seq is the sequence_number the stream's
// next event has: a Responses client's events are numbered).
func (e *Error) EventAs(a api.API, seq int) []byte {
	switch a.Errors() {
	case api.AnthropicErrors:
		_, body := e.Anthropic()
		b := append(make([]byte, 0, len(body)+32), "event: error\ndata: "...)
		b = append(b, body...)
		return append(b, "\n\n"...)
	case api.ResponsesErrors:
		return e.responsesEvents(seq)
	}
	return e.SSEEvent()
}

// responsesEvents is the error as a Responses stream says one: an error
// event, which the SDKs surface as their error event type, then the
// terminal response.failed with the error in its response, which is what
// Codex reads and prints; no response.completed follows.
func (e *Error) responsesEvents(seq int) []byte {
	b := make([]byte, 0, 256+2*len(e.Message))
	b = append(b, "event: error\ndata: {\"type\":\"error\",\"code\":"...)
	b = jsonmember.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = jsonmember.AppendString(b, e.Message)
	b = append(b, `,"param":null,"sequence_number":`...)
	b = strconv.AppendInt(b, int64(seq), 10)
	b = append(b, "}\n\nevent: response.failed\ndata: {\"type\":\"response.failed\",\"sequence_number\":"...)
	b = strconv.AppendInt(b, int64(seq+1), 10)
	b = append(b, `,"response":{"object":"response","status":"failed","error":{"code":`...)
	b = jsonmember.AppendString(b, e.Code)
	b = append(b, `,"message":`...)
	b = jsonmember.AppendString(b, e.Message)
	return append(b, "},\"output\":[]}}\n\n"...)
}

// Write sends the error as the whole response.
func (e *Error) Write(w http.ResponseWriter) {
	body := e.JSON()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	if e.Status == http.StatusUnauthorized {
		h.Set("WWW-Authenticate", `Bearer realm="llm_gateway"`)
	}
	w.WriteHeader(e.Status)
	_, _ = w.Write(body)
}

// SSEEvent is the error as one SSE event, for a stream whose headers already
// went out: the client's SDK raises it instead of seeing a tidy end.
func (e *Error) SSEEvent() []byte {
	b := append(make([]byte, 0, 96+len(e.Message)), "data: "...)
	return append(e.appendObject(b, true), "\n\n"...)
}

// Anthropic is the error as the Messages API says it, so Anthropic's SDKs
// raise it with its type: {"type":"error","error":{"type":…,"message":…}}.
// The status is Anthropic's for the same trouble: 529 overloaded_error where
// the gateway itself has no engine to offer (its 503s).
func (e *Error) Anthropic() (int, []byte) {
	status, typ := e.Status, "api_error"
	switch {
	case e.Status == http.StatusBadRequest, e.Status == http.StatusMethodNotAllowed, e.Status == http.StatusUnprocessableEntity:
		typ = "invalid_request_error"
	case e.Status == http.StatusUnauthorized:
		typ = "authentication_error"
	case e.Status == http.StatusForbidden:
		typ = "permission_error"
	case e.Status == http.StatusNotFound:
		typ = "not_found_error"
	case e.Status == http.StatusRequestEntityTooLarge:
		typ = "request_too_large"
	case e.Status == http.StatusTooManyRequests:
		typ = "rate_limit_error"
	case e.Status == http.StatusServiceUnavailable:
		status, typ = 529, "overloaded_error"
	}
	b := append(make([]byte, 0, 96+len(e.Message)), `{"type":"error","error":{"type":`...)
	b = jsonmember.AppendString(b, typ)
	b = append(b, `,"message":`...)
	b = jsonmember.AppendString(b, e.Message)
	return status, append(b, "}}"...)
}
