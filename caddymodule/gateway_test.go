package caddymodule

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

func TestSDKListsCompletesAndStreamsThroughOnDemandEngine(t *testing.T) {
	startGateway(t, `
		engine demo {
			`+engineCmd("--model qwen --words-per-chunk 2 --chunk-delay 1ms")+`
			models qwen2.5-7b qwen
			idle_timeout 1m
		}`)
	client := sdk("")
	ctx := context.Background()

	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID+"/"+m.OwnedBy)
	}
	// one entry per engine: its other names are aliases
	if got := strings.Join(ids, ","); got != "qwen2.5-7b/demo" || !strings.Contains(page.Data[0].RawJSON(), `"aliases":["qwen"]`) {
		t.Fatalf("models: %s: %s", got, page.RawJSON())
	}

	resp, err := client.Chat.Completions.New(ctx, chatParams("qwen2.5-7b", "hello there"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.Choices[0].Message.Content, `You said: "hello there"`) {
		t.Fatalf("content: %q", resp.Choices[0].Message.Content)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, chatParams("qwen", "stream please"))
	var text strings.Builder
	chunks := 0
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
		chunks++
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if chunks < 5 || !strings.Contains(text.String(), `You said: "stream please"`) {
		t.Fatalf("%d chunks, text %q", chunks, text.String())
	}

	emb, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
		Model: "qwen",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("embed me")},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 8 {
		t.Fatalf("embeddings: %+v", emb.Data)
	}
}

