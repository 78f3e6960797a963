package handler

import (
	"github.com/llmgateway/caddy-llm-gateway/handler/config"

	"bytes"
	"crypto/rand"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// What a llama-swap user reaches for, below Caddy: body filters, multipart
// routing, extra paths, the /upstream/ passthrough and the defaults block.

func TestFilterPathsTheGatewayReadsAreRefused(t *testing.T) {
	for _, p := range []string{"model", "Stream", "fallbacks", "a..b", ""} {
		c := engines.Config{Name: "e", Strip: []string{p}}
		if c.ValidateFilters() == nil {
			t.Errorf("strip %q accepted", p)
		}
	}
	c := engines.Config{Name: "e", Set: []engines.BodySetting{{Path: "reasoning_effort", Value: json.RawMessage(`low`)}}}
	if err := c.ValidateFilters(); err == nil || !strings.Contains(err.Error(), "not JSON") {
		t.Fatalf("%v", err)
	}
}

// loggingUpstream is an upstream on 127.0.0.1 that logs one line per
// request (what line makes of it and its body) and answers with respond;
// lines returns the log so far.
func loggingUpstream(t *testing.T, line func(r *http.Request, body []byte) string, respond http.HandlerFunc) (url string, lines func() []string) {
	var mu sync.Mutex
	var log []string
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		log = append(log, line(r, b))
		mu.Unlock()
		respond(w, r)
	}))
	t.Cleanup(up.Close)
	return up.URL, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), log...)
	}
}

func answerJSON(body string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, body)
	}
}

