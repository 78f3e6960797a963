package translate

import (
	"bytes"
	"encoding/json"
	"html"
	"net/http"
	"regexp"
	"strings"
	"unicode/utf8"

	"github.com/llmgateway/caddy-llm-gateway/api"
)

// ErrorBody reshapes an engine's error answer (any status >= 400, any body:
// JSON of either family, or plain text or HTML) into the client's API's
// error shape, keeping its message: OpenAI's
// {"error":{"message","type","param","code"}} for Chat and Responses,
// Anthropic's {"type":"error","error":{"type","message"}} for Messages. The
// SDKs raise their error class by status; the type is the one each family
// sends for that status:
//
//	status     Messages error.type     OpenAI error.type (code)
//	400        invalid_request_error   invalid_request_error
//	401        authentication_error    authentication_error (invalid_api_key)
//	403        permission_error        permission_error
//	404        not_found_error         invalid_request_error
//	413        request_too_large       invalid_request_error
//	429        rate_limit_error        rate_limit_error (rate_limit_exceeded)
//	other 4xx  invalid_request_error   invalid_request_error
//	500, 5xx   api_error               server_error
//	503, 529   overloaded_error        server_error (server_is_overloaded)
//
// OpenAI's own 429s say "requests" or "tokens" as their type and
// rate_limit_exceeded as their code; the code is what its clients match,
// and the type is the one the gateway's own errors use. Between Chat and
// Responses an OpenAI-shaped body is kept as it is (its type, param and
// code are already the family's). The message kept is at most about a
// kilobyte: an HTML error page is cut to its title or text. An API's codec
// may read its errors first (Codec.ReadError): a Gemini engine's error
// ({"error":{"code","message","status"}}, alone or in a one-element array)
// takes its type from its status word (RESOURCE_EXHAUSTED: 429,
// UNAVAILABLE: 503…) rather than from the HTTP status. from == to
// returns body unchanged.
func ErrorBody(from, to api.API, status int, body []byte) []byte {
	if from == to {
		return body
	}
	if c := codecOf(from); c != nil && c.ReadError != nil {
		status, body = c.ReadError(status, body)
	}
	msg, openAI := errorText(body)
	if to.Errors() != api.AnthropicErrors {
		if openAI {
			return body
		}
		typ, code := OpenAIErrorType(status)
		out := struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
				Code    *string `json:"code"`
			} `json:"error"`
		}{}
		out.Error.Message, out.Error.Type = messageOr(msg, status), typ
		if code != "" {
			out.Error.Code = &code
		}
		b, _ := Marshal(out)
		return b
	}
	out := struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}{Type: "error"}
	out.Error.Type, out.Error.Message = anthropicErrorType(status), messageOr(msg, status)
	b, _ := Marshal(out)
	return b
}

// anthropicErrorType is Anthropic's error type for an HTTP status.
func anthropicErrorType(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	}
	if status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