func TestStreamingIsDeliveredEventByEvent(t *testing.T) {
	release := make(chan struct{})
	var once sync.Once
	free := func() { once.Do(func() { close(release) }) }
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"first\"}}]}\n\n")
		w.(http.Flusher).Flush()
		<-release // the second event waits until the client has seen the first
		io.WriteString(w, "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\" second\"}}]}\n\ndata: [DONE]\n\n")
	})
	startGateway(t, fmt.Sprintf(`
		engine up {
			to %s
			models m
		}`, up.URL))
	// registered last, so run first: a failed assertion before free below
	// releases the upstream before the servers' Close waits for it
	t.Cleanup(free)
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("m", "hi"))
	if !stream.Next() {
		t.Fatalf("no first event: %v", stream.Err())
	}
	if got := stream.Current().Choices[0].Delta.Content; got != "first" {
		t.Fatalf("first event %q", got)
	}
	free()
	if !stream.Next() || stream.Current().Choices[0].Delta.Content != " second" {
		t.Fatalf("second event missing: %v", stream.Err())
	}
	if stream.Next() {
		t.Fatal("stream did not end after [DONE]")
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestGatewayErrorsAreOpenAIShaped(t *testing.T) {
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		keys secret-one-000001 secret-two-000002
		max_body 1KiB
		engine up {
			to %s
			models m alias
		}`, up.URL))
	auth := []string{"Authorization", "Bearer secret-two-000002"}
	cases := []struct {
		name, method, path, body string
		header                   []string
		status                   int
		code, mention            string
	}{
		{"no key", "POST", "/v1/chat/completions", `{"model":"m"}`, nil, 401, "invalid_api_key", "gateway key"},
		{"wrong key", "POST", "/v1/chat/completions", `{"model":"m"}`, []string{"Authorization", "Bearer nope"}, 401, "invalid_api_key", "gateway key"},
		{"malformed JSON", "POST", "/v1/chat/completions", `{"model":"m",`, auth, 400, "invalid_json", "not valid JSON"},
		{"not an object", "POST", "/v1/chat/completions", `["model"]`, auth, 400, "invalid_json", "JSON object"},
		{"no model", "POST", "/v1/chat/completions", `{"messages":[{"role":"user","content":"hi","model":"m"}]}`, auth, 400, "missing_model", `no "model"`},
		{"unknown model", "POST", "/v1/chat/completions", `{"model":"gpt-9"}`, auth, 404, "model_not_found", "served models: m, alias"},
		{"too large", "POST", "/v1/chat/completions", `{"model":"m","pad":"` + strings.Repeat("x", 2000) + `"}`, auth, 413, "request_too_large", "max_body of 1KiB"},
		{"wrong method", "PUT", "/v1/chat/completions", `{"model":"m"}`, auth, 405, "method_not_allowed", "POST"},
		{"a path that climbs out", "POST", "/v1/x/../../admin/chat/completions", `{"model":"m"}`, auth, 400, "invalid_path", "'..'"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(c.method, gwURL+c.path, strings.NewReader(c.body))
			for i := 0; i+1 < len(c.header); i += 2 {
				req.Header.Set(c.header[i], c.header[i+1])
			}
			resp, body := do(t, req)
			if resp.StatusCode != c.status {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, c.status, body)
			}
			var e struct {
				Error struct{ Message, Type, Code string }
			}
			if err := json.Unmarshal([]byte(body), &e); err != nil || e.Error.Type == "" {
				t.Fatalf("not an OpenAI error: %s", body)
			}
			if e.Error.Code != c.code || !strings.Contains(e.Error.Message, c.mention) {
				t.Fatalf("error %+v, want code %s mentioning %q", e.Error, c.code, c.mention)
			}
		})
	}
	if n := len(up.all()); n != 0 {
		t.Fatalf("the upstream saw %d requests; refused requests must not reach it", n)
	}

	// the SDK surfaces them as typed errors
	_, err := sdk("secret-one-000001").Chat.Completions.New(context.Background(), chatParams("gpt-9", "hi"))
	apiError(t, err, 404)
	// max_body as configured, not "1024 bytes"
	_, err = sdk("secret-one-000001").Chat.Completions.New(context.Background(), chatParams("m", strings.Repeat("x", 2000)))
	if e := apiError(t, err, 413); !strings.HasSuffix(e.Message, "max_body of 1KiB") {
		t.Fatalf("413 says %q", e.Message)
	}
	if _, err := sdk("secret-one-000001").Chat.Completions.New(context.Background(), chatParams("alias", "hi")); err != nil {
		t.Fatal(err)
	}
}

func TestUpstreamErrorPassesThroughUntouched(t *testing.T) {
	const upstreamBody = `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "0")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, upstreamBody)
	})
	// with a single attempt the answer is the upstream's, byte for byte
	startGateway(t, fmt.Sprintf(`
		engine up {
			to %s
			models m
			retries 0
		}`, up.URL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"m"}`)
	if resp.StatusCode != 429 || body != upstreamBody || resp.Header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Fatalf("%d %q %v", resp.StatusCode, body, resp.Header)
	}
	if resp.Header.Get("X-LLM-Engine") != "up" {
		t.Fatalf("X-LLM-Engine %q", resp.Header.Get("X-LLM-Engine"))
	}
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("m", "hi"))
	if e := apiError(t, err, 429); e.Code != "rate_limit_exceeded" {
		t.Fatalf("code %q", e.Code)
	}
}

func TestLargePromptIsForwardedByteExactAndModelRewritten(t *testing.T) {
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		engine up {
			to %s
			models qwen
			model_name Qwen2.5-7B-Instruct
		}`, up.URL))
	big := strings.Repeat("All work and no play makes Jack a dull boy. ", 1<<20/44+1)
	// odd spacing, escapes and a nested "model" must all survive as sent
	body := `{ "messages" : [{"role":"user","content":` + mustJSON(big) + `,"model":"qwen"}],` +
		"\n\t\"model\" :  \"qwen\" , \"temperature\":0.70, \"x\":\"\\u00e9\\n\"}"
	resp, out := post(t, "/v1/chat/completions", body)
	if resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, out)
	}
	want := strings.Replace(body, `"model" :  "qwen"`, `"model" :  "Qwen2.5-7B-Instruct"`, 1)
	got := up.all()[0].body
	if !bytes.Equal(got, []byte(want)) {
		t.Fatalf("upstream body differs (len %d vs %d)", len(got), len(want))
	}
	if len(got) < 1<<20 {
		t.Fatalf("prompt was %d bytes, want ≥ 1 MiB", len(got))
	}
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func TestCallerKeyNeverReachesUpstreamAndEngineKeyDoes(t *testing.T) {
	up := newRecorder(t, okChat)
	other := newRecorder(t, okChat)
	// keys come from the environment, as the README says to write them: a
	// literal key is part of the config, which Caddy's /config/ shows
	t.Setenv("LLMGW_TEST_CALLER_KEYS", "caller-secret-123,caller-secret-124")
	t.Setenv("LLMGW_TEST_UP_KEY", "engine-key-456")
	t.Setenv("LLMGW_TEST_OTHER_KEY", "other-key-789")
	logFile := startGateway(t, fmt.Sprintf(`
		keys {env.LLMGW_TEST_CALLER_KEYS}
		engine up {
			to %s
			api_key {env.LLMGW_TEST_UP_KEY}
			models m
		}
		engine other {
			to %s
			api_key {env.LLMGW_TEST_OTHER_KEY} X-Api-Key
			models o
		}`, up.URL, other.URL))
	_, err := sdk("caller-secret-123",
		option.WithHeader("X-Api-Key", "caller-secret-123"),
		option.WithHeader("Api-Key", "caller-secret-123"),
		option.WithHeader("Proxy-Authorization", "Basic caller-secret-123"),
	).Chat.Completions.New(context.Background(), chatParams("m", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sdk("caller-secret-124").Chat.Completions.New(context.Background(), chatParams("o", "hi")); err != nil {
		t.Fatal(err)
	}
	// a wrong key is refused and not echoed either
	_, err = sdk("wrong-key-000").Chat.Completions.New(context.Background(), chatParams("m", "hi"))
	apiError(t, err, 401)

	h := up.all()[0].header
	for k, vv := range h {
		for _, v := range vv {
			if strings.Contains(v, "caller-secret") {
				t.Fatalf("caller key reached the upstream in %s", k)
			}
		}
	}
	if h.Get("Authorization") != "Bearer engine-key-456" {
		t.Fatalf("engine key not sent: %q", h.Get("Authorization"))
	}
	oh := other.all()[0].header
	if oh.Get("X-Api-Key") != "other-key-789" || oh.Get("Authorization") != "" {
		t.Fatalf("other engine headers: %v", oh)
	}

	logs := readFile(t, logFile)
	for _, secret := range []string{"caller-secret-123", "engine-key-456", "other-key-789", "wrong-key-000"} {
		if strings.Contains(logs, secret) {
			t.Fatalf("a key appears in Caddy's log: %s\n%s", secret, logs)
		}
	}
	for _, path := range []string{"/llm_gateway/engines", "/config/"} {
		resp, body := do(t, mustReq(http.MethodGet, adminURL+path))
		if resp.StatusCode != 200 || strings.Contains(body, "key-") || strings.Contains(body, "caller-secret") {
			t.Fatalf("admin %s: %d %s", path, resp.StatusCode, body)
		}
	}
}

func mustReq(method, url string) *http.Request {
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		panic(err)
	}
	return req
}

func TestClientCancelReachesUpstream(t *testing.T) {
	canceled := make(chan struct{})
	started := make(chan struct{})
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, "data: {\"id\":\"1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tick\"}}]}\n\n")
		w.(http.Flusher).Flush()
		close(started)
		<-r.Context().Done()
		close(canceled)
	})
	startGateway(t, fmt.Sprintf(`
		engine up {
			to %s
			models m
		}`, up.URL))
	ctx, cancel := context.WithCancel(context.Background())
	stream := sdk("").Chat.Completions.NewStreaming(ctx, chatParams("m", "hi"))
	if !stream.Next() {
		t.Fatal(stream.Err())
	}
	<-started
	cancel()
	stream.Close()
	select {
	case <-canceled:
	case <-time.After(10 * time.Second):
		t.Fatal("the upstream never saw the client's cancel")
	}
}

