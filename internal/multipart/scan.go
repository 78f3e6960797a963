// Package multipart finds the routing fields of a multipart/form-data body
// (its "model" and "stream" parts) without decoding or copying its files.
package multipart

import (
	"errors"
	"fmt"

	"github.com/llmgateway/caddy-llm-gateway/internal/jsonmember"

	"bytes"
	"mime"
	"strings"
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
func Scan(body []byte, boundary string) (Fields, error) {
	var f Fields
	delim := []byte("--" + boundary)
	// the first delimiter may follow a preamble; later ones follow CRLF
	i := bytes.Index(body, delim)
	if i < 0 {
		return f, errors.New("the multipart body has no part with its boundary")
	}
	next := append([]byte("\r\n"), delim...)
	seenModel, seenStream := false, false
	for parts := 0; ; parts++ {
		i += len(delim)
		if bytes.HasPrefix(body[i:], []byte("--")) {
			break // the closing delimiter
		}
		if parts == maxFormParts {
			return f, errors.New("the multipart body has more than 1000 parts")
		}
		// the rest of the delimiter line (transport padding), then headers
		eol := bytes.Index(body[i:], []byte("\r\n"))
		if eol < 0 {
			return f, errors.New("the multipart body ends inside a delimiter line")
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
		valStart := i + hdrEnd + 4
		end := bytes.Index(body[valStart:], next)
		if end < 0 {
			return f, errors.New("the multipart body ends inside a part (no closing boundary)")
		}
		value := jsonmember.Span{Start: valStart, End: valStart + end}
		name, isFile := partName(headers)
		for _, want := range [...]string{"model", "stream"} {
			if !strings.EqualFold(name, want) {
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
				f.Stream = string(body[value.Start:value.End]) == "true"
			}
		}
		i = value.End + 2
	}
	return f, nil
}

// partName reads a part's form field name from its Content-Disposition, and
// whether the part is a file.
func partName(headers []byte) (string, bool) {
	for _, line := range bytes.Split(headers, []byte("\r\n")) {
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok || !strings.EqualFold(string(bytes.TrimSpace(k)), "Content-Disposition") {
			continue
		}
		_, params, err := mime.ParseMediaType(string(bytes.TrimSpace(v)))
		if err != nil {
			return "", false
		}
		_, isFile := params["filename"]
		return params["name"], isFile
	}
	return "", false
}
