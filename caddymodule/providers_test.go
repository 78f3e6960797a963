package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anthropics/anthropic-sdk-go/v2"
	anthropicoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// Cloud providers end to end: a real Caddy loads a Caddyfile whose engines
// are `provider anthropic|bedrock|gemini|azure`, pointed with `to` at fakes
// that speak each provider's wire format (internal/providertest), and
// the official SDKs talk to it. What reaches a fake is what the provider
// would accept (paths, keys, SigV4, members), what comes back reaches
// each client in its own grammar, failures move on or stop as the verdict
// table says, and no secret shows anywhere.

// pvEnv sets every provider test's secrets: the engines' keys (the
// Caddyfile reads them as {env.*}) and AWS's default chain's static
// credentials, with nothing else for the chain to find.
func pvEnv(t *testing.T) {
	t.Setenv("PV_ANTHROPIC_KEY", providertest.AnthropicKey)
	t.Setenv("PV_GEMINI_KEY", providertest.GeminiKey)
	t.Setenv("PV_AZURE_KEY", providertest.AzureKey)
	providertest.AWSKeys.Env(t)
}

// Engine blocks, one per provider, pointed at their fakes; extra is more
// lines (retries, breaker, fallback).
func anthropicEngine(f *providertest.Fake, extra string) string {
	return fmt.Sprintf(`
		engine anthropic {
			provider anthropic
			to %s
			api_key {env.PV_ANTHROPIC_KEY}
			models %s
			%s
		}`, f.URL, providertest.ClaudeModel, extra)
}

func bedrockEngine(f *providertest.Fake, extra string) string {
	return fmt.Sprintf(`
		engine bedrock {
			provider bedrock
			region us-east-1
			to %s
			models %s
			%s
		}`, f.URL, providertest.BedrockModel, extra)
}

func geminiEngine(f *providertest.Fake, extra string) string {
	return fmt.Sprintf(`
		engine gemini {
			provider gemini
			to %s
			api_key {env.PV_GEMINI_KEY}
			models %s
			%s
		}`, f.URL, providertest.GeminiModel, extra)
}

func azureEngine(f *providertest.Fake, extra string) string {
	return fmt.Sprintf(`
		engine azure {
			provider azure
			to %s
			api_key {env.PV_AZURE_KEY}
			api_version %s
			models %s
			%s
		}`, f.URL, providertest.AzureAPIVersion, providertest.AzureDeployment, extra)
}

// backupEngine is a plain OpenAI-compatible engine that answers anything.
func backupEngine(rec *recorder) string {
	return fmt.Sprintf(`
		engine backup {
			to %s
			api openai
			models backup-model
		}`, rec.URL)
}

// lastTries is the newest request's attempts as the history tells them:
// engine=reason, in order.
func lastTries(t *testing.T) string {
	t.Helper()
	syncHistory(t)
	p := historyPage(t, "?limit=1")
	if len(p.Requests) == 0 {
		t.Fatal("no request in the history")
	}
	var tries []string
	for _, try := range p.Requests[0].Tries {
		tries = append(tries, try.Engine+"="+try.Reason)
	}
	return strings.Join(tries, " ")
}

func streamUsage() openai.ChatCompletionStreamOptionsParam {
	return openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
}