func TestUnreachableAndSilentEnginesGiveGatewayErrors(t *testing.T) {
	silent := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
	dead := newRecorder(t, okChat)
	deadURL := dead.URL
	dead.Close()
	startGateway(t, fmt.Sprintf(`
		engine dead {
			to %s
			models d
		}
		engine silent {
			to %s
			models s
			header_timeout 200ms
		}`, deadURL, silent.URL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"d"}`)
	if resp.StatusCode != 502 || !strings.Contains(body, "engine dead could not be reached") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	start := time.Now()
	resp, body = post(t, "/v1/chat/completions", `{"model":"s"}`)
	if resp.StatusCode != 504 || !strings.Contains(body, "header_timeout") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("a silent engine held the request %s, budget 200ms", took)
	}
}

func TestAccessLogPlaceholders(t *testing.T) {
	up := newRecorder(t, okChat)
	logFile := filepath.Join(t.TempDir(), "access.log")
	cfg := fmt.Sprintf(`{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	grace_period 1ns
}
http://%s {
	log {
		output file %s
	}
	log_append llm_engine {http.llm_gateway.engine}
	log_append llm_model {http.llm_gateway.model}
	log_append llm_model_sent {http.llm_gateway.model_sent}
	log_append llm_attempts {http.llm_gateway.attempts}
	llm_gateway {
		engine up {
			to %s
			models m
			model_name upstream-m
		}
	}
}`, gwAddr, logFile, up.URL)
	initRaw(t, cfg)
	mustAnswer(t, "m")
	// the access log is written after the response: wait for the line
	deadline := time.Now().Add(5 * time.Second)
	for {
		logs := readFile(t, logFile)
		if strings.Contains(logs, `"llm_engine":"up"`) {
			for _, want := range []string{`"llm_model":"m"`, `"llm_model_sent":"upstream-m"`, `"llm_attempts":"1"`} {
				if !strings.Contains(logs, want) {
					t.Fatalf("access log lacks %s: %s", want, logs)
				}
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no access log line: %s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestModelsListAsksRemoteEnginesAtMostOncePerTwoSeconds(t *testing.T) {
	up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"object":"list","data":[{"id":"x","object":"model"}]}`)
	})
	dead := newRecorder(t, okChat)
	deadURL := dead.URL
	dead.Close()
	startGateway(t, fmt.Sprintf(`
		engine up {
			to %s
			models up-model
		}
		engine down {
			to %s
			models down-model
		}`, up.URL, deadURL))
	for range 5 {
		_, body := do(t, mustReq(http.MethodGet, gwURL+"/v1/models"))
		if !strings.Contains(body, `"id":"up-model","object":"model","created":0,"owned_by":"up","status":{"value":"loaded"}`) ||
			!strings.Contains(body, `"id":"down-model","object":"model","created":0,"owned_by":"down","status":{"value":"unloaded"}`) {
			t.Fatalf("%s", body)
		}
	}
	asked := 0
	for _, r := range up.all() {
		if r.path == "/v1/models" {
			asked++
		}
	}
	if asked != 1 {
		t.Fatalf("five listings asked the engine %d times, want once (cached for 2 s)", asked)
	}
}

