package handler

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// An Anthropic engine that speaks the Messages API, streaming and not, and
// misbehaves as asked: "" answers, "hangup" hangs up after message_start
// and ping (before any content), "cut" dies after the first text delta,
// "nostop" ends its body without message_stop.
type anthropicEngine struct {
	*httptest.Server
	mu      sync.Mutex
	mode    string
	text    string
	headers []http.Header
}

func newAnthropicEngine(t *testing.T, text string) *anthropicEngine {
	e := &anthropicEngine{text: text}
	e.Server = httptest.NewServer(http.HandlerFunc(e.serve))
	t.Cleanup(e.Close)
	return e
}

func (e *anthropicEngine) setMode(m string) {
	e.mu.Lock()
	e.mode = m
	e.mu.Unlock()
}

func (e *anthropicEngine) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	e.mu.Lock()
	mode := e.mode
	e.headers = append(e.headers, r.Header.Clone())
	e.mu.Unlock()
	if r.URL.Path != "/v1/messages" {
		http.NotFound(w, r)
		return
	}
	if !strings.Contains(string(body), `"stream":true`) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"id":"msg_1","type":"message","role":"assistant","model":"m","content":[{"type":"text","text":%q}],"stop_reason":"end_turn","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":2}}`, e.text)
		return
	}
	w.Header().Set("Content-Type", "text/event-stream")
	fl := http.NewResponseController(w)
	io.WriteString(w, "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n")
	io.WriteString(w, "event: ping\ndata: {\"type\": \"ping\"}\n\n")
	io.WriteString(w, "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n")
	fl.Flush()
	if mode == "hangup" {
		panic(http.ErrAbortHandler)
	}
	// a final assistant message is the start of the answer (prefill):
	// continue after it
	prefix := assistantPrefill(body)
	words := strings.SplitAfter(strings.TrimPrefix(e.text, prefix), " ")
	for i, word := range words {
		fmt.Fprintf(w, "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":%q}}\n\n", word)
		fl.Flush()
		if (mode == "cut" || mode == "cutonce" && prefix == "") && i == 0 {
			panic(http.ErrAbortHandler)
		}
	}
	io.WriteString(w, "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n")
	io.WriteString(w, "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\",\"stop_sequence\":null},\"usage\":{\"output_tokens\":5}}\n\n")
	if mode != "nostop" {
		io.WriteString(w, "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n")
	}
}

// assistantPrefill is the content of a request's last message when that
// message is the assistant's.
func assistantPrefill(body []byte) string {
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content any    `json:"content"`
		} `json:"messages"`
	}
	if json.Unmarshal(body, &req) != nil || len(req.Messages) == 0 {
		return ""
	}
	last := req.Messages[len(req.Messages)-1]
	if s, ok := last.Content.(string); ok && last.Role == "assistant" {
		return s
	}
	return ""
}

const anthropicKey = "gateway-key-for-claude-code"

func anthropicClient(url, key string) anthropic.Client {
	return anthropic.NewClient(option.WithBaseURL(url+"/"), option.WithAPIKey(key), option.WithMaxRetries(0))
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     model,
		MaxTokens: 64,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi"))},
	}
}

// streamMessage reads a whole SDK stream into one message.
func streamMessage(c anthropic.Client, model string) (string, error) {
	stream := c.Messages.NewStreaming(context.Background(), messageParams(model))
	var msg anthropic.Message
	for stream.Next() {
		if err := msg.Accumulate(stream.Current()); err != nil {
			return "", err
		}
	}
	var text strings.Builder
	for _, b := range msg.Content {
		text.WriteString(b.Text)
	}
	return text.String(), stream.Err()
}

func anthropicGateway(t *testing.T) (*anthropicEngine, *anthropicEngine, string) {
	primary := newAnthropicEngine(t, "hello from the primary")
	backup := newAnthropicEngine(t, "hello from the backup")
	zero := 0
	_, url := testGateway(t, config.Config{
		Keys: []config.Key{{Value: anthropicKey}},
		Engines: []engines.Config{
			{Name: "local", To: primary.URL, Models: []string{"qwen"}, Fallback: "backup", Retries: &zero},
			{Name: "backup", To: backup.URL, Models: []string{"claude-backup"}, APIKey: "backup-own-key-0001", APIKeyHeader: "x-api-key"},
			// translate off: a Messages request never reaches it
			{Name: "openai", To: primary.URL, Models: []string{"gpt-only"}, APIs: []string{"openai"}, Translate: new(bool)},
		},
	}, nil)
	return primary, backup, url
}

func TestAnthropicSDKThroughTheGateway(t *testing.T) {
	primary, backup, url := anthropicGateway(t)
	c := anthropicClient(url, anthropicKey)

	msg, err := c.Messages.New(context.Background(), messageParams("qwen"))
	if err != nil || len(msg.Content) != 1 || msg.Content[0].Text != "hello from the primary" {
		t.Fatalf("%+v %v", msg, err)
	}
	text, err := streamMessage(c, "qwen")
	if err != nil || text != "hello from the primary" {
		t.Fatalf("stream: %q %v", text, err)
	}
	// the prompt's tokens come in message_start, the answer's in message_delta
	if u := lastResult.Load().Usage; u != (api.Usage{Input: 3, Output: 5}) {
		t.Fatalf("usage of the stream: %+v", u)
	}
	// the caller's x-api-key never leaves; anthropic-version passes
	for _, h := range primary.headers {
		if strings.Contains(fmt.Sprint(h), anthropicKey) {
			t.Fatalf("the caller's key reached the engine: %v", h)
		}
		if h.Get("Anthropic-Version") == "" {
			t.Fatalf("anthropic-version did not pass: %v", h)
		}
	}

	// a hang-up before the first content delta: the fallback serves it,
	// and its own key goes as x-api-key
	primary.setMode("hangup")
	text, err = streamMessage(c, "qwen")
	if err != nil || text != "hello from the backup" {
		t.Fatalf("hang-up before content: %q %v", text, err)
	}
	if got := backup.headers[len(backup.headers)-1].Get("X-Api-Key"); got != "backup-own-key-0001" {
		t.Fatalf("the fallback got x-api-key %q", got)
	}

	// a cut after content is the SDK's error, never a tidy short answer
	primary.setMode("cut")
	text, err = streamMessage(c, "qwen")
	if err == nil {
		t.Fatalf("a cut stream ended cleanly with %q", text)
	}
	if !strings.Contains(err.Error(), "cut the stream") {
		t.Fatalf("the in-band error: %v", err)
	}

	// an end without message_stop is a cut too
	primary.setMode("nostop")
	if text, err = streamMessage(c, "qwen"); err == nil {
		t.Fatalf("a stream without message_stop ended cleanly with %q", text)
	}
}

func TestAnthropicStreamCutAfterContentIsResumedWithOneSeam(t *testing.T) {
	local := newAnthropicEngine(t, "the whole answer, in several words")
	zero := 0
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "local", To: local.URL, Models: []string{"qwen"}, Retries: &zero, Resume: new(true), Prefill: new(true)},
	}}, nil)
	local.setMode("cutonce")
	text, err := streamMessage(anthropicClient(url, ""), "qwen")
	if err != nil || text != "the whole answer, in several words" {
		t.Fatalf("%q %v", text, err)
	}
	local.mu.Lock()
	calls := len(local.headers)
	local.mu.Unlock()
	if calls != 2 {
		t.Fatalf("%d calls, want the cut one and its continuation", calls)
	}

	// the raw stream: one message_start, one content_block_start, one seam
	req, _ := http.NewRequest(http.MethodPost, url+"/v1/messages", strings.NewReader(
		`{"model":"qwen","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for what, n := range map[string]int{"event: message_start": 1, "event: content_block_start": 1, ": resumed on local": 1, "event: message_stop": 1} {
		if got := strings.Count(string(raw), what); got != n {
			t.Fatalf("%d × %q in\n%s", got, what, raw)
		}
	}

	// a tool_use block is not resumable: the cut is the client's error
	if tr := (&transcript{gram: grammar.Grammar{API: api.Messages}}); true {
		tr.add([]byte("event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"t\",\"name\":\"f\",\"input\":{}}}\n\n"))
		if !tr.off {
			t.Fatal("a tool_use block was taken for resumable text")
		}
	}
}

