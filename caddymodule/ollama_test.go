package caddymodule

import (
	"bytes"
	"context"
	"debug/buildinfo"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/testdata/tinygguf"
)

// The TestRealOllama tests run the gateway in front of a real `ollama serve`
// that it starts on demand, with the tiny random-weight model of
// testdata/tinygguf, through OpenAI's API and Anthropic's Messages
// API. They are opt-in: building ollama takes most of
// an hour (docs/real-engines.md), so they run only when LLMGW_OLLAMA names
// an ollama binary. The model's text is garbage: they assert structure
// (status, chunks, finish, usage, [DONE], the engine's life), never content.

// ollamaEngine is the engine's name in the tests' configs.
const ollamaEngine = "ollama"

// tinyMaxTokens bounds every answer: a random model rarely says <|im_end|>,
// and ollama would otherwise generate until its context is full.
const tinyMaxTokens = 8

// realOllama is an ollama binary and a directory with its models, its home
// and the tiny model.
type realOllama struct {
	bin, dir string
}

// ollamaBinary is the ollama that LLMGW_OLLAMA names; without it the test is
// skipped.
func ollamaBinary(t *testing.T) string {
	t.Helper()
	bin := os.Getenv("LLMGW_OLLAMA")
	if bin == "" {
		t.Skip("real-ollama test: set LLMGW_OLLAMA=/path/to/ollama to run it (docs/real-engines.md)")
	}
	abs, err := filepath.Abs(bin)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
		t.Fatalf("LLMGW_OLLAMA=%s is not an executable file (%v)", bin, err)
	}
	// `go install` leaves ollama's own version at 0.0.0 (ollama --version,
	// /api/version): the module version in the binary says which it is
	if info, err := buildinfo.ReadFile(abs); err == nil {
		t.Logf("ollama: %s %s", info.Main.Path, info.Main.Version)
	}
	return abs
}