func TestChunkedBodyBeyondMaxBodyIs413(t *testing.T) {
	up := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		max_body 4KiB
		engine up {
			to %s
			models m
		}`, up.URL))
	// no Content-Length: the limit must hold while reading
	pr, pw := io.Pipe()
	go func() {
		io.WriteString(pw, `{"model":"m","pad":"`+strings.Repeat("x", 8<<10)+`"}`)
		pw.Close()
	}()
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions", pr)
	resp, body := do(t, req)
	if resp.StatusCode != 413 || !strings.Contains(body, "request_too_large") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	if len(up.all()) != 0 {
		t.Fatal("a body beyond max_body reached the upstream")
	}
}

// Aliases are not listed by default (five engines with
// aliases made nine entries in a model picker), list_aliases lists them,
// and an unlisted engine is served but not listed.
func TestAliasesAndUnlistedEnginesInTheModelList(t *testing.T) {
	up := newRecorder(t, okChat)
	engines := fmt.Sprintf(`
		key team team-key-0000000001 {
			models qwen3 gpt-4o hidden
		}
		key all all-key-00000000001
		engine qwen {
			to %[1]s
			models qwen3-30b qwen3 gpt-4o
		}
		engine embed {
			to %[1]s
			models nomic
		}
		engine hidden {
			to %[1]s
			models hidden
			unlisted
		}`, up.URL)
	list := func(key string) string {
		t.Helper()
		page, err := sdk(key).Models.List(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		var ids []string
		for _, m := range page.Data {
			ids = append(ids, m.ID)
			if a, ok := m.JSON.ExtraFields["aliases"]; ok {
				ids[len(ids)-1] += a.Raw()
			}
		}
		return strings.Join(ids, ",")
	}
	startGateway(t, engines)
	if got := list("all-key-00000000001"); got != `qwen3-30b["qwen3","gpt-4o"],nomic` {
		t.Fatalf("listed: %s", got)
	}
	// a key sees the first name it may use, and its other names
	if got := list("team-key-0000000001"); got != `qwen3["gpt-4o"]` {
		t.Fatalf("listed for a key with models: %s", got)
	}
	// aliases and the unlisted engine are served all the same
	for _, m := range []string{"gpt-4o", "hidden"} {
		if _, err := sdk("team-key-0000000001").Chat.Completions.New(context.Background(), chatParams(m, "hi")); err != nil {
			t.Fatalf("%s: %v", m, err)
		}
	}
	if m, err := sdk("all-key-00000000001").Models.Get(context.Background(), "hidden"); err != nil || m.ID != "hidden" {
		t.Fatalf("GET /v1/models/hidden: %v %v", m, err)
	}

	startGateway(t, "list_aliases on\n"+engines)
	if got := list("all-key-00000000001"); got != "qwen3-30b,qwen3,gpt-4o,nomic" {
		t.Fatalf("listed with list_aliases on: %s", got)
	}
}