// accumulateChat reads a chat stream whole with openai-go's accumulator.
func accumulateChat(t *testing.T, c *openai.Client, p openai.ChatCompletionNewParams, opts ...option.RequestOption) openai.ChatCompletion {
	t.Helper()
	s := c.Chat.Completions.NewStreaming(context.Background(), p, opts...)
	var acc openai.ChatCompletionAccumulator
	n := 0
	for s.Next() {
		n++
		if !acc.AddChunk(s.Current()) {
			t.Fatalf("the accumulator refused chunk %d: %s", n, s.Current().RawJSON())
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	if n < 3 {
		t.Fatalf("the answer came in %d chunks, want it streamed", n)
	}
	return acc.ChatCompletion
}

// wantChat asserts a chat completion is text, stopped, with the usage.
func wantChat(t *testing.T, c openai.ChatCompletion, text string, in, out int64) {
	t.Helper()
	if len(c.Choices) != 1 || c.Choices[0].Message.Content != text || c.Choices[0].FinishReason != "stop" {
		t.Fatalf("want %q, stopped: %+v", text, c.Choices)
	}
	if c.Usage.PromptTokens != in || c.Usage.CompletionTokens != out || c.Usage.TotalTokens != in+out {
		t.Fatalf("usage %+v, want %d in, %d out", c.Usage, in, out)
	}
}

func messageParams(model string) anthropic.MessageNewParams {
	return anthropic.MessageNewParams{Model: anthropic.Model(model), MaxTokens: 256,
		Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello!"))}}
}

// accumulateMessage reads a Messages stream whole.
func accumulateMessage(t *testing.T, c anthropic.Client, p anthropic.MessageNewParams, opts ...anthropicoption.RequestOption) anthropic.Message {
	t.Helper()
	s := c.Messages.NewStreaming(context.Background(), p, opts...)
	var acc anthropic.Message
	var types []string
	for s.Next() {
		ev := s.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulating %s: %v", ev.RawJSON(), err)
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v (events %v)", err, types)
	}
	if len(types) < 4 || types[0] != "message_start" || types[len(types)-1] != "message_stop" {
		t.Fatalf("events %v", types)
	}
	return acc
}

// wantMessage asserts a message is text, ended, with the usage.
func wantMessage(t *testing.T, m anthropic.Message, text string, in, out int64) {
	t.Helper()
	if len(m.Content) != 1 || m.Content[0].Text != text || m.StopReason != anthropic.StopReasonEndTurn {
		t.Fatalf("want %q, end_turn: %s", text, m.RawJSON())
	}
	if m.Usage.InputTokens != in || m.Usage.OutputTokens != out {
		t.Fatalf("usage %+v, want %d in, %d out", m.Usage, in, out)
	}
}

// ---- 1. Meridian's request ----

// meridianRequest is Meridian's request, verbatim.
const meridianRequest = `{"model":"openai/gpt-4o-mini","messages":[{"role":"user","content":"Hello!"}],"fallbacks":["anthropic/claude-3-5-sonnet-20241022","bedrock/anthropic.claude-3-sonnet-20240229-v1:0"]}`

// OpenAI is rate limited, Anthropic overloaded, and Bedrock (SigV4 from
// the default chain) answers, to a raw request, openai-go's stream and
// anthropic-sdk-go's Messages (which goes to Anthropic natively first).
func TestProviderMeridianFallsBackThroughAnthropicToBedrock(t *testing.T) {
	pvEnv(t)
	limited := failing(t, 429, `{"error":{"message":"Rate limit reached for gpt-4o-mini in organization org-x on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
	anth := providertest.Anthropic(t, "overloaded")
	bed := providertest.Bedrock(t, "ok")
	// no retries on the failing two: each failure is one request to count
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine openai {
			to %s
			api openai
			models gpt-4o-mini
			retries 0
		}`, callerKey, limited.URL)+anthropicEngine(anth, "retries 0")+bedrockEngine(bed, ""))

	t.Run("verbatim", func(t *testing.T) {
		resp, out := post(t, "/v1/chat/completions", meridianRequest, "Authorization", "Bearer "+callerKey)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "bedrock" || resp.Header.Get("X-LLM-Fallback") != "bedrock" {
			t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, out)
		}
		var c openai.ChatCompletion
		if err := json.Unmarshal([]byte(out), &c); err != nil || c.Object != "chat.completion" {
			t.Fatalf("not a chat completion (%v): %s", err, out)
		}
		wantChat(t, c, providertest.BedrockText, providertest.BedrockIn, providertest.BedrockOut)
		if got := lastTries(t); got != "openai=429 anthropic=529 bedrock=ok" {
			t.Fatalf("attempts %q", got)
		}
	})

	t.Run("openai-go stream", func(t *testing.T) {
		var raw *http.Response
		p := chatParams("openai/gpt-4o-mini", "Hello!")
		p.StreamOptions = streamUsage()
		c := accumulateChat(t, sdk(callerKey), p, option.WithJSONSet("fallbacks", []string{"anthropic/" + providertest.ClaudeModel, "bedrock/" + providertest.BedrockModel}),
			option.WithResponseInto(&raw))
		wantChat(t, c, providertest.BedrockText, providertest.BedrockIn, providertest.BedrockOut)
		if raw.Header.Get("X-LLM-Engine") != "bedrock" {
			t.Fatalf("headers %v", raw.Header)
		}
		if got := lastTries(t); got != "openai=429 anthropic=529 bedrock=ok" {
			t.Fatalf("attempts %q", got)
		}
	})

	fallbacks := anthropicoption.WithJSONSet("fallbacks", []string{"bedrock/" + providertest.BedrockModel})
	t.Run("anthropic-sdk-go", func(t *testing.T) {
		var raw *http.Response
		ac := anthropicClient(callerKey)
		m, err := ac.Messages.New(context.Background(), messageParams("anthropic/"+providertest.ClaudeModel), fallbacks,
			anthropicoption.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		wantMessage(t, *m, providertest.BedrockText, providertest.BedrockIn, providertest.BedrockOut)
		if raw.Header.Get("X-LLM-Engine") != "bedrock" {
			t.Fatalf("headers %v", raw.Header)
		}
		if got := lastTries(t); got != "anthropic=529 bedrock=ok" {
			t.Fatalf("attempts %q", got)
		}
	})

	t.Run("anthropic-sdk-go stream", func(t *testing.T) {
		m := accumulateMessage(t, anthropicClient(callerKey), messageParams("anthropic/"+providertest.ClaudeModel), fallbacks)
		wantMessage(t, m, providertest.BedrockText, providertest.BedrockIn, providertest.BedrockOut)
		if got := lastTries(t); got != "anthropic=529 bedrock=ok" {
			t.Fatalf("attempts %q", got)
		}
	})

	// each engine was asked once per request that named it, in its own
	// API, without the fallbacks or the caller's key
	if n := len(limited.all()); n != 2 {
		t.Errorf("openai was asked %d times, want 2", n)
	}
	anthReqs, bedReqs := anth.All(), bed.All()
	if len(anthReqs) != 4 || len(bedReqs) != 4 {
		t.Fatalf("anthropic was asked %d times, bedrock %d, want 4 each", len(anthReqs), len(bedReqs))
	}
	for i, r := range anthReqs {
		var m struct {
			Model string `json:"model"`
		}
		json.Unmarshal(r.Body, &m)
		// the Chat clients' get the engine's version; the Messages
		// clients' keep their SDK's own
		version := r.Header.Get("Anthropic-Version")
		if m.Model != providertest.ClaudeModel || i < 2 && version != "2023-06-01" || version == "" {
			t.Errorf("anthropic's request %d: anthropic-version %q, %s", i, r.Header.Get("Anthropic-Version"), r.Body)
		}
	}
	// the Messages clients' requests reached Anthropic as they were sent
	if s := string(anthReqs[2].Body); !strings.Contains(s, `"max_tokens":256`) {
		t.Errorf("the Messages client's request reached anthropic as %s", s)
	}
	wantPaths := []string{"/converse", "/converse-stream", "/converse", "/converse-stream"}
	for i, r := range bedReqs {
		if r.Path != "/model/"+providertest.BedrockModelPath+wantPaths[i] {
			t.Errorf("bedrock's request %d went to %s", i, r.Path)
		}
		var conv struct {
			Messages []struct {
				Role    string `json:"role"`
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		json.Unmarshal(r.Body, &conv)
		if len(conv.Messages) != 1 || conv.Messages[0].Role != "user" || len(conv.Messages[0].Content) != 1 || conv.Messages[0].Content[0].Text != "Hello!" {
			t.Errorf("bedrock's request %d: %s", i, r.Body)
		}
	}
	for _, f := range []*providertest.Fake{anth, bed} {
		for i, r := range f.All() {
			if strings.Contains(string(r.Body), "fallbacks") || strings.Contains(fmt.Sprint(r.Header), callerKey) {
				t.Errorf("%s's request %d carried the fallbacks or the caller's key: %v %s", f.URL, i, r.Header, r.Body)
			}
		}
	}

	// Bedrock throttled too: the client gets the primary's 429 with every
	// attempt named (Bedrock's twice: it keeps its default retry)
	bed.SetMode("throttled")
	const attempts = "openai=429, anthropic=529, bedrock=429, bedrock=429"
	resp, out := post(t, "/v1/chat/completions", meridianRequest, "Authorization", "Bearer "+callerKey)
	if resp.StatusCode != 429 || resp.Header.Get("X-LLM-Attempts") != attempts ||
		!strings.Contains(out, "rate_limit_exceeded") || !strings.Contains(out, "(attempts: "+attempts+")") {
		t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, out)
	}
}

// ---- 2. Failures: throttling moves on and opens the breaker; a content
// filter is the answer ----

func TestProviderThrottlingMovesOnAndOpensItsBreaker(t *testing.T) {
	pvEnv(t)
	cases := []struct {
		name, model, reason string
		fake                func(*testing.T) *providertest.Fake
		engine              func(*providertest.Fake, string) string
	}{
		{"anthropic", providertest.ClaudeModel, "529", func(t *testing.T) *providertest.Fake { return providertest.Anthropic(t, "overloaded") }, anthropicEngine},
		{"bedrock", providertest.BedrockModel, "429", func(t *testing.T) *providertest.Fake { return providertest.Bedrock(t, "throttled") }, bedrockEngine},
		{"gemini", providertest.GeminiModel, "429", func(t *testing.T) *providertest.Fake { return providertest.Gemini(t, "exhausted") }, geminiEngine},
		{"azure", providertest.AzureDeployment, "429", func(t *testing.T) *providertest.Fake { return providertest.Azure(t, "throttled") }, azureEngine},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fake := c.fake(t)
			backup := newRecorder(t, okChat)
			startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+
				c.engine(fake, "retries 0\n\t\t\tbreaker 1 1m\n\t\t\tfallback backup")+backupEngine(backup))
			for i := range 2 {
				var raw *http.Response
				if _, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(c.model, "Hello!"), option.WithResponseInto(&raw)); err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				if raw.Header.Get("X-LLM-Engine") != "backup" {
					t.Fatalf("request %d was answered by %q", i, raw.Header.Get("X-LLM-Engine"))
				}
				if n := fake.N(); n != 1 {
					t.Fatalf("after request %d the provider was asked %d times, want once (then its breaker open)", i, n)
				}
				want := c.name + "=" + c.reason + " backup=ok"
				if i == 1 {
					want = c.name + "=open backup=ok"
				}
				if got := lastTries(t); got != want {
					t.Fatalf("request %d: attempts %q, want %q", i, got, want)
				}
			}
			if s := status(t, c.name); s.ModelBreakers[c.model] != "open" || s.Breaker != "open" || s.EngineBreaker != "closed" {
				t.Fatalf("breakers: engine %s, models %v, worst %s", s.EngineBreaker, s.ModelBreakers, s.Breaker)
			}
			if n := len(backup.all()); n != 2 {
				t.Fatalf("the backup was asked %d times", n)
			}
		})
	}
}