func TestAnthropicErrorsAreAnthropicShaped(t *testing.T) {
	_, _, url := anthropicGateway(t)
	var apiErr *anthropic.Error

	c, wrong := anthropicClient(url, anthropicKey), anthropicClient(url, "a-wrong-key-of-some-length")
	_, err := c.Messages.New(context.Background(), messageParams("nope"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || apiErr.Type() != "not_found_error" ||
		!strings.Contains(apiErr.RawJSON(), `the model \"nope\" is not served here`) {
		t.Fatalf("unknown model: %v", err)
	}
	_, err = wrong.Messages.New(context.Background(), messageParams("qwen"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 401 || apiErr.Type() != "authentication_error" {
		t.Fatalf("bad key: %v", err)
	}
	_, err = c.Messages.New(context.Background(), messageParams("gpt-only"))
	if !errors.As(err, &apiErr) || apiErr.StatusCode != 404 || !strings.Contains(apiErr.RawJSON(), "speaks only openai") {
		t.Fatalf("a model whose engine does not speak the Messages API: %v", err)
	}
}

func TestAnthropicClientsListModelsInTheirShape(t *testing.T) {
	_, _, url := anthropicGateway(t)
	c := anthropicClient(url, anthropicKey)
	page, err := c.Models.List(context.Background(), anthropic.ModelListParams{})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "qwen,claude-backup" {
		t.Fatalf("models %v (gpt-only speaks only OpenAI's API, and no translation)", ids)
	}
}
