package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"net/http"
	"strconv"
	"strings"
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
	typeInvalidRequest = "invalid_request_error"
	typeAuthentication = "authentication_error"
	typeUpstream       = "upstream_error"
	typeUnavailable    = "service_unavailable"
	typeTimeout        = "timeout_error"
	typeRateLimit      = "rate_limit_error"
)

func errBadRequest(code, msg string) *Error {
	return &Error{http.StatusBadRequest, typeInvalidRequest, code, msg}
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

// api is the API family a request speaks: its errors, in bodies and in
// streams, take that family's shape.
type api int

const (
	apiOpenAI    api = iota
	apiAnthropic     // the Messages API: /v1/messages and /v1/messages/count_tokens
)

// apiOf is the family of a request path.
func apiOf(path string) api {
	if path == "/v1/messages" || strings.HasPrefix(path, "/v1/messages/") {
		return apiAnthropic
	}
	return apiOpenAI
}

// writeAs sends the error as the whole response, shaped for the family.
func (e *Error) writeAs(w http.ResponseWriter, family api) {
	if family != apiAnthropic {
		e.write(w)
		return
	}
	status, body := e.anthropic()
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// eventAs is the error as one in-band stream event of the family: OpenAI's
// data-only error event, or Anthropic's `event: error`.
func (e *Error) eventAs(family api) []byte {
	if family != apiAnthropic {
		return e.sseEvent()
	}
	_, body := e.anthropic()
	b := append(make([]byte, 0, len(body)+32), "event: error\ndata: "...)
	b = append(b, body...)
	return append(b, "\n\n"...)
}

// write sends the error as the whole response.
func (e *Error) write(w http.ResponseWriter) {
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

// sseEvent is the error as one SSE event, for a stream whose headers already
// went out: the client's SDK raises it instead of seeing a tidy end.
func (e *Error) sseEvent() []byte {
	b := append(make([]byte, 0, 96+len(e.Message)), "data: "...)
	return append(e.appendObject(b, true), "\n\n"...)
}