func TestProviderContentFilterIsTheAnswer(t *testing.T) {
	pvEnv(t)
	t.Run("gemini SAFETY", func(t *testing.T) {
		gem := providertest.Gemini(t, "safety")
		backup := newRecorder(t, okChat)
		startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+geminiEngine(gem, "fallback backup")+backupEngine(backup))
		var raw *http.Response
		c, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(providertest.GeminiModel, "Hello!"),
			option.WithJSONSet("fallbacks", []string{"backup"}), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw.Header.Get("X-LLM-Engine") != "gemini" || len(c.Choices) != 1 || c.Choices[0].FinishReason != "content_filter" {
			t.Fatalf("%v: %s", raw.Header, c.RawJSON())
		}
		p := chatParams(providertest.GeminiModel, "Hello!")
		p.StreamOptions = streamUsage()
		s := sdk(callerKey).Chat.Completions.NewStreaming(context.Background(), p)
		var finish string
		for s.Next() {
			if ch := s.Current(); len(ch.Choices) > 0 && ch.Choices[0].FinishReason != "" {
				finish = ch.Choices[0].FinishReason
			}
		}
		if s.Err() != nil || finish != "content_filter" {
			t.Fatalf("stream: finish %q, %v", finish, s.Err())
		}
		if gem.N() != 2 || len(backup.all()) != 0 {
			t.Fatalf("gemini was asked %d times for 2 requests, the backup %d", gem.N(), len(backup.all()))
		}
	})
	t.Run("azure content_filter", func(t *testing.T) {
		az := providertest.Azure(t, "filtered")
		backup := newRecorder(t, okChat)
		startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+azureEngine(az, "fallback backup")+backupEngine(backup))
		resp, out := post(t, "/v1/chat/completions", `{"model":"gpt-4o","messages":[{"role":"user","content":"Hello!"}],"fallbacks":["backup"]}`,
			"Authorization", "Bearer "+callerKey)
		if resp.StatusCode != 400 || resp.Header.Get("X-LLM-Engine") != "azure" || !strings.Contains(out, `"code":"content_filter"`) ||
			!strings.Contains(out, "ResponsibleAIPolicyViolation") {
			t.Fatalf("%d %v: %s", resp.StatusCode, resp.Header, out)
		}
		_, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(providertest.AzureDeployment, "Hello!"))
		if e := apiError(t, err, 400); e.Code != "content_filter" {
			t.Fatalf("code %q", e.Code)
		}
		if az.N() != 2 || len(backup.all()) != 0 {
			t.Fatalf("azure was asked %d times for 2 requests, the backup %d", az.N(), len(backup.all()))
		}
	})
}

