package handler

import (
	"mime"
	"net/http"
	"strings"
)

// What an answer's Content-Type says it is: the relay reads an event stream
// event by event and a JSON answer whole, and translation does the same.

// isEventStream reports whether a Content-Type is an event stream.
func isEventStream(ct string) bool {
	if ct == "" {
		return false
	}
	if strings.HasPrefix(ct, "text/event-stream") && (len(ct) == len("text/event-stream") || ct[len("text/event-stream")] == ';') {
		return true
	}
	if strings.HasPrefix(ct, "application/") {
		return false // a JSON answer, parsed no further (a map and a string each)
	}
	mt, _, err := mime.ParseMediaType(ct)
	return err == nil && mt == "text/event-stream"
}

// isJSON reports whether a response's Content-Type is JSON.
func isJSON(h http.Header) bool {
	ct := h.Get("Content-Type")
	return strings.HasPrefix(ct, "application/json")
}
