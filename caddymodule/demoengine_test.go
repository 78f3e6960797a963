package caddymodule

import (
	"context"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

// Every route the README lists works on the quickstart's demo engine the way
// the SDKs expect, through the gateway (the Node SDK asks for
// base64 embeddings by default and decoded the floats it got as garbage; the
// demo engine had no /v1/responses).
func TestSDKDefaultsWorkOnTheDemoEngine(t *testing.T) {
	startGateway(t, `
		engine sdkdemo {
			`+engineCmd("--model sdkdemo --chunk-delay 1ms")+`
			models sdkdemo
		}`)
	client := sdk("")
	ctx := context.Background()

	t.Run("embeddings in base64 and as floats", func(t *testing.T) {
		inputs := []string{"hello", "world of engines"}
		for _, format := range []openai.EmbeddingNewParamsEncodingFormat{openai.EmbeddingNewParamsEncodingFormatBase64, openai.EmbeddingNewParamsEncodingFormatFloat, ""} {
			res, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{
				Model:          "sdkdemo",
				Input:          openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs},
				EncodingFormat: format,
			})
			if err != nil {
				t.Fatalf("%q: %v", format, err)
			}
			if len(res.Data) != len(inputs) {
				t.Fatalf("%q: %d embeddings for %d inputs", format, len(res.Data), len(inputs))
			}
			for i, in := range inputs {
				want := demoengine.Embed(in)
				got := res.Data[i].Embedding
				if len(got) != len(want) {
					t.Fatalf("%q: %d dimensions, want %d", format, len(got), len(want))
				}
				for j := range want {
					if float32(got[j]) != want[j] { // JSON carries the float32s in their shortest form
						t.Fatalf("%q: embedding of %q is %v, want %v", format, in, got, want)
					}
				}
			}
			if format == openai.EmbeddingNewParamsEncodingFormatBase64 && !strings.HasPrefix(res.Data[0].JSON.Embedding.Raw(), `"`) {
				t.Fatalf("base64 asked, got %s", res.Data[0].JSON.Embedding.Raw())
			}
		}
	})

	t.Run("responses", func(t *testing.T) {
		res, err := client.Responses.New(ctx, responses.ResponseNewParams{
			Model: "sdkdemo",
			Input: responses.ResponseNewParamsInputUnion{OfString: openai.String("hi there")},
		})
		if err != nil {
			t.Fatal(err)
		}
		if res.Status != "completed" || !strings.Contains(res.OutputText(), `You said: "hi there"`) || res.Usage.OutputTokens == 0 {
			t.Fatalf("status %s, text %q, usage %+v", res.Status, res.OutputText(), res.Usage)
		}
	})

	t.Run("responses streamed", func(t *testing.T) {
		stream := client.Responses.NewStreaming(ctx, responses.ResponseNewParams{
			Model: "sdkdemo",
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage("streamed please", responses.EasyInputMessageRoleUser),
			}},
		})
		var types []string
		var deltas strings.Builder
		var final responses.Response
		for stream.Next() {
			ev := stream.Current()
			types = append(types, ev.Type)
			switch ev.Type {
			case "response.output_text.delta":
				deltas.WriteString(ev.Delta)
			case "response.completed":
				final = ev.Response
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if len(types) < 3 || types[0] != "response.created" || types[len(types)-1] != "response.completed" {
			t.Fatalf("events %v", types)
		}
		if strings.Count(strings.Join(types, " "), "response.output_text.delta") < 2 {
			t.Fatalf("the text came in fewer than 2 deltas: %v", types)
		}
		if final.OutputText() != deltas.String() || !strings.Contains(deltas.String(), `You said: "streamed please"`) {
			t.Fatalf("deltas %q, completed %q", deltas.String(), final.OutputText())
		}
	})
}

// docs/apis.md's Anthropic section can be tried on the demo
// engine: /v1/messages through the gateway with the official Anthropic SDK,
// as JSON and as its typed events (the demo engine answered a plain-text
// 404 page not found).
func TestDemoEngineAnswersAnthropicMessages(t *testing.T) {
	startGateway(t, `
		engine msgdemo {
			`+engineCmd("--model msgdemo --chunk-delay 1ms")+`
			models msgdemo
		}`)
	c := anthropicSDK()
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "msgdemo",
		MaxTokens: 100,
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("hi there"))},
	}

	msg, err := c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Type != "message" || msg.Role != "assistant" || !strings.HasPrefix(msg.ID, "msg_") ||
		len(msg.Content) != 1 || msg.Content[0].Type != "text" ||
		!strings.Contains(msg.Content[0].Text, `You said: "hi there"`) ||
		msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.InputTokens == 0 || msg.Usage.OutputTokens == 0 {
		t.Fatalf("answer: %s", msg.RawJSON())
	}

	params.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("streamed please"))}
	stream := c.Messages.NewStreaming(ctx, params)
	var types []string
	var deltas strings.Builder
	var acc anthropic.Message
	for stream.Next() {
		ev := stream.Current()
		types = append(types, ev.Type)
		if err := acc.Accumulate(ev); err != nil {
			t.Fatalf("accumulating %s: %v", ev.RawJSON(), err)
		}
		if ev.Type == "content_block_delta" {
			deltas.WriteString(ev.Delta.Text)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	// the demo engine sends a ping after content_block_start, as Anthropic
	// does; the gateway holds events until the first content (its commit
	// point) and need not pass it on
	if len(types) < 6 || strings.Join(types[:2], " ") != "message_start content_block_start" ||
		strings.Join(types[len(types)-3:], " ") != "content_block_stop message_delta message_stop" {
		t.Fatalf("events %v", types)
	}
	if strings.Count(strings.Join(types, " "), "content_block_delta") < 2 {
		t.Fatalf("the text came in fewer than 2 deltas: %v", types)
	}
	if acc.Content[0].Text != deltas.String() || !strings.Contains(deltas.String(), `You said: "streamed please"`) ||
		acc.StopReason != anthropic.StopReasonEndTurn || acc.Usage.OutputTokens != int64(len(strings.Fields(deltas.String()))) {
		t.Fatalf("deltas %q, message %+v", deltas.String(), acc)
	}

	// a short max_tokens stops the answer there, as Anthropic's API does
	params.MaxTokens = 2
	msg, err = c.Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonMaxTokens || msg.Usage.OutputTokens != 2 {
		t.Fatalf("max_tokens 2: %s", msg.RawJSON())
	}
}