// A ConverseStream that Bedrock throttles before its first content moves
// on to the fallback; after it, the client's stream ends in an error,
// never in a tidy end.
func TestProviderBedrockStreamException(t *testing.T) {
	pvEnv(t)
	bed := providertest.Bedrock(t, "stream-throttled")
	backup := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{"role":"assistant","content":"ok"},"finish_reason":null}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"up","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	})
	startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+bedrockEngine(bed, "retries 0\n\t\t\tfallback backup")+backupEngine(backup))

	text, err := readStream(sdk(callerKey).Chat.Completions.NewStreaming(context.Background(), chatParams(providertest.BedrockModel, "Hello!")))
	if err != nil || text != "ok" {
		t.Fatalf("before the first content: %q, %v", text, err)
	}
	if got := lastTries(t); got != "bedrock=stream-error backup=ok" {
		t.Fatalf("attempts %q", got)
	}

	bed.SetMode("stream-cut")
	ac := anthropicClient(callerKey)
	s := ac.Messages.NewStreaming(context.Background(), messageParams(providertest.BedrockModel))
	var got strings.Builder
	for s.Next() {
		if ev := s.Current(); ev.Type == "content_block_delta" {
			got.WriteString(ev.Delta.Text)
		}
	}
	if s.Err() == nil || got.String() != providertest.BedrockText[:len(providertest.BedrockText)/2] {
		t.Fatalf("after the first content: %q, err %v", got.String(), s.Err())
	}
	if bed.N() != 2 || len(backup.all()) != 1 {
		t.Fatalf("bedrock was asked %d times, the backup %d", bed.N(), len(backup.all()))
	}
}