// startRealOllama loads a gateway whose engine runs `ollama serve` with its
// models and home in a temp dir, starts the engine with the admin API and
// registers the tiny model with `ollama create` against it, as an operator
// would. With idle set, the config is then reloaded with that idle_timeout:
// the changed definition stops the process that registered the model, so
// the test begins with the engine stopped and the model on disk.
func startRealOllama(t *testing.T, idle string) {
	t.Helper()
	o := realOllama{bin: ollamaBinary(t), dir: t.TempDir()}
	for _, d := range []string{"models", "home"} {
		if err := os.Mkdir(filepath.Join(o.dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	gguf := filepath.Join(o.dir, "tiny.gguf")
	if err := tinygguf.WriteFile(gguf); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(o.dir, "Modelfile"), []byte(tinygguf.Modelfile(gguf)), 0o644); err != nil {
		t.Fatal(err)
	}

	startGateway(t, o.site(""))
	// registered after t.TempDir, so it runs first: ollama is stopped
	// before its directory is removed, and no runner outlives the test
	t.Cleanup(func() { stopEngine(t, ollamaEngine) })

	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/"+ollamaEngine+"/start"))
	if resp.StatusCode != 200 {
		t.Fatalf("admin start of ollama: %d %s", resp.StatusCode, body)
	}
	o.create(t, status(t, ollamaEngine).Port)

	if idle != "" {
		startGateway(t, o.site(idle))
		awaitState(t, ollamaEngine, "stopped")
	}
}

// site is the llm_gateway block: the example's engine (examples/ollama),
// with everything ollama writes kept in the test's directory.
func (o realOllama) site(idle string) string {
	s := fmt.Sprintf(`
		engine %s {
			cmd %s serve
			env OLLAMA_HOST=127.0.0.1:{engine.port}
			env %s
			env %s
			to http://127.0.0.1:{engine.port}
			ready /
			start_timeout 1m
			models tiny tiny:latest not-in-ollama
`, ollamaEngine, caddyQuote(o.bin),
		caddyQuote("OLLAMA_MODELS="+filepath.Join(o.dir, "models")),
		caddyQuote("HOME="+filepath.Join(o.dir, "home")))
	if idle != "" {
		s += "\t\t\tidle_timeout " + idle + "\n"
	}
	return s + "\t\t}"
}

// caddyQuote makes s one Caddyfile token, whatever spaces or quotes a
// temp dir's path has.
func caddyQuote(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `\"`) + `"`
}

// create registers the tiny model with the ollama listening on port, and
// checks that ollama lists it.
func (o realOllama) create(t *testing.T, port int) {
	t.Helper()
	host := "127.0.0.1:" + strconv.Itoa(port)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, o.bin, "create", "tiny", "-f", filepath.Join(o.dir, "Modelfile"))
	cmd.Env = append(os.Environ(), "OLLAMA_HOST="+host, "HOME="+filepath.Join(o.dir, "home"))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("ollama create tiny: %v\n%s\nengine output:\n%s", err, out, engineLines(t))
	}
	resp, body := do(t, mustReq(http.MethodGet, "http://"+host+"/v1/models"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"tiny:latest"`) {
		t.Fatalf("ollama's /v1/models after create: %d %s", resp.StatusCode, body)
	}
}

// stopEngine stops an engine through the admin API, for a cleanup: it only
// logs what goes wrong.
func stopEngine(t *testing.T, name string) {
	client := &http.Client{Timeout: 30 * time.Second}
	resp, err := client.Post(adminURL+"/llm_gateway/engines/"+name+"/stop", "application/json", nil)
	if err != nil {
		t.Logf("stopping engine %s: %v", name, err)
		return
	}
	resp.Body.Close()
}

// engineLines is the engine's last output lines, for failure messages; it
// never fails the test itself, so the failure it explains stays the one
// reported.
func engineLines(t *testing.T) string {
	client := &http.Client{Timeout: 10 * time.Second}
	resp, err := client.Get(adminURL + "/llm_gateway/engines/" + ollamaEngine)
	if err != nil {
		return fmt.Sprintf("(no engine status: %v)", err)
	}
	defer resp.Body.Close()
	var s engines.Status
	if err := json.NewDecoder(resp.Body).Decode(&s); err != nil || resp.StatusCode != 200 {
		return fmt.Sprintf("(no engine status: %d %v)", resp.StatusCode, err)
	}
	return strings.Join(s.LastLines, "\n")
}

// tinyChat asks the tiny model for a short answer. Each call's message
// differs, so ollama's prompt cache never covers a whole prompt.
func tinyChat(model, msg string) openai.ChatCompletionNewParams {
	p := chatParams(model, msg)
	p.MaxTokens = openai.Int(tinyMaxTokens) // ollama reads max_tokens, not max_completion_tokens
	return p
}

// coldClient allows for ollama's start and the model's load in one request.
func coldClient() *openai.Client {
	return sdk("", option.WithRequestTimeout(2*time.Minute))
}

// checkUsage asserts the shape of an answer's token counts.
func checkUsage(t *testing.T, what string, u openai.CompletionUsage) {
	t.Helper()
	if u.PromptTokens <= 0 || u.CompletionTokens < 0 || u.CompletionTokens > tinyMaxTokens ||
		u.TotalTokens != u.PromptTokens+u.CompletionTokens {
		t.Errorf("%s: usage prompt %d, completion %d, total %d: want prompt tokens, at most %d completion tokens and their total",
			what, u.PromptTokens, u.CompletionTokens, u.TotalTokens, tinyMaxTokens)
	}
}

func checkFinish(t *testing.T, what, reason string) {
	t.Helper()
	if reason != "stop" && reason != "length" {
		t.Errorf("%s: finish_reason %q, want stop or length", what, reason)
	}
}

func TestRealOllamaAnswersAndStreamsThroughTheGateway(t *testing.T) {
	startRealOllama(t, "")
	ctx := context.Background()
	client := coldClient()

	// not streamed: one JSON answer, the first request loads the model
	var raw *http.Response
	answer, err := client.Chat.Completions.New(ctx, tinyChat("tiny", "hello there"), option.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("%v\nengine output:\n%s", err, engineLines(t))
	}
	if raw.StatusCode != 200 || raw.Header.Get("X-LLM-Engine") != ollamaEngine {
		t.Fatalf("status %d, X-LLM-Engine %q", raw.StatusCode, raw.Header.Get("X-LLM-Engine"))
	}
	if answer.Object != "chat.completion" || len(answer.Choices) != 1 || answer.Choices[0].Message.Role != "assistant" {
		t.Fatalf("answer: %s", answer.RawJSON())
	}
	checkFinish(t, "answer", answer.Choices[0].FinishReason)
	checkUsage(t, "answer", answer.Usage)

	// the tag is optional, as with ollama itself
	if _, err := client.Chat.Completions.New(ctx, tinyChat("tiny:latest", "with its tag")); err != nil {
		t.Fatalf("tiny:latest: %v", err)
	}

	// streamed through the SDK, usage requested: content chunks, one with
	// the finish reason, then a last chunk with no choices and the usage
	params := tinyChat("tiny", "stream please")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var chunks []openai.ChatCompletionChunk
	for stream.Next() {
		chunks = append(chunks, stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if len(chunks) < 2 {
		t.Fatalf("%d chunks, want at least the finish and the usage", len(chunks))
	}
	finish := ""
	for i, c := range chunks[:len(chunks)-1] {
		if c.Object != "chat.completion.chunk" || len(c.Choices) != 1 {
			t.Fatalf("chunk %d: %s", i, c.RawJSON())
		}
		if r := c.Choices[0].FinishReason; r != "" {
			if finish != "" {
				t.Fatalf("a second finish_reason in chunk %d: %s", i, c.RawJSON())
			}
			finish = r
		}
	}
	checkFinish(t, "stream", finish)
	last := chunks[len(chunks)-1]
	if len(last.Choices) != 0 {
		t.Fatalf("the last chunk has choices: %s", last.RawJSON())
	}
	checkUsage(t, "stream", last.Usage)

	// streamed, raw: server-sent events ending in data: [DONE]
	resp, body := post(t, "/v1/chat/completions", fmt.Sprintf(
		`{"model":"tiny","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"raw stream"}]}`, tinyMaxTokens))
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("raw stream: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if events := strings.Count(body, "data: "); events < 2 || !strings.HasSuffix(strings.TrimSpace(body), "data: [DONE]") {
		t.Fatalf("raw stream of %d events does not end in [DONE]:\n%s", events, body)
	}

	// a model the gateway routes here but ollama does not have: ollama's
	// own OpenAI-shaped 404 (not the gateway's model_not_found) reaches the
	// client, with its message
	_, err = client.Chat.Completions.New(ctx, tinyChat("not-in-ollama", "hi"))
	e := apiError(t, err, 404)
	if e.Response.Header.Get("X-LLM-Engine") != ollamaEngine || !strings.Contains(e.Message, "not-in-ollama") {
		t.Fatalf("want ollama's 404 naming the model, got X-LLM-Engine %q: %s", e.Response.Header.Get("X-LLM-Engine"), e.RawJSON())
	}
}

func TestRealOllamaStopsWhenIdleAndStartsAgainOnTheNextRequest(t *testing.T) {
	startRealOllama(t, "3s")
	ctx := context.Background()

	// the engine is stopped: this request starts ollama and loads the model
	if _, err := coldClient().Chat.Completions.New(ctx, tinyChat("tiny", "wake up")); err != nil {
		t.Fatalf("%v\nengine output:\n%s", err, engineLines(t))
	}
	first := status(t, ollamaEngine)
	if first.State != "ready" || first.PID == 0 {
		t.Fatalf("after the first answer: %+v", first)
	}

	awaitState(t, ollamaEngine, "stopped")
	// `ollama serve` and the runner it spawned for the model, all of its
	// process group, are gone
	deadline := time.Now().Add(10 * time.Second)
	for left := processGroup(first.PID); len(left) > 0; left = processGroup(first.PID) {
		if time.Now().After(deadline) {
			t.Fatalf("processes %v of the idle engine's group %d still run", left, first.PID)
		}
		time.Sleep(50 * time.Millisecond)
	}

	// the next request starts it again, with the model still registered
	params := tinyChat("tiny", "again")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := coldClient().Chat.Completions.NewStreaming(ctx, params)
	var last openai.ChatCompletionChunk
	for stream.Next() {
		last = stream.Current()
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream after the restart: %v\nengine output:\n%s", err, engineLines(t))
	}
	checkUsage(t, "stream after the restart", last.Usage)
	if second := status(t, ollamaEngine); second.PID == 0 || second.PID == first.PID {
		t.Fatalf("pid after the restart %d, before %d", second.PID, first.PID)
	}
}

// anthropicSDK is the official Anthropic Go SDK pointed at the gateway, with
// time for ollama's start and the model's load in one request. The gateway
// of these tests has no keys; the SDK wants one all the same.
func anthropicSDK() anthropic.Client {
	return anthropic.NewClient(
		anthropicoption.WithHTTPClient(testClient),
		anthropicoption.WithBaseURL(gwURL+"/"),
		anthropicoption.WithAPIKey("a-key-the-gateway-strips"),
		anthropicoption.WithMaxRetries(0),
		anthropicoption.WithRequestTimeout(2*time.Minute),
	)
}

// tinyMessage asks the tiny model for a short Messages API answer.
func tinyMessage(model, msg string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{
		Model:     anthropic.Model(model),
		MaxTokens: tinyMaxTokens,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock(msg))},
	}
}

