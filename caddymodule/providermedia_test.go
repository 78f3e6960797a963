package caddymodule

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// Only public or inline media leave for a provider (issue 51): a client of
// each API naming an image by gs://, by a Gemini Files API URI or by a file
// id is refused with a 400 in its own API's shape naming the member, and
// the fake Gemini is sent nothing; an https: image reaches it as a
// fileData.fileUri, a data: image as inlineData; and the engine whose
// allow_media names gs is sent the gs:// URI as written.
func TestProviderIsSentOnlyPublicOrInlineMedia(t *testing.T) {
	pvEnv(t)
	gem := providertest.Gemini(t, "ok")
	startGateway(t, fmt.Sprintf("\t\tkeys %s", callerKey)+geminiEngine(gem, "")+fmt.Sprintf(`
		engine gemini-gs {
			provider gemini
			to %s
			api_key {env.PV_GEMINI_KEY}
			models gemini-gs
			model_name %s
			allow_media gs
		}`, gem.URL, providertest.GeminiModel))
	ctx := context.Background()
	chatImage := func(model, url string) error {
		_, err := sdk(callerKey).Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: model,
			Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage([]openai.ChatCompletionContentPartUnionParam{
				openai.TextContentPart("What is in it?"),
				openai.ImageContentPart(openai.ChatCompletionContentPartImageImageURLParam{URL: url}),
			})}})
		return err
	}

	for _, c := range []struct {
		name, url, kind string
	}{
		{"gs", "gs://operator-private-bucket/secret.png", "gs: URL"},
		{"a Files API URI", "https://generativelanguage.googleapis.com/v1beta/files/abc123", "file id"},
		{"http", "http://169.254.169.254/latest/meta-data/", "http: URL"},
	} {
		t.Run("chat "+c.name, func(t *testing.T) {
			e := apiError(t, chatImage(providertest.GeminiModel, c.url), 400)
			if e.Code != "media_not_allowed" || !strings.Contains(e.Message, "messages[0].content[1].image_url.url") || !strings.Contains(e.Message, c.kind) ||
				strings.Contains(e.Message, "operator-private-bucket") {
				t.Fatalf("%s: %s", e.Code, e.Message)
			}
		})
	}
	t.Run("responses gs", func(t *testing.T) {
		img := responses.ResponseInputContentParamOfInputImage(responses.ResponseInputImageDetailAuto)
		img.OfInputImage.ImageURL = openai.String("gs://operator-private-bucket/secret.png")
		_, err := sdk(callerKey).Responses.New(ctx, responses.ResponseNewParams{Model: providertest.GeminiModel,
			Input: responses.ResponseNewParamsInputUnion{OfInputItemList: responses.ResponseInputParam{
				responses.ResponseInputItemParamOfMessage(responses.ResponseInputMessageContentListParam{img}, responses.EasyInputMessageRoleUser),
			}}})
		if e := apiError(t, err, 400); e.Code != "media_not_allowed" || !strings.Contains(e.Message, "input[0].content[0].image_url") {
			t.Fatalf("%s: %s", e.Code, e.Message)
		}
	})
	t.Run("messages a file", func(t *testing.T) {
		p := messageParams(providertest.GeminiModel)
		p.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("What is in it?"),
			anthropic.NewImageBlock(anthropic.FileImageSourceParam{FileID: "file_011CNha8iCJcU1wXNR6q4V8w"}))}
		ac := anthropicClient(callerKey)
		_, err := ac.Messages.New(ctx, p)
		var e *anthropic.Error
		if !errors.As(err, &e) || e.StatusCode != 400 || e.Type() != "invalid_request_error" ||
			!strings.Contains(e.RawJSON(), "messages[0].content[1].source.file_id") || !strings.Contains(e.RawJSON(), `"type":"error"`) {
			t.Fatalf("%v", err)
		}
	})
	if n := gem.N(); n != 0 {
		t.Fatalf("gemini was sent %d requests with media it may not be sent: %s", n, gem.All()[0].Body)
	}

	// what passes, and what an engine allows
	for _, c := range []struct{ model, url, want string }{
		{providertest.GeminiModel, "https://example.com/cat.png", `"fileData":{"mimeType":"image/png","fileUri":"https://example.com/cat.png"}`},
		{providertest.GeminiModel, "data:image/png;base64,iVBORw0KGgo=", `"inlineData":{"mimeType":"image/png","data":"iVBORw0KGgo="}`},
		{"gemini-gs", "gs://operator-bucket/cat.png", `"fileUri":"gs://operator-bucket/cat.png"`},
	} {
		before := gem.N()
		if err := chatImage(c.model, c.url); err != nil {
			t.Fatalf("%s %s: %v", c.model, c.url, err)
		}
		if reqs := gem.All(); len(reqs) != before+1 || !strings.Contains(string(reqs[before].Body), c.want) {
			t.Fatalf("%s %s: gemini was sent %s", c.model, c.url, reqs[len(reqs)-1].Body)
		}
	}
}