// ---- 3. Gemini and Azure answer every client ----

func TestProviderGeminiAndAzureAnswerEveryClient(t *testing.T) {
	pvEnv(t)
	gem, az := providertest.Gemini(t, "ok"), providertest.Azure(t, "ok")
	startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+geminiEngine(gem, "")+azureEngine(az, ""))
	for _, c := range []struct {
		name, model, text string
		in, out           int64
	}{
		{"gemini", providertest.GeminiModel, providertest.GeminiText, providertest.GeminiIn, providertest.GeminiOut},
		{"azure", providertest.AzureDeployment, providertest.AzureText, providertest.AzureIn, providertest.AzureOut},
	} {
		t.Run(c.name, func(t *testing.T) {
			chat, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(c.model, "Hello!"))
			if err != nil {
				t.Fatal(err)
			}
			wantChat(t, *chat, c.text, c.in, c.out)
			p := chatParams(c.model, "Hello!")
			p.StreamOptions = streamUsage()
			wantChat(t, accumulateChat(t, sdk(callerKey), p), c.text, c.in, c.out)
			ac := anthropicClient(callerKey)
			msg, err := ac.Messages.New(context.Background(), messageParams(c.model))
			if err != nil {
				t.Fatal(err)
			}
			wantMessage(t, *msg, c.text, c.in, c.out)
			wantMessage(t, accumulateMessage(t, anthropicClient(callerKey), messageParams(c.model)), c.text, c.in, c.out)
		})
	}
	// what they were sent: each request in the provider's API with its key
	// (the fakes refuse anything else), the streams to their stream paths
	if n := gem.N(); n != 4 {
		t.Fatalf("gemini was asked %d times", n)
	}
	for i, r := range gem.All() {
		stream := i%2 == 1
		if strings.HasSuffix(r.Path, ":streamGenerateContent") != stream || !strings.Contains(string(r.Body), `"Hello!"`) {
			t.Errorf("gemini's request %d: %s?%s %s", i, r.Path, r.Query, r.Body)
		}
	}
	if n := az.N(); n != 4 {
		t.Fatalf("azure was asked %d times", n)
	}
	for i, r := range az.All() {
		var req providertest.ChatRequest
		json.Unmarshal(r.Body, &req)
		if stream := i%2 == 1; req.Stream != stream || stream && (req.StreamOptions == nil || !req.StreamOptions.IncludeUsage) {
			t.Errorf("azure's request %d did not ask for its usage: %s", i, r.Body)
		}
	}
}