// checkStop asserts a Messages answer's stop reason: the random model stops
// on its own or runs into max_tokens.
func checkStop(t *testing.T, what string, reason anthropic.StopReason) {
	t.Helper()
	if reason != anthropic.StopReasonEndTurn && reason != anthropic.StopReasonMaxTokens {
		t.Errorf("%s: stop_reason %q, want end_turn or max_tokens", what, reason)
	}
}

// checkMessageUsage asserts the shape of a Messages answer's token counts.
func checkMessageUsage(t *testing.T, what string, in, out int64) {
	t.Helper()
	if in <= 0 || out < 0 || out > tinyMaxTokens {
		t.Errorf("%s: usage input %d, output %d: want input tokens and at most %d output tokens", what, in, out, tinyMaxTokens)
	}
}

// streamTinyMessage streams a Messages answer through the SDK and returns
// the event types in order and the message they add up to.
func streamTinyMessage(t *testing.T, c anthropic.Client, msg string) ([]string, anthropic.Message) {
	t.Helper()
	stream := c.Messages.NewStreaming(context.Background(), tinyMessage("tiny", msg))
	var types []string
	var acc anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulating %s: %v", ev.RawJSON(), err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatalf("stream: %v (events %v)\nengine output:\n%s", err, types, engineLines(t))
	}
	return types, acc
}

