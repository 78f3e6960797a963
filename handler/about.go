package handler

import (
	"bytes"
	"encoding/json"
	"sort"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// appendAbout appends an engine's words for people to one model object of
// /v1/models, as llama-swap lists them: "name", "description" and
// "metadata" (its values as configured, by name in order).
func appendAbout(b []byte, a *engines.About) []byte {
	if a == nil {
		return b
	}
	if a.DisplayName != "" {
		b = append(b, `,"name":`...)
		b = jsonmember.AppendString(b, a.DisplayName)
	}
	if a.Description != "" {
		b = append(b, `,"description":`...)
		b = jsonmember.AppendString(b, a.Description)
	}
	if len(a.Metadata) == 0 {
		return b
	}
	names := make([]string, 0, len(a.Metadata))
	for n := range a.Metadata {
		names = append(names, n)
	}
	sort.Strings(names)
	b = append(b, `,"metadata":{`...)
	for i, n := range names {
		if i > 0 {
			b = append(b, ',')
		}
		b = jsonmember.AppendString(b, n)
		b = append(b, ':')
		b = appendCompact(b, a.Metadata[n])
	}
	return append(b, '}')
}

// appendCompact appends a JSON value without its insignificant spaces; one
// that is not JSON (Caddy's JSON loading checks it, so never) as null.
func appendCompact(b []byte, v json.RawMessage) []byte {
	n := len(b)
	buf := bytes.NewBuffer(b)
	if err := json.Compact(buf, v); err != nil {
		return append(b[:n], "null"...)
	}
	return buf.Bytes()
}