// ---- 4. Secrets never leak ----

func TestProviderSecretsNeverLeak(t *testing.T) {
	pvEnv(t)
	anth, bed, gem, az := providertest.Anthropic(t, "ok"), providertest.Bedrock(t, "ok"), providertest.Gemini(t, "ok"), providertest.Azure(t, "ok")
	// the keys as the docs write them, {env.*}: a key written literally
	// in the Caddyfile is in the config's JSON, which Caddy itself logs at
	// DEBUG (http.auto_https's "adjusted config") and serves at GET /config/
	logFile := startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+
		anthropicEngine(anth, "retries 0")+bedrockEngine(bed, "retries 0")+geminiEngine(gem, "retries 0")+azureEngine(az, "retries 0"))
	auth := []string{"Authorization", "Bearer " + callerKey}
	var seen []string // what the client was sent
	// wantStatus 0 is any error: a 529 reaches a Chat client as a 503
	ask := func(model string, stream bool, wantStatus int) {
		t.Helper()
		ok := func(status int) bool { return status == wantStatus || wantStatus == 0 && status >= 400 }
		body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hello!"}],"stream":%v}`, model, stream)
		resp, out := post(t, "/v1/chat/completions", body, auth...)
		if !ok(resp.StatusCode) {
			t.Fatalf("%s: %d %s", model, resp.StatusCode, out)
		}
		seen = append(seen, fmt.Sprint(resp.Header), out)
		m, _ := json.Marshal(map[string]any{"model": model, "max_tokens": 50, "stream": stream, "messages": []any{map[string]string{"role": "user", "content": "Hello!"}}})
		resp, out = post(t, "/v1/messages", string(m), append(auth, "Anthropic-Version", "2023-06-01")...)
		if !ok(resp.StatusCode) {
			t.Fatalf("%s (messages): %d %s", model, resp.StatusCode, out)
		}
		seen = append(seen, fmt.Sprint(resp.Header), out)
	}
	models := []string{providertest.ClaudeModel, providertest.BedrockModel, providertest.GeminiModel, providertest.AzureDeployment}
	for _, m := range models {
		ask(m, false, 200)
		ask(m, true, 200)
	}
	anth.SetMode("overloaded")
	bed.SetMode("throttled")
	gem.SetMode("exhausted")
	az.SetMode("throttled")
	for _, m := range models {
		ask(m, false, 0)
	}
	az.SetMode("filtered")
	ask(providertest.AzureDeployment, false, 400)
	// a caller who sends an engine's key as its gateway key
	resp, out := post(t, "/v1/chat/completions", `{"model":"gemini-2.5-flash"}`, "Authorization", "Bearer "+providertest.GeminiKey)
	if resp.StatusCode != 401 {
		t.Fatalf("a wrong gateway key: %d %s", resp.StatusCode, out)
	}
	seen = append(seen, fmt.Sprint(resp.Header), out)

	syncHistory(t)
	_, engines := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/engines"))
	_, requests := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/requests"))
	metrics := scrape(t)
	logs := readFile(t, logFile)
	if !strings.Contains(logs, `"level":"debug"`) || !strings.Contains(engines, "bedrock") || !strings.Contains(metrics, "llm_gateway_") {
		t.Fatalf("nothing to look in: the log, the admin API or the metrics is empty")
	}
	for what, text := range map[string]string{
		"Caddy's log": logs, "the client's answers": strings.Join(seen, "\n"), "GET /llm_gateway/engines": engines,
		"GET /llm_gateway/requests": requests, "the metrics": metrics,
	} {
		for _, secret := range providertest.Secrets {
			if i := strings.Index(text, secret); i >= 0 {
				t.Errorf("%s holds the secret %q: …%s…", what, secret, text[max(0, i-200):min(len(text), i+len(secret)+50)])
			}
		}
	}
}

