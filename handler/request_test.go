package handler

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestAMemberNamedTwiceUnderCaseFoldingIsRefused(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	for _, body := range []string{
		`{"model":"p","Model":"gpt-4-expensive"}`,
		`{"model":"p","MODEL":"a"}`,
		`{"model":"p","mod\u0065l":"a"}`,
		`{"model":"p","model":"a"}`,
		`{"model":"p","stream":false,"ſtream":true}`, // U+017F folds to s
		`{"model":"p","fallbacks":[],"FallBacks":["a"]}`,
	} {
		resp, got := postJSON(t, url, body)
		if resp.StatusCode != 400 || !strings.Contains(got, "ambiguous_member") {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("an ambiguous body reached an engine")
	}
}

// pipeBody is a request body as HTTP/2 gives one: its bytes, and io.EOF
// only on a read after them (as a bytes.Reader reads), holding a buffer of
// its own until it is closed.
type pipeBody struct {
	*bytes.Reader
	closed bool
}

func (b *pipeBody) Close() error { b.closed = true; return nil }

// A body read whole over HTTP/2 is closed at once. A read that stops at
// its Content-Length never asks for the end, and the stream's body buffer
// stays held until the body is closed, which the server does only when the
// answer ends: 1 KiB per open stream.
func TestABodyReadWholeIsClosedAtOnce(t *testing.T) {
	up, _ := failing(t)
	g, _ := testGateway(t, fiveEngines(up.URL), nil)
	const body = `{"model":"p","stream":true}`
	pb := &pipeBody{Reader: bytes.NewReader([]byte(body))}
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", nil)
	r.ProtoMajor, r.ProtoMinor = 2, 0
	r.Body, r.ContentLength = pb, int64(len(body))
	hold := &bodyHold{b: g.bodies}
	defer hold.release()
	got, gerr := g.readBodyOnce(httptest.NewRecorder(), r, hold)
	if gerr != nil || string(got) != body {
		t.Fatalf("read %q, %v", got, gerr)
	}
	if !pb.closed {
		t.Fatal("the body was read whole and left open")
	}
}

func TestAnyCaseVariantOfAMemberTheGatewayReadsIsRefused(t *testing.T) {
	up, hits := failing(t)
	_, url := testGateway(t, fiveEngines(up.URL), nil)
	for _, body := range []string{
		`{"model":"p","Stream":true}`,
		`{"model":"p","stream":true,"Stream_Options":{}}`,
		`{"model":"p","MAX_TOKENS":5}`,
		`{"model":"p","Max_Completion_Tokens":5}`,
		`{"Model":"p"}`,
		`{"model":"p","User":"u","user":"v"}`,
	} {
		resp, got := postJSON(t, url, body)
		if resp.StatusCode != 400 || !strings.Contains(got, "ambiguous_member") {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	if hits.Load() != 0 {
		t.Fatal("an ambiguous body reached an engine")
	}
}

func TestANestedFilterPathSpelledTwoWaysIsRefused(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string { return string(b) }, answerJSON(`{}`))
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: upURL, Models: []string{"m"},
		Set: []engines.BodySetting{{Path: "chat_template_kwargs.enable_thinking", Value: json.RawMessage("false")}}}}}, nil)
	for _, body := range []string{
		`{"model":"m","chat_template_kwargs":{"enable_thinking":false},"Chat_Template_Kwargs":{"enable_thinking":true}}`,
		`{"model":"m","chat_template_kwargs":{"Enable_Thinking":true}}`,
		`{"model":"m","chat_template_kwargs":{},"chat_template_kwargs":{"enable_thinking":true}}`,
	} {
		resp, got := postJSON(t, url, body)
		if resp.StatusCode != 400 || !strings.Contains(got, "ambiguous_member") {
			t.Fatalf("%s: %d %s", body, resp.StatusCode, got)
		}
	}
	if len(seen()) != 0 {
		t.Fatalf("an ambiguous body reached the engine: %v", seen())
	}
}

func TestAMultipartModelPartThatIsAFileIsRefused(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string { return "" }, answerJSON(`{}`))
	_, url := testGateway(t, config.Config{Engines: []engines.Config{{Name: "e", To: upURL, Models: []string{"whisper-1"}}}}, nil)
	for _, part := range []string{
		"Content-Disposition: form-data; name=\"model\"; filename=\"\"\r\n\r\nqwen",
		"Content-Disposition: form-data; name=\"Model\"\r\n\r\nqwen",
	} {
		body := "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\nwhisper-1\r\n--b\r\n" + part + "\r\n--b--\r\n"
		req, _ := http.NewRequest("POST", url+"/v1/audio/transcriptions", strings.NewReader(body))
		req.Header.Set("Content-Type", "multipart/form-data; boundary=b")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 400 {
			t.Fatalf("%q: %d %s", part, resp.StatusCode, out)
		}
	}
	if len(seen()) != 0 {
		t.Fatal("an ambiguous upload reached the engine")
	}
}

func TestMultipartIsRoutedByItsModelFieldAndForwardedByteForByte(t *testing.T) {
	// each line: the Content-Type, a NUL, the body
	audioURL, uploads := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.Header.Get("Content-Type") + "\x00" + string(b)
	}, answerJSON(`{"text":"hello"}`))
	chat, chatHits := failing(t)
	cfg := config.Config{Engines: []engines.Config{
		{Name: "whisper", To: audioURL, Models: []string{"whisper-1"}, ModelName: "ggml-large-v3"},
		{Name: "chat", To: chat.URL, Models: []string{"qwen"}},
	}}
	_, url := testGateway(t, cfg, nil)

	file := make([]byte, 20<<20)
	rand.Read(file)
	body, ct := multipartBody(t, [][2]string{{"language", "en"}, {"model", "whisper-1"}, {"response_format", "json"}}, file)
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/transcriptions", bytes.NewReader(body))
	req.Header.Set("Content-Type", ct)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(out) != `{"text":"hello"}` {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	// byte for byte, but for the model field's value, which model_name renames
	want := bytes.Replace(body, []byte("\r\n\r\nwhisper-1\r\n"), []byte("\r\n\r\nggml-large-v3\r\n"), 1)
	got := uploads()
	if len(got) != 1 || got[0] != ct+"\x00"+string(want) {
		t.Fatalf("the engine got %d bodies; the upload was not forwarded byte for byte", len(got))
	}
	if chatHits.Load() != 0 {
		t.Fatal("the chat engine was called")
	}

	for _, tc := range []struct {
		fields [][2]string
		status int
		code   string
	}{
		{[][2]string{{"language", "en"}}, 400, "missing_model"},
		{[][2]string{{"model", "whisper-1"}, {"Model", "qwen"}}, 400, "ambiguous_member"},
		{[][2]string{{"model", "nope"}}, 404, "model_not_found"},
	} {
		body, ct := multipartBody(t, tc.fields, []byte("RIFF"))
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/audio/transcriptions", bytes.NewReader(body))
		req.Header.Set("Content-Type", ct)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(out), tc.code) {
			t.Errorf("%v: %d %s", tc.fields, resp.StatusCode, out)
		}
	}
	if len(uploads()) != 1 {
		t.Fatalf("refused uploads reached the engine")
	}
}