// checkMessageStream asserts an Anthropic stream's grammar: message_start
// first, content blocks opened before their deltas and closed, one
// message_delta with the stop reason, message_stop last.
func checkMessageStream(t *testing.T, what string, types []string, msg anthropic.Message) {
	t.Helper()
	if len(types) < 3 || types[0] != "message_start" || types[len(types)-1] != "message_stop" ||
		types[len(types)-2] != "message_delta" {
		t.Fatalf("%s: events %v, want message_start … message_delta, message_stop", what, types)
	}
	open := false
	for _, ty := range types[1 : len(types)-2] {
		switch {
		case ty == "content_block_start" && !open, ty == "content_block_stop" && open:
			open = !open
		case ty == "content_block_delta" && open:
		default:
			t.Fatalf("%s: events %v: %s out of place", what, types, ty)
		}
	}
	if open {
		t.Fatalf("%s: events %v: a content block left open", what, types)
	}
	if msg.Role != "assistant" {
		t.Errorf("%s: role %q", what, msg.Role)
	}
	checkStop(t, what, msg.StopReason)
	checkMessageUsage(t, what, msg.Usage.InputTokens, msg.Usage.OutputTokens)
}

// Anthropic's Messages API through the gateway to a real ollama
// (which answers /v1/messages itself), started on demand, with the official
// Anthropic Go SDK as the client.
func TestRealOllamaAnswersAnthropicMessagesThroughTheGateway(t *testing.T) {
	startRealOllama(t, "10m") // the engine is stopped, the model on disk
	ctx := context.Background()
	c := anthropicSDK()

	// not streamed: the request starts ollama, which loads the model
	var raw *http.Response
	msg, err := c.Messages.New(ctx, tinyMessage("tiny", "hello there"), anthropicoption.WithResponseInto(&raw))
	if err != nil {
		t.Fatalf("%v\nengine output:\n%s", err, engineLines(t))
	}
	if raw.StatusCode != 200 || raw.Header.Get("X-LLM-Engine") != ollamaEngine {
		t.Fatalf("status %d, X-LLM-Engine %q", raw.StatusCode, raw.Header.Get("X-LLM-Engine"))
	}
	if msg.Type != "message" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") {
		t.Fatalf("answer: %s", msg.RawJSON())
	}
	for _, b := range msg.Content {
		if b.Type != "text" {
			t.Fatalf("a %s block in the tiny model's answer: %s", b.Type, msg.RawJSON())
		}
	}
	checkStop(t, "answer", msg.StopReason)
	checkMessageUsage(t, "answer", msg.Usage.InputTokens, msg.Usage.OutputTokens)
	if s := status(t, ollamaEngine); s.State != "ready" || s.PID == 0 {
		t.Fatalf("after the first answer: %+v", s)
	}

	// streamed through the SDK: Anthropic's typed events, whole
	types, streamed := streamTinyMessage(t, c, "stream please")
	checkMessageStream(t, "stream", types, streamed)

	// streamed, raw: typed server-sent events ending in message_stop, none
	// of OpenAI's data: [DONE]
	resp, body := post(t, "/v1/messages", fmt.Sprintf(
		`{"model":"tiny","stream":true,"max_tokens":%d,"messages":[{"role":"user","content":"raw stream"}]}`, tinyMaxTokens),
		"anthropic-version", "2023-06-01")
	if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("raw stream: %d %s\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	if !strings.HasPrefix(body, "event: message_start\n") || strings.Contains(body, "[DONE]") ||
		!strings.HasSuffix(strings.TrimSpace(body), `event: message_stop`+"\n"+`data: {"type":"message_stop"}`) {
		t.Fatalf("raw stream does not go from message_start to message_stop:\n%s", body)
	}

	// stopped again, a stream is what starts ollama: the wait for the
	// engine happens before the stream's first event
	before := status(t, ollamaEngine)
	resp, body = do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/"+ollamaEngine+"/stop"))
	if resp.StatusCode != 200 {
		t.Fatalf("admin stop: %d %s", resp.StatusCode, body)
	}
	awaitState(t, ollamaEngine, "stopped")
	types, streamed = streamTinyMessage(t, c, "wake up and stream")
	checkMessageStream(t, "stream that started ollama", types, streamed)
	if after := status(t, ollamaEngine); after.PID == 0 || after.PID == before.PID {
		t.Fatalf("pid after the stream %d, before the stop %d: the stream did not start ollama", after.PID, before.PID)
	}

	// a model the gateway routes here but ollama does not have: ollama's
	// own Anthropic-shaped 404 reaches the SDK as its not_found_error
	_, err = c.Messages.New(ctx, tinyMessage("not-in-ollama", "hi"))
	var e *anthropic.Error
	if !errors.As(err, &e) || e.StatusCode != 404 || e.Type() != "not_found_error" ||
		e.Response.Header.Get("X-LLM-Engine") != ollamaEngine || !strings.Contains(e.RawJSON(), "not-in-ollama") {
		t.Fatalf("want ollama's not_found_error naming the model, got %v", err)
	}
}

