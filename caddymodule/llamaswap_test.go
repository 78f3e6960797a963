package caddymodule

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go/v3"
)

// What a llama-swap user reaches for, end to end: real Caddy, demo engines
// started on demand, the OpenAI Go SDK.

const llamaSwapKey = "llama-swap-test-key-0123"

func TestLlamaSwapRoutesReachEnginesStartedOnDemand(t *testing.T) {
	startGateway(t, `
		keys `+llamaSwapKey+`
		defaults {
			idle_timeout 5m
		}
		engine chat {
			`+engineCmd("--model qwen --echo-request --chunk-delay 1ms")+`
			models qwen
			strip top_p
			set temperature 0.6
			set chat_template_kwargs.enable_thinking false
		}
		engine rerank {
			`+engineCmd("--model bge")+`
			models bge-reranker
			model_name bge
		}
		engine whisper {
			`+engineCmd("--model whisper")+`
			models whisper-1
			model_name ggml-large-v3
		}`)
	client := sdk(llamaSwapKey)
	ctx := context.Background()

	t.Run("a 20 MB upload is routed by its model field, byte for byte", func(t *testing.T) {
		audio := make([]byte, 20<<20)
		rand.Read(audio)
		tr, err := client.Audio.Transcriptions.New(ctx, openai.AudioTranscriptionNewParams{
			Model: "whisper-1",
			File:  openai.File(bytes.NewReader(audio), "speech.wav", "audio/wav"),
		})
		if err != nil {
			t.Fatal(err)
		}
		var got struct {
			Model      string `json:"model"`
			FileSHA256 string `json:"file_sha256"`
		}
		if err := json.Unmarshal([]byte(tr.RawJSON()), &got); err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(audio)
		if tr.Text != "heard 20971520 bytes of speech.wav" || got.FileSHA256 != hex.EncodeToString(sum[:]) {
			t.Fatalf("%s", tr.RawJSON())
		}
		if got.Model != "ggml-large-v3" {
			t.Fatalf("the engine was sent model %q, not its model_name", got.Model)
		}
	})

	t.Run("llama-server's own endpoints are routed by the body's model", func(t *testing.T) {
		for _, p := range []string{"/rerank", "/tokenize", "/infill"} {
			resp, body := post(t, p, `{"model":"bge-reranker","query":"q","documents":["a","b"],"content":"one two"}`,
				"Authorization", "Bearer "+llamaSwapKey)
			if resp.StatusCode != 200 || !strings.Contains(body, `"endpoint":"`+p+`"`) || !strings.Contains(body, `"model":"bge"`) {
				t.Fatalf("%s: %d %s", p, resp.StatusCode, body)
			}
		}
	})

	t.Run("/upstream/<model>/ reaches the engine's own pages", func(t *testing.T) {
		req, _ := http.NewRequest(http.MethodGet, gwURL+"/upstream/qwen/props", nil)
		req.Header.Set("Authorization", "Bearer "+llamaSwapKey)
		resp, body := do(t, req)
		if resp.StatusCode != 200 || !strings.Contains(body, `"model_path":"qwen"`) || resp.Header.Get("X-LLM-Engine") != "chat" {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		req, _ = http.NewRequest(http.MethodGet, gwURL+"/upstream/qwen/", nil)
		req.Header.Set("Authorization", "Bearer "+llamaSwapKey)
		if resp, body := do(t, req); resp.StatusCode != 200 || !strings.Contains(body, "<h1>demo engine: qwen</h1>") {
			t.Fatalf("the engine's page: %d %s", resp.StatusCode, body)
		}
	})

	t.Run("filters edit exactly the named fields", func(t *testing.T) {
		p := chatParams("qwen", "hi")
		p.TopP = openai.Float(0.9)
		p.Temperature = openai.Float(1.2)
		resp, err := client.Chat.Completions.New(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		var echo struct{ Body string }
		if err := json.Unmarshal([]byte(resp.Choices[0].Message.Content), &echo); err != nil {
			t.Fatalf("%v: %s", err, resp.Choices[0].Message.Content)
		}
		var sent map[string]any
		if err := json.Unmarshal([]byte(echo.Body), &sent); err != nil {
			t.Fatal(err)
		}
		kw, _ := sent["chat_template_kwargs"].(map[string]any)
		if _, ok := sent["top_p"]; ok || sent["temperature"] != 0.6 || kw["enable_thinking"] != false || sent["model"] != "qwen" {
			t.Fatalf("the engine was sent %s", echo.Body)
		}
	})
}

func TestLoadingStatusIsReasoningContentInTheSDK(t *testing.T) {
	startGateway(t, `
		keepalive 200ms
		engine slow {
			`+engineCmd("--model qwen --load-time 1500ms --chunk-delay 1ms")+`
			models qwen
			loading_status on
		}`)
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("qwen", "hi"))
	var reasoning, content strings.Builder
	for stream.Next() {
		c := stream.Current()
		if len(c.Choices) == 0 {
			continue
		}
		if f, ok := c.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
			var s string
			if err := json.Unmarshal([]byte(f.Raw()), &s); err != nil {
				t.Fatal(err)
			}
			reasoning.WriteString(s)
		}
		content.WriteString(c.Choices[0].Delta.Content)
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	r := reasoning.String()
	if !strings.HasPrefix(r, "Loading qwen on engine slow…\n") || !strings.Contains(r, "loaded after ") {
		t.Fatalf("reasoning: %q", r)
	}
	if !strings.Contains(content.String(), `You said: "hi"`) || strings.Contains(content.String(), "Loading") {
		t.Fatalf("content: %q", content.String())
	}

	// once the engine runs, a stream is the engine's alone
	stream = sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("qwen", "again"))
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			if _, ok := c.Choices[0].Delta.JSON.ExtraFields["reasoning_content"]; ok {
				t.Fatal("a loading status for a running engine")
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
}

// The loading status chunks and the engine's chunks are
// one stream: one id, one created, one model. The loading chunks go out
// before the engine answers, so the engine's chunks take theirs; the SDK's
// accumulator refused the engine's first chunk when its id changed.
func TestLoadingStatusAndTheEngineShareOneIDAndModel(t *testing.T) {
	startGateway(t, `
		keepalive 200ms
		engine slow {
			`+engineCmd("--model qwen-7b --load-time 1s --chunk-delay 1ms")+`
			models qwen
			model_name qwen-7b-q4
			loading_status on
		}`)
	params := chatParams("qwen", "hi")
	params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), params)
	var acc openai.ChatCompletionAccumulator
	ids, models, created := map[string]bool{}, map[string]bool{}, map[int64]bool{}
	n := 0
	for stream.Next() {
		c := stream.Current()
		n++
		ids[c.ID], models[c.Model], created[c.Created] = true, true, true
		if !acc.AddChunk(c) {
			t.Fatalf("the SDK's accumulator refused chunk %d: %s", n, c.RawJSON())
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(ids) != 1 || len(models) != 1 || len(created) != 1 || !models["qwen"] {
		t.Fatalf("%d chunks with ids %v, models %v, created %v: want one of each, model qwen", n, ids, models, created)
	}
	if !strings.Contains(acc.Choices[0].Message.Content, `You said: "hi"`) || acc.Usage.CompletionTokens == 0 {
		t.Fatalf("accumulated %q, usage %+v", acc.Choices[0].Message.Content, acc.Usage)
	}
}