// An engine's error answer that echoes the request it was sent (a proxy's
// error page, a debug build's 401) reaches the client with the engine's
// credentials masked: its key in whichever header, a SigV4 signature and
// session token, on /v1/ and on /upstream/, in the body and in the
// headers (issue 51: they reached the client whole).
func TestProviderErrorEchoesCarryNoSecret(t *testing.T) {
	pvEnv(t)
	var mu sync.Mutex
	var sent []http.Header // what the echo got
	echo := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return // a readiness probe
		}
		mu.Lock()
		sent = append(sent, r.Header.Clone())
		mu.Unlock()
		b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": "denied", "type": "invalid_request_error", "headers": r.Header}})
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Echo-Authorization", r.Header.Get("Authorization"))
		status := http.StatusUnauthorized
		if r.Header.Get("X-Amz-Security-Token") != "" {
			status = http.StatusInternalServerError
		}
		w.WriteHeader(status)
		w.Write(b)
	})
	startGateway(t, fmt.Sprintf(`
		key ops %s
		engine keyed {
			to %s
			api openai
			api_key {env.PV_AZURE_KEY}
			models keyed
			retries 0
		}
		engine gemini {
			provider gemini
			to %s
			api_key {env.PV_GEMINI_KEY}
			models %s
			retries 0
		}
		engine bedrock {
			provider bedrock
			region us-east-1
			to %s
			models %s
			retries 0
			passthrough /guardrail*
		}`, callerKey, echo.URL, echo.URL, providertest.GeminiModel, echo.URL, providertest.BedrockModel))
	auth := []string{"Authorization", "Bearer " + callerKey}
	var seen []string
	for _, model := range []string{"keyed", providertest.GeminiModel, providertest.BedrockModel} {
		resp, out := post(t, "/v1/chat/completions", fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":"Hello!"}]}`, model), auth...)
		if resp.StatusCode < 400 || !strings.Contains(out, "****") {
			t.Errorf("%s: %d %s", model, resp.StatusCode, out)
		}
		seen = append(seen, fmt.Sprint(resp.Header), out)
	}
	req, _ := http.NewRequest(http.MethodGet, gwURL+"/upstream/"+providertest.BedrockModel+"/guardrail/g1", nil)
	req.Header.Set("Authorization", "Bearer "+callerKey)
	resp, out := do(t, req)
	if resp.StatusCode != 500 || !strings.Contains(out, "****") {
		t.Errorf("/upstream/: %d %s", resp.StatusCode, out)
	}
	seen = append(seen, fmt.Sprint(resp.Header), out)

	// every credential the engines were sent, and its parts
	secrets := append([]string(nil), providertest.Secrets...)
	mu.Lock()
	for _, h := range sent {
		for _, k := range []string{"Authorization", "X-Goog-Api-Key", "X-Amz-Security-Token"} {
			if v := h.Get(k); v != "" {
				secrets = append(secrets, v)
			}
		}
		if _, sig, ok := strings.Cut(h.Get("Authorization"), "Signature="); ok {
			secrets = append(secrets, sig)
		}
	}
	n := len(sent)
	mu.Unlock()
	if n != 4 {
		t.Fatalf("the echo was sent %d requests, want 4", n)
	}
	text := strings.Join(seen, "\n")
	for _, secret := range append(secrets, providertest.AWSKeys.KeyID) {
		if i := strings.Index(text, secret); i >= 0 {
			t.Errorf("the client was sent %q: …%s…", secret, text[max(0, i-200):min(len(text), i+len(secret)+50)])
		}
	}
}

// ---- 5. Bedrock without credentials ----

func TestProviderBedrockWithoutCredentials(t *testing.T) {
	providertest.AWS{}.Env(t)
	bed := providertest.Bedrock(t, "ok")
	backup := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+bedrockEngine(bed, "")+backupEngine(backup))

	t.Run("alone", func(t *testing.T) {
		start := time.Now()
		_, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(providertest.BedrockModel, "Hello!"))
		e := apiError(t, err, 502)
		if e.Code != "upstream_credentials" || !strings.Contains(e.Message, "bedrock") {
			t.Fatalf("code %q: %s", e.Code, e.Message)
		}
		if took := time.Since(start); took > 10*time.Second {
			t.Fatalf("finding no credentials took %s", took)
		}
		if got := lastTries(t); got != "bedrock=credentials" {
			t.Fatalf("attempts %q", got)
		}
	})
	t.Run("with a fallback", func(t *testing.T) {
		var raw *http.Response
		_, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(providertest.BedrockModel, "Hello!"),
			option.WithJSONSet("fallbacks", []string{"backup"}), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		if raw.Header.Get("X-LLM-Engine") != "backup" {
			t.Fatalf("headers %v", raw.Header)
		}
		if got := lastTries(t); got != "bedrock=credentials backup=ok" {
			t.Fatalf("attempts %q", got)
		}
	})
	if bed.N() != 0 || len(backup.all()) != 1 {
		t.Fatalf("bedrock was sent %d unsigned requests; the backup got %d", bed.N(), len(backup.all()))
	}
}

