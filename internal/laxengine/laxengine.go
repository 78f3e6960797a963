// Package laxengine is an OpenAI-shaped model server that reads requests
// the way the laxest real engines do, for tests of the gateway's door:
// it knows nothing of the gateway, and runs what it reads.
//
//   - the body: the first JSON value, whatever the Content-Type (ollama's
//     OpenAI layer binds with json.NewDecoder), after a byte order mark is
//     dropped and UTF-16 decoded (Python's json.loads detects both); a form
//     when no JSON value starts it;
//   - numbers: max_tokens, max_completion_tokens, max_output_tokens, n and
//     best_of as pydantic's lax int (5000, 5e3, 5000.0, "5000"); llama-
//     server's n_predict over max_tokens (-1: no end), vLLM's min_tokens,
//     ignore_eos;
//   - stream: pydantic's lax bool (true, 1, "true", "1", "yes", "on", …).
//
// Every answer generates the token limit (default 905) for each choice, and
// reports it as usage when asked (non-streamed always; streamed with
// stream_options.include_usage). Ran records what it ran.
package laxengine

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"mime/multipart"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"
)

// DefaultTokens is what an answer generates per choice without a limit,
// and ContextTokens what one without an end does (n_predict -1, or
// ignore_eos without a limit): the end of its context.
const (
	DefaultTokens = 905
	ContextTokens = 32768
)

// Run is one request the engine ran.
type Run struct {
	Model  string
	Tokens int64 // completion tokens generated, all choices
	Stream bool
}

// Engine is the server's handler and what it ran.
type Engine struct {
	mu  sync.Mutex
	ran []Run
}

// Ran returns what the engine ran so far.
func (e *Engine) Ran() []Run {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Run(nil), e.ran...)
}

// Tokens is what the engine generated in all.
func (e *Engine) Tokens() (n int64) {
	for _, r := range e.Ran() {
		n += r.Tokens
	}
	return n
}

func (e *Engine) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodGet {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[]}`)
		return
	}
	b, _ := io.ReadAll(r.Body)
	m := decode(b, r.Header.Get("Content-Type"))
	if m == nil {
		http.Error(w, `{"error":{"message":"unreadable body"}}`, http.StatusUnprocessableEntity)
		return
	}
	model, _ := m["model"].(string)
	limit := int64(DefaultTokens)
	for _, k := range []string{"max_tokens", "max_completion_tokens", "max_output_tokens", "n_predict"} {
		if n, ok := Int(m[k]); ok {
			limit = n // llama-server's n_predict overrides max_tokens
		}
	}
	if n, ok := Int(m["min_tokens"]); ok && n > limit {
		limit = n
	}
	_, named := m["max_tokens"]
	if limit < 0 || Bool(m["ignore_eos"]) && !named {
		limit = ContextTokens // generated to the end of the context
	}
	choices := int64(1)
	for _, k := range []string{"n", "best_of"} {
		if n, ok := Int(m[k]); ok && n > choices {
			choices = n
		}
	}
	stream := Bool(m["stream"])
	run := Run{Model: model, Tokens: limit * choices, Stream: stream}
	e.mu.Lock()
	e.ran = append(e.ran, run)
	e.mu.Unlock()
	usage := fmt.Sprintf(`{"prompt_tokens":0,"completion_tokens":%d,"total_tokens":%d}`, run.Tokens, run.Tokens)
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"from %s"}}],"usage":%s}`, model, model, usage)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"from %s\"},\"finish_reason\":null}]}\n\n", model, model)
	fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", model)
	if so, _ := m["stream_options"].(map[string]any); so != nil && so["include_usage"] == true {
		fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"model\":%q,\"choices\":[],\"usage\":%s}\n\n", model, usage)
	}
	io.WriteString(w, "data: [DONE]\n\n")
}

// decode reads the body's first JSON value as ollama does, after Python's
// encoding detection, or else the form it is.
func decode(b []byte, contentType string) map[string]any {
	b = bytes.TrimPrefix(b, []byte{0xEF, 0xBB, 0xBF})
	b = fromUTF16(b)
	var m map[string]any
	if json.NewDecoder(bytes.NewReader(b)).Decode(&m) == nil {
		return m
	}
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return nil
	}
	form, err := multipart.NewReader(bytes.NewReader(b), params["boundary"]).ReadForm(64 << 20)
	if err != nil {
		return nil
	}
	m = map[string]any{}
	for k, vs := range form.Value {
		m[k] = vs[0]
	}
	return m
}

// fromUTF16 is b decoded when it is UTF-16 (a BOM, or a NUL in its first
// two bytes, as RFC 4627 tells them apart), else b.
func fromUTF16(b []byte) []byte {
	var be bool
	switch {
	case bytes.HasPrefix(b, []byte{0xFE, 0xFF}):
		b, be = b[2:], true
	case bytes.HasPrefix(b, []byte{0xFF, 0xFE}):
		b = b[2:]
	case len(b) >= 2 && b[0] == 0:
		be = true
	case len(b) >= 2 && b[1] == 0:
	default:
		return b
	}
	u := make([]uint16, len(b)/2)
	for i := range u {
		if be {
			u[i] = uint16(b[2*i])<<8 | uint16(b[2*i+1])
		} else {
			u[i] = uint16(b[2*i+1])<<8 | uint16(b[2*i])
		}
	}
	return []byte(string(utf16.Decode(u)))
}

// Int is pydantic's lax int of a decoded JSON value.
func Int(v any) (int64, bool) {
	switch x := v.(type) {
	case float64:
		if x == float64(int64(x)) {
			return int64(x), true
		}
	case bool:
		if x {
			return 1, true
		}
		return 0, true
	case string:
		s := strings.ReplaceAll(strings.TrimSpace(x), "_", "")
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			return n, true
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil && f == float64(int64(f)) {
			return int64(f), true
		}
	}
	return 0, false
}

// Bool is pydantic's lax bool of a decoded JSON value.
func Bool(v any) bool {
	switch x := v.(type) {
	case bool:
		return x
	case float64:
		return x == 1
	case string:
		switch strings.ToLower(strings.TrimSpace(x)) {
		case "1", "true", "yes", "on", "t", "y":
			return true
		}
	}
	return false
}

// UTF16LE is s in UTF-16, little-endian, as Python's json.loads reads it
// (s in ASCII).
func UTF16LE(s string) string {
	var b strings.Builder
	for _, r := range s {
		b.WriteByte(byte(r))
		b.WriteByte(0)
	}
	return b.String()
}
