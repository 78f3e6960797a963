package multipart

import (
	"bytes"
	"mime/multipart"
	"strings"
	"testing"
)

// form is a body as Go's (and the OpenAI SDKs') multipart writer sends it.
func form(t *testing.T, fields ...string) ([]byte, string) {
	t.Helper()
	var b bytes.Buffer
	w := multipart.NewWriter(&b)
	for i := 0; i+1 < len(fields); i += 2 {
		if err := w.WriteField(fields[i], fields[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	fw, _ := w.CreateFormFile("file", "a.wav")
	fw.Write([]byte("RIFF"))
	w.Close()
	return b.Bytes(), w.Boundary()
}

func TestAFormAsTheSDKsWriteItIsRead(t *testing.T) {
	body, boundary := form(t, "model", "whisper-1", "stream", "true")
	f, err := Scan(body, boundary)
	if err != nil || string(body[f.Model.Start:f.Model.End]) != "whisper-1" || !f.Stream {
		t.Fatalf("%+v %v", f, err)
	}
	// whitespace around the parts is framing, not data
	if _, err := Scan(append([]byte("\r\n"), append(body, "\r\n"...)...), boundary); err != nil {
		t.Fatal(err)
	}
}

// The first HIGH finding of A JSON object before the form's first
// boundary is what ollama runs (it decodes the first JSON value whatever the
// Content-Type) while the gateway would route by the form.
func TestAFormWithDataAroundItsPartsIsRefused(t *testing.T) {
	body, boundary := form(t, "model", "whisper-1")
	json := `{"model":"secret-70b","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	for name, b := range map[string][]byte{
		"JSON before the first boundary":    append([]byte(json+"\r\n"), body...),
		"data after the closing boundary":   append(append([]byte{}, body...), json...),
		"data after a boundary on its line": bytes.Replace(body, []byte("--"+boundary+"\r\n"), []byte("--"+boundary+" "+json+"\r\n"), 1),
	} {
		if _, err := Scan(b, boundary); err == nil {
			t.Errorf("%s: read as a form", name)
		}
	}
}

func TestAPartThatNamesItselfTwoWaysIsRefused(t *testing.T) {
	for _, part := range []string{
		"Content-Disposition: form-data; name=\"model \"\r\n\r\nqwen",
		"Content-Disposition: form-data; name=\" stream\"\r\n\r\ntrue",
		"Content-Disposition: form-data; name=\"note\"\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nqwen",
	} {
		body := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b\r\n" + part + "\r\n--b--\r\n"
		if _, err := Scan([]byte(body), "b"); err == nil {
			t.Errorf("%q was read", part)
		}
	}
}

// Pydantic reads "1", "yes", "on" and "True" as a true stream field; the
// gateway would not see a stream, so ask for one usage-less answer.
func TestAStreamFieldIsTrueOrFalse(t *testing.T) {
	for _, v := range []string{"1", "yes", "on", "True", "t", ""} {
		body, boundary := form(t, "model", "m", "stream", v)
		if _, err := Scan(body, boundary); err == nil || !strings.Contains(err.Error(), "stream") {
			t.Errorf("stream %q: %v", v, err)
		}
	}
	body, boundary := form(t, "model", "m", "stream", "false")
	if f, err := Scan(body, boundary); err != nil || f.Stream {
		t.Fatalf("%+v %v", f, err)
	}
}

// FuzzScan holds the scanner to Go's own multipart reader: whatever Scan
// accepts, mime/multipart reads as the same parts, with the same model.
func FuzzScan(f *testing.F) {
	body, _ := func() ([]byte, string) {
		var b bytes.Buffer
		w := multipart.NewWriter(&b)
		w.SetBoundary("fuzzb")
		w.WriteField("model", "m")
		w.WriteField("stream", "true")
		w.Close()
		return b.Bytes(), ""
	}()
	f.Add(body)
	f.Add([]byte("{\"model\":\"x\"}\r\n" + string(body)))
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := Scan(b, "fuzzb")
		if err != nil || !got.Model.OK() {
			return
		}
		r := multipart.NewReader(bytes.NewReader(b), "fuzzb")
		form, err := r.ReadForm(1 << 20)
		if err != nil {
			return // Go's reader is stricter on headers; the gateway only forwards
		}
		if vs := form.Value["model"]; len(vs) != 1 || vs[0] != string(b[got.Model.Start:got.Model.End]) {
			t.Fatalf("Scan read model %q, mime/multipart %q", b[got.Model.Start:got.Model.End], vs)
		}
	})
}

// FuzzScanForm: whatever Scan accepts, the model it found lies inside the
// body (the gateway rewrites the request there).
func FuzzScanForm(f *testing.F) {
	f.Add([]byte("--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nm\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"stream\"\r\n\r\ntrue\r\n" +
		"--b\r\nContent-Disposition: form-data; name=\"file\"; filename=\"a.wav\"\r\nContent-Type: application/octet-stream\r\n\r\ndata\r\n--b--\r\n"))
	f.Add([]byte("--b\r\n\r\nx\r\n--b--"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fields, err := Scan(b, "b")
		if err == nil && fields.Model.OK() && (fields.Model.Start < 0 || fields.Model.End > len(b)) {
			t.Fatalf("model span %v outside the body", fields.Model)
		}
	})
}

// Python's email.utils joins RFC 2231 sections whatever the gaps between
// them, Go's only when they are contiguous: the same part would be named
// two ways.
func TestAPartNamedWithRFC2231ParametersIsRefused(t *testing.T) {
	for _, disp := range []string{
		`form-data; name*0="mo"; name*2="del"`,
		`form-data; name*=utf-8''model`,
		`form-data; name="note"; filename*=utf-8''a.wav`,
	} {
		body := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b\r\nContent-Disposition: " + disp + "\r\n\r\nx\r\n--b--\r\n"
		if _, err := Scan([]byte(body), "b"); err == nil {
			t.Errorf("%s was read", disp)
		}
	}
	ok := "--b\r\nContent-Disposition: form-data; name=\"model\"; filename=\"a*b.wav\"\r\n\r\nx\r\n--b--\r\n"
	if _, err := Scan([]byte(ok), "b"); err == nil || !strings.Contains(err.Error(), "file") {
		t.Fatalf("a quoted * is not a parameter's: %v", err)
	}
}