// ---- 6. Azure with entra and no Entra ID credentials yet ----

// An Azure engine with entra loads without credentials (they may come
// later); a request gets 502 upstream_credentials that says what was
// looked for, in the client's grammar, and the resource is sent nothing.
// Only the environment's credential is looked for (AZURE_TOKEN_CREDENTIALS):
// a managed identity's probe would leave loopback.
func TestProviderAzureEntraWithoutCredentials(t *testing.T) {
	t.Setenv("AZURE_TOKEN_CREDENTIALS", "EnvironmentCredential")
	for _, v := range []string{"AZURE_TENANT_ID", "AZURE_CLIENT_ID", "AZURE_CLIENT_SECRET", "AZURE_CLIENT_CERTIFICATE_PATH"} {
		t.Setenv(v, "")
	}
	az := providertest.Azure(t, "ok")
	startGateway(t, fmt.Sprintf(`		keys %s
		engine azure {
			provider azure {
				api_version %s
				entra
			}
			to %s
			models %s
		}`, callerKey, providertest.AzureAPIVersion, az.URL, providertest.AzureDeployment))
	_, err := sdk(callerKey).Chat.Completions.New(context.Background(), chatParams(providertest.AzureDeployment, "Hello!"))
	e := apiError(t, err, 502)
	if e.Code != "upstream_credentials" || !strings.Contains(e.Message, "no Microsoft Entra ID credentials") || !strings.Contains(e.Message, "AZURE_TENANT_ID") {
		t.Fatalf("code %q: %s", e.Code, e.Message)
	}
	if strings.Contains(e.Message, callerKey) || az.N() != 0 {
		t.Fatalf("the message holds the caller's key, or Azure was sent %d requests: %s", az.N(), e.Message)
	}
}

// The providers built in are Caddy modules in their own namespace, as
// reverse_proxy's transports are: `caddy list-modules` lists each.
func TestListModulesListsTheProviders(t *testing.T) {
	out, err := exec.Command(caddyBinary(t), "list-modules").CombinedOutput()
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	listed := strings.Fields(string(out))
	for _, name := range []string{"anthropic", "azure", "bedrock", "gemini", "openai", "vertex"} {
		if id := providers.Namespace + "." + name; !slices.Contains(listed, id) {
			t.Errorf("caddy list-modules lacks %s:\n%s", id, out)
		}
	}
}

// A body a client sends as curl -d does (application/x-www-form-urlencoded)
// or without a type is read as JSON by its route, and sent to Anthropic and
// Bedrock as application/json, which they require (the fakes refuse any
// other type).
func TestProviderBodyIsSentAsJSONWhateverItsClientCalledIt(t *testing.T) {
	pvEnv(t)
	anth, bed := providertest.Anthropic(t, "ok"), providertest.Bedrock(t, "ok")
	startGateway(t, anthropicEngine(anth, "")+bedrockEngine(bed, ""))
	for _, ct := range []string{"application/x-www-form-urlencoded", ""} {
		for _, c := range []struct{ path, body, want string }{
			{"/v1/messages", `{"model":"` + providertest.ClaudeModel + `","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}`, providertest.AnthropicText},
			{"/v1/chat/completions", `{"model":"` + providertest.BedrockModel + `","messages":[{"role":"user","content":"hi"}]}`, providertest.BedrockText},
		} {
			resp, out := post(t, c.path, c.body, "Content-Type", ct, "Anthropic-Version", "2023-06-01")
			if resp.StatusCode != 200 || !strings.Contains(out, c.want) {
				t.Fatalf("%s sent as %q: %d %s", c.path, ct, resp.StatusCode, out)
			}
		}
	}
	for _, f := range []*providertest.Fake{anth, bed} {
		for _, r := range f.All() {
			if ct := r.Header.Get("Content-Type"); ct != "application/json" {
				t.Fatalf("%s was sent Content-Type %q", r.Path, ct)
			}
		}
	}
}
