// Package multipart finds the routing fields of a multipart/form-data body
// (its "model" and "stream" parts) without decoding or copying its files.
package multipart

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"strings"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"
)

// Multipart bodies (audio transcriptions and translations, image edits) are
// routed by their "model" form field and forwarded byte for byte: the
// gateway finds where that field's value sits, as it does for a JSON body's
// "model" member, and at most rewrites those bytes for an engine's
// model_name. The file parts are never decoded or copied.

// Fields is what the gateway reads of a multipart/form-data body.
type Fields struct {
	Model  jsonmember.Span // the model field's value
	Stream bool            // a "stream" field of true
}

// AmbiguousError is a field the gateway reads given more than once, or
// under a name that differs from it only in case (Spelled): the engine
// might read another part than the gateway.
type AmbiguousError struct{ Name, Spelled string }

func (e *AmbiguousError) Error() string {
	if e.Spelled != "" {
		return fmt.Sprintf("the multipart body has a %q field, which engines that ignore case read as %q and others do not; name it %q", e.Spelled, e.Name, e.Name)
	}
	return "the multipart body has more than one " + `"` + e.Name + `"` +
		" field (names are compared ignoring case); send it once"
}

// maxFormParts bounds the parts of a routed form body: a body of a million
// empty parts is not an upload.
const maxFormParts = 1000

// Boundary returns the boundary of a multipart/form-data content type,
// and whether the type is one.
func Boundary(contentType string) (string, bool) {
	mt, params, err := mime.ParseMediaType(contentType)
	if err != nil || mt != "multipart/form-data" {
		return "", false
	}
	b := params["boundary"]
	return b, b != ""
}

// Scan finds the model and stream fields of a multipart body. A field
// given twice (under any case, as with JSON members) is an error: the engine
// might read the other one.
//
// The framing is read strictly, because engines do not all read
// a form as a form: ollama's OpenAI layer decodes the first JSON value of a
// body whatever its Content-Type, so a JSON object in the preamble would be
// run by the engine while the gateway routed and counted the form. Only
// whitespace may stand before the first delimiter, after a delimiter on its
// line (RFC 2046's transport padding) and after the closing one; a part
// that names itself twice (two Content-Disposition headers) or by a name
// that is a routing field's with spaces around it is refused.
func Scan(body []byte, boundary string) (Fields, error) {
	var f Fields
	delim := []byte("--" + boundary)
	i := skipWhite(body, 0)
	if !bytes.HasPrefix(body[i:], delim) {
		if bytes.Contains(body, delim) {
			return f, errors.New("the multipart body has data before its first boundary: only whitespace may precede it")
		}
		return f, errors.New("the multipart body has no part with its boundary")
	}
	next := append([]byte("\r\n"), delim...)
	seenModel, seenStream := false, false
	for parts := 0; ; parts++ {
		i += len(delim)
		if bytes.HasPrefix(body[i:], []byte("--")) {
			if skipWhite(body, i+2) != len(body) {
				return f, errors.New("the multipart body has data after its closing boundary: only whitespace may follow it")
			}
			break
		}
		if parts == maxFormParts {
			return f, errors.New("the multipart body has more than 1000 parts")
		}
		// the rest of the delimiter line (transport padding), then headers
		eol := bytes.Index(body[i:], []byte("\r\n"))
		if eol < 0 {
			return f, errors.New("the multipart body ends inside a delimiter line")
		}
		if len(bytes.Trim(body[i:i+eol], " \t")) > 0 {
			return f, errors.New("the multipart body has data after a boundary on its line: a boundary must end its line")
		}
		i += eol + 2
		hdrEnd := bytes.Index(body[i:], []byte("\r\n\r\n"))
		if hdrEnd < 0 {
			if !bytes.HasPrefix(body[i:], []byte("\r\n")) {
				return f, errors.New("a part of the multipart body has no end of its headers")
			}
			hdrEnd = -2 // a part without headers
		}
		headers := body[i : i+max(0, hdrEnd)]
		if bytes.Count(headers, []byte("\n")) != bytes.Count(headers, []byte("\r\n")) ||
			bytes.Count(headers, []byte("\r")) != bytes.Count(headers, []byte("\r\n")) {
			// Go's textproto ends a header line at a bare LF: the part's
			// value would start elsewhere for it than here
			return f, errors.New("a part of the multipart body has a header line that does not end in CRLF")
		}
		valStart := i + hdrEnd + 4
		// an empty part's delimiter follows its headers' blank line at
		// once, without a CRLF of its own (Go's reader reads it so too)
		end, after := 0, 2
		if !bytes.HasPrefix(body[valStart:], delim) {
			if end = bytes.Index(body[valStart:], next); end < 0 {
				return f, errors.New("the multipart body ends inside a part (no closing boundary)")
			}
		} else {
			after = 0
		}
		value := jsonmember.Span{Start: valStart, End: valStart + end}
		name, isFile, err := partName(headers)
		if err != nil {
			return f, err
		}
		for _, want := range [...]string{"model", "stream"} {
			if !strings.EqualFold(strings.TrimSpace(name), want) {
				continue
			}
			// Go's FormValue reads a file part named model as the
			// field, and matches names exactly; the gateway reads the
			// same part the same way or refuses the body
			switch {
			case name != want:
				return f, &AmbiguousError{Name: want, Spelled: name}
			case isFile:
				return f, fmt.Errorf("the multipart body's %q part is a file (it has a filename): send it as a plain field", want)
			case want == "model" && seenModel || want == "stream" && seenStream:
				return f, &AmbiguousError{Name: want}
			case want == "model":
				seenModel, f.Model = true, value
			default:
				seenStream = true
				if f.Stream, err = streamValue(body[value.Start:value.End]); err != nil {
					return f, err
				}
			}
		}
		i = value.End + after
	}
	return f, nil
}