func TestFiltersApplyPerEngineAfterTheModelRewrite(t *testing.T) {
	upURL, sent := loggingUpstream(t, func(_ *http.Request, b []byte) string { return string(b) },
		func(w http.ResponseWriter, _ *http.Request) { answerOK(w, "x") })
	cfg := config.Config{Engines: []engines.Config{{Name: "r1", To: upURL, Models: []string{"r1"}, ModelName: "deepseek-r1",
		Strip: []string{"temperature", "top_p"}, Set: []engines.BodySetting{{Path: "max_tokens", Value: json.RawMessage(`2048`)}}}}}
	_, url := testGateway(t, cfg, nil)
	resp, body := postJSON(t, url, `{"model":"r1","messages":[{"role":"user","content":"hi"}],"temperature":0.7,"top_p":0.9}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	want := `{"model":"deepseek-r1","messages":[{"role":"user","content":"hi"}],"max_tokens":2048}`
	if got := sent(); len(got) != 1 || got[0] != want {
		t.Fatalf("engine got %q\nwant %q", got, want)
	}
}

// multipartBody is an upload as the OpenAI SDKs send it: fields and a file.
func multipartBody(t *testing.T, fields [][2]string, file []byte) ([]byte, string) {
	var b bytes.Buffer
	mw := multipart.NewWriter(&b)
	for _, f := range fields {
		if err := mw.WriteField(f[0], f[1]); err != nil {
			t.Fatal(err)
		}
	}
	if file != nil {
		fw, err := mw.CreateFormFile("file", "speech.wav")
		if err != nil {
			t.Fatal(err)
		}
		fw.Write(file)
	}
	mw.Close()
	return b.Bytes(), mw.FormDataContentType()
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

func TestExtraPathsAreRoutedByTheBodysModel(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		var body struct{ Model string }
		_ = json.Unmarshal(b, &body)
		return r.URL.Path + " " + body.Model + " " + r.Header.Get("Authorization")
	}, answerJSON(`{"results":[]}`))
	cfg := config.Config{Keys: []config.Key{{Value: "gateway-key-0123456789"}}, Engines: []engines.Config{
		{Name: "rr", To: upURL, Models: []string{"bge"}, ModelName: "bge-reranker", APIKey: "engine-key-abcdefgh"}}}
	_, url := testGateway(t, cfg, nil)
	for _, p := range []string{"/rerank", "/infill", "/tokenize"} {
		req, _ := http.NewRequest(http.MethodPost, url+p, strings.NewReader(`{"model":"bge","query":"q","documents":["a"]}`))
		req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "rr" {
			t.Fatalf("%s: %d %s", p, resp.StatusCode, out)
		}
	}
	want := "/rerank bge-reranker Bearer engine-key-abcdefgh,/infill bge-reranker Bearer engine-key-abcdefgh,/tokenize bge-reranker Bearer engine-key-abcdefgh"
	if got := strings.Join(seen(), ","); got != want {
		t.Fatalf("engine saw %s", got)
	}
	// an unknown model is the gateway's OpenAI-shaped 404, and a key is needed
	req, _ := http.NewRequest(http.MethodPost, url+"/rerank", strings.NewReader(`{"model":"nope"}`))
	req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
	resp, _ := http.DefaultClient.Do(req)
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || !strings.Contains(string(out), "model_not_found") {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	resp, _ = http.Post(url+"/rerank", "application/json", strings.NewReader(`{"model":"bge"}`))
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	// a GET there, and any other path, is not the gateway's
	drain()
	resp, _ = http.Get(url + "/rerank")
	resp.Body.Close()
	if res := <-served; res.Handled {
		t.Fatal("GET /rerank was taken")
	}
	resp, _ = http.Post(url+"/other", "application/json", strings.NewReader(`{"model":"bge"}`))
	resp.Body.Close()
	if res := <-served; res.Handled {
		t.Fatal("POST /other was taken")
	}
}

// drain empties served of earlier requests' results.
func drain() {
	for {
		select {
		case <-served:
		default:
			return
		}
	}
}

func TestExtraPathsOffRoutesNone(t *testing.T) {
	up, hits := failing(t)
	none := []string{}
	cfg := config.Config{ExtraPaths: &none, Engines: []engines.Config{{Name: "e", To: up.URL, Models: []string{"m"}}}}
	_, url := testGateway(t, cfg, nil)
	drain()
	resp, _ := http.Post(url+"/rerank", "application/json", strings.NewReader(`{"model":"m"}`))
	resp.Body.Close()
	if res := <-served; res.Handled || hits.Load() != 0 {
		t.Fatal("extra_paths off still routes /rerank")
	}
	for _, bad := range []string{"rerank", "/v1/rerank", "/upstream/x", "/a/../b"} {
		if err := config.CheckExtraPath(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestPassthroughReachesTheEnginesOwnPages(t *testing.T) {
	upURL, seen := loggingUpstream(t, func(r *http.Request, b []byte) string {
		return r.Method + " " + r.URL.RequestURI() + " " + r.Header.Get("Authorization") + " " + r.Header.Get("X-Api-Key") + " " + string(b)
	}, answerJSON(`{"total_slots":4}`))
	cfg := config.Config{Keys: []config.Key{{Value: "gateway-key-0123456789"}}, Engines: []engines.Config{
		{Name: "llama", To: upURL, Models: []string{"Qwen/Qwen3-8B", "qwen"}, APIKey: "engine-key-abcdefgh"}}}
	_, url := testGateway(t, cfg, nil)
	call := func(method, path, body string) (int, string) {
		req, _ := http.NewRequest(method, url+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer gateway-key-0123456789")
		req.Header.Set("X-Api-Key", "gateway-key-0123456789")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		out, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(out)
	}
	if st, out := call("GET", "/upstream/qwen/props?x=1", ""); st != 200 || out != `{"total_slots":4}` {
		t.Fatalf("%d %s", st, out)
	}
	if st, out := call("POST", "/upstream/Qwen/Qwen3-8B/slots/0", `{"action":"save"}`); st != 200 {
		t.Fatalf("%d %s", st, out)
	}
	if st, _ := call("GET", "/upstream/qwen/", ""); st != 200 {
		t.Fatalf("the engine's UI: %d", st)
	}
	want := []string{
		"GET /props?x=1 Bearer engine-key-abcdefgh  ",
		`POST /slots/0 Bearer engine-key-abcdefgh  {"action":"save"}`,
		"GET / Bearer engine-key-abcdefgh  ",
	}
	if strings.Join(seen(), "\n") != strings.Join(want, "\n") {
		t.Fatalf("engine saw:\n%s", strings.Join(seen(), "\n"))
	}
	if st, out := call("GET", "/upstream/nope/props", ""); st != 404 || !strings.Contains(out, "model_not_found") {
		t.Fatalf("%d %s", st, out)
	}
	if st, _ := call("GET", "/upstream/qwen/../v1/models", ""); st != 400 {
		t.Fatalf("dot segments: %d", st)
	}
	resp, _ := http.Get(url + "/upstream/qwen/props")
	resp.Body.Close()
	if resp.StatusCode != 401 {
		t.Fatalf("without a key: %d", resp.StatusCode)
	}
	if len(seen()) != 3 {
		t.Fatalf("refused requests reached the engine: %v", seen())
	}
}

func TestDefaultsFillWhatEnginesLeaveUnset(t *testing.T) {
	ten := caddy.Duration(10 * 60e9)
	cfg := config.Config{
		Defaults: &engines.Config{IdleTimeout: ten, Fallback: "cloud", Strip: []string{"temperature"}},
		Engines: []engines.Config{
			{Name: "a", To: "http://127.0.0.1:1", Models: []string{"a"}},
			{Name: "b", To: "http://127.0.0.1:2", Models: []string{"b"}, IdleTimeout: caddy.Duration(60e9), Strip: []string{"top_p"}},
			{Name: "cloud", To: "http://127.0.0.1:3", Models: []string{"c"}},
		},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	got := cfg.WithDefaults().Engines
	if got[0].IdleTimeout != ten || got[0].Fallback != "cloud" || got[0].Strip[0] != "temperature" {
		t.Fatalf("a: %+v", got[0])
	}
	if got[1].IdleTimeout != caddy.Duration(60e9) || got[1].Strip[0] != "top_p" || len(got[1].Strip) != 1 {
		t.Fatalf("b kept its own: %+v", got[1])
	}
	if got[2].Fallback != "" {
		t.Fatal("the default fallback was given to itself")
	}
	if cfg.Engines[0].IdleTimeout != 0 {
		t.Fatal("WithDefaults changed the config it was given")
	}
	bad := config.Config{Defaults: &engines.Config{Models: []string{"x"}}, Engines: cfg.Engines}
	if err := bad.Validate(); err == nil {
		t.Fatal("defaults with models accepted")
	}
}