// OpenAIErrorType is OpenAI's error type and code ("" for null) for an HTTP
// status.
func OpenAIErrorType(status int) (typ, code string) {
	switch status {
	case http.StatusUnauthorized:
		return "authentication_error", "invalid_api_key"
	case http.StatusForbidden:
		return "permission_error", ""
	case http.StatusTooManyRequests:
		return "rate_limit_error", "rate_limit_exceeded"
	case http.StatusServiceUnavailable, 529:
		return "server_error", "server_is_overloaded"
	}
	if status >= 500 {
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

// errorText is the message of an error body, and whether the body is
// already OpenAI's shape ({"error":{"message":"…"}}). Besides both
// families' shapes it reads the ones OpenAI-compatible servers use
// ({"error":"…"}, vLLM's {"object":"error","message":…}, FastAPI's
// {"detail":…}); any other body is text, an HTML page's title or text.
func errorText(body []byte) (msg string, openAI bool) {
	t := bytes.TrimSpace(body)
	if len(t) > 0 && t[0] == '{' {
		var e struct {
			Type    string          `json:"type"` // "error": Anthropic's
			Error   json.RawMessage `json:"error"`
			Message json.RawMessage `json:"message"`
			Detail  json.RawMessage `json:"detail"`
		}
		if json.Unmarshal(t, &e) == nil {
			var o struct {
				Message *string `json:"message"`
				Status  *string `json:"status"` // Google's: its code is a number and it has no type
			}
			if len(e.Error) > 0 && e.Error[0] == '{' && json.Unmarshal(e.Error, &o) == nil && o.Message != nil {
				return boundMessage(*o.Message), e.Type != "error" && o.Status == nil
			}
			for _, m := range []json.RawMessage{e.Error, e.Message, e.Detail} {
				if s := ErrorMessage(m); s != "" {
					return s, false
				}
				if len(m) > 0 && m[0] != 'n' { // FastAPI's detail list, some other value: said as JSON
					var b bytes.Buffer
					if json.Compact(&b, m) == nil && b.String() != `""` && b.String() != "{}" {
						return boundMessage(b.String()), false
					}
				}
			}
		}
	}
	if looksHTML(t) {
		return htmlText(t), false
	}
	return boundMessage(strings.ToValidUTF8(string(t), "\uFFFD")), false
}

// messageOr is msg, or, for an engine that said nothing, its status.
func messageOr(msg string, status int) string {
	if strings.TrimSpace(msg) != "" {
		return msg
	}
	if t := http.StatusText(status); t != "" {
		return "engine answered " + http.StatusText(status)
	}
	return "engine answered an error"
}

// looksHTML says whether a body is an HTML page: it starts with a tag
// and names one of a page's own in its first bytes.
func looksHTML(b []byte) bool {
	if !bytes.HasPrefix(b, []byte("<")) {
		return false
	}
	head := bytes.ToLower(b[:min(len(b), 512)])
	for _, tag := range []string{"<html", "<!doctype", "<head", "<body", "<title"} {
		if bytes.Contains(head, []byte(tag)) {
			return true
		}
	}
	return false
}

var (
	anTitle = regexp.MustCompile(`(?is)<title[^>]*>(.*?)</title>`)
	anH1    = regexp.MustCompile(`(?is)<h1[^>]*>(.*?)</h1>`)
	anNoise = regexp.MustCompile(`(?is)<(script|style|head)[^>]*>.*?</(script|style|head)>`)
	anTag   = regexp.MustCompile(`(?s)<[^>]*>`)
	anSpace = regexp.MustCompile(`\s+`)
)

// htmlText is what an HTML error page (a proxy's, a load balancer's)
// says in a line: its title (nginx: "502 Bad Gateway"), its first heading,
// or its text. Only the page's first 64 KB are read: the point is one
// line, not the page.
func htmlText(b []byte) string {
	b = b[:min(len(b), 64<<10)]
	plain := func(s []byte) string {
		t := anTag.ReplaceAll(s, []byte(" "))
		return strings.TrimSpace(anSpace.ReplaceAllString(html.UnescapeString(string(t)), " "))
	}
	for _, re := range []*regexp.Regexp{anTitle, anH1} {
		if m := re.FindSubmatch(b); m != nil {
			if s := plain(m[1]); s != "" {
				return boundMessage(s)
			}
		}
	}
	return boundMessage(plain(anNoise.ReplaceAll(b, nil)))
}

// maxErrorMessage bounds the message an error keeps: enough for any API's
// message, and not an engine's whole page in the client's logs.
const maxErrorMessage = 1024

// boundMessage is s cut to maxErrorMessage bytes at a rune boundary, with an
// ellipsis when it was cut.
func boundMessage(s string) string {
	s = strings.TrimSpace(s)
	if len(s) <= maxErrorMessage {
		return s
	}
	cut := maxErrorMessage
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return strings.ToValidUTF8(s[:cut], "\uFFFD") + "…"
}