// TestTinyModelOfTheRealEngineTestsIsWellFormedGGUF runs in every
// `go test ./...`, which skips testdata/ and so testdata/tinygguf's own,
// more detailed tests: the model the real-ollama tests register is
// well-formed GGUF v3, small, and the same bytes on every run.
func TestTinyModelOfTheRealEngineTestsIsWellFormedGGUF(t *testing.T) {
	var first, second bytes.Buffer
	if err := tinygguf.Write(&first); err != nil {
		t.Fatal(err)
	}
	if err := tinygguf.Write(&second); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(first.Bytes(), second.Bytes()) || first.Len() >= 1<<20 {
		t.Fatalf("two runs wrote %d and %d bytes, not the same bytes under 1 MiB", first.Len(), second.Len())
	}
	f, err := tinygguf.Parse(first.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := f.Get("general.architecture")
	eos, _ := f.Get("tokenizer.ggml.eos_token_id")
	if f.Version != 3 || arch != "llama" || eos != uint32(tinygguf.EOSID) || f.Alignment != tinygguf.Alignment ||
		len(f.Tensors) != 3+9*tinygguf.BlockCount || f.DataOffset%tinygguf.Alignment != 0 {
		t.Fatalf("version %d, architecture %v, eos %v, alignment %d, %d tensors, data at %d",
			f.Version, arch, eos, f.Alignment, len(f.Tensors), f.DataOffset)
	}
}

// processGroup lists the live (not zombie) processes of process group pgid,
// from /proc.
func processGroup(pgid int) []int {
	dirs, _ := os.ReadDir("/proc")
	var pids []int
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", d.Name(), "stat"))
		if err != nil {
			continue
		}
		// after the parenthesised command name: state ppid pgrp …
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		fields := strings.Fields(s[i+1:])
		if len(fields) < 3 || fields[0] == "Z" {
			continue
		}
		if g, err := strconv.Atoi(fields[2]); err == nil && g == pgid {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}