// streamValue reads a form's stream field. Pydantic reads "1", "yes",
// "on" and "True" as true where the gateway would see no stream; only the
// two words every reader agrees on are taken.
func streamValue(v []byte) (bool, error) {
	switch string(v) {
	case "true":
		return true, nil
	case "false":
		return false, nil
	}
	return false, fmt.Errorf("the multipart body's \"stream\" field is %q: send true or false", cut(v, 32))
}

func cut(b []byte, n int) []byte {
	if len(b) > n {
		return b[:n]
	}
	return b
}

// skipWhite skips spaces, tabs, CR and LF from i.
func skipWhite(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\r' || b[i] == '\n') {
		i++
	}
	return i
}

// extendedParam reports whether a Content-Disposition value has a
// parameter whose name holds a '*' (RFC 2231's continuations and charsets),
// outside quoted strings.
func extendedParam(v []byte) bool {
	inQuote, inName := false, false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case inQuote:
		case c == ';':
			inName = true
		case c == '=':
			inName = false
		case c == '*' && inName:
			return true
		}
	}
	return false
}

// partName reads a part's form field name from its Content-Disposition, and
// whether the part is a file. A part with two Content-Disposition headers,
// or one that is not a well-formed form-data disposition, is refused:
// readers differ on which one names it, or whether it does.
func partName(headers []byte) (name string, isFile bool, err error) {
	seen := false
	for _, line := range bytes.Split(headers, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !strings.EqualFold(string(bytes.TrimSpace(k)), "Content-Disposition") {
			continue
		}
		if seen {
			return "", false, errors.New("a part of the multipart body has two Content-Disposition headers")
		}
		seen = true
		if extendedParam(v) {
			// name*0="mo"; name*2="del": Go joins only contiguous
			// sections, Python's email.utils joins them all (RFC 7578
			// §4.2 forbids the encoding in forms anyway)
			return "", false, errors.New("a part of the multipart body's Content-Disposition uses RFC 2231 parameters (name*=…): send plain ones")
		}
		// readers that do not parse it as Go does might still find a
		// name in it: a part every reader reads alike, or none
		disp, params, perr := mime.ParseMediaType(string(bytes.TrimSpace(v)))
		if perr != nil || disp != "form-data" {
			return "", false, errors.New("a part of the multipart body has a Content-Disposition that is not form-data with parameters")
		}
		_, isFile = params["filename"]
		name = params["name"]
	}
	return name, isFile, nil
}
