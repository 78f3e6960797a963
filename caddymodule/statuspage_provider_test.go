package caddymodule

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/openai/openai-go/v3"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// A cloud provider's engine is no process (issue 53): the page and the
// admin API show its provider, its region and its models, and its state is
// its answers (ready before any and after a 200, failing after a 429),
// never a probe of GET /health, which no cloud answers and which the page
// showed as "down" and "not reachable" beside a 200 just served. Its card
// has no Start or Stop.
func TestAProviderEngineIsItsAnswersOnThePageAndTheAdminAPI(t *testing.T) {
	pvEnv(t)
	bed := providertest.Bedrock(t, "ok") // refuses anything but a signed Converse: a GET /health fails the test
	ctx := browser(t)
	startGateway(t, `
		key ops `+uiKey+`
		ui /llm`+bedrockEngine(bed, "retries 0"))

	s := status(t, "bedrock")
	if s.State != "ready" || s.Managed || s.Provider == nil || s.Provider.Name != "bedrock" || s.Provider.Where != "us-east-1" ||
		s.Provider.LastAnswer != nil || strings.Join(s.Models, " ") != providertest.BedrockModel {
		t.Fatalf("before any request: %+v %+v", s, s.Provider)
	}
	run(t, ctx, "opening the page", chromedp.Navigate(gwURL+"/llm"), chromedp.WaitVisible(chromedp.CSS("#key")))
	run(t, ctx, "the key", chromedp.SendKeys(chromedp.CSS("#key"), uiKey), chromedp.Click(chromedp.CSS("#key-form button")))
	run(t, ctx, "the engine", chromedp.WaitVisible(chromedp.CSS(`article[data-engine="bedrock"]`)))
	field := func(name string) string {
		return fmt.Sprintf(`(document.querySelector('article[data-engine="bedrock"] [data-field=%q]') || {}).textContent`, name)
	}
	until(t, ctx, "its provider and region", field("provider")+` === 'bedrock · us-east-1'`)
	until(t, ctx, "no answer yet", field("last answer")+` === 'none yet'`)
	if got := eval[string](t, ctx, engineState("bedrock")); got != "ready" {
		t.Fatalf("the card's state %q", got)
	}
	card := eval[string](t, ctx, `document.querySelector('article[data-engine="bedrock"]').innerText`)
	if !strings.Contains(card, providertest.BedrockModel) || strings.Contains(card, "reachable") || strings.Contains(card, "pid") {
		t.Fatalf("the card: %s", card)
	}
	if visible := eval[bool](t, ctx, `[...document.querySelectorAll('article[data-engine="bedrock"] button')].some((b) => b.offsetParent !== null)`); visible {
		t.Fatalf("the card of a cloud engine shows process buttons: %s", card)
	}

	// a 200: ready, and its last answer
	c := sdk(uiKey)
	p := openai.ChatCompletionNewParams{Model: providertest.BedrockModel, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Hello!")}}
	if _, err := c.Chat.Completions.New(context.Background(), p); err != nil {
		t.Fatal(err)
	}
	if s := status(t, "bedrock"); s.State != "ready" || s.Provider.LastAnswer == nil || s.Provider.LastAnswer.Status != 200 {
		t.Fatalf("after a 200: %s %+v", s.State, s.Provider.LastAnswer)
	}
	until(t, ctx, "the 200 on its card", field("last answer")+`.startsWith('200 ok')`)
	screenshot(t, ctx, "LLMGW_SCREENSHOT_PROVIDER", `article[data-engine="bedrock"]`) // docs/statuspage-provider.png

	// a 429: failing, on every surface, until it answers again
	bed.SetMode("throttled")
	if _, err := c.Chat.Completions.New(context.Background(), p); err == nil {
		t.Fatal("a throttled Bedrock answered")
	}
	if s := status(t, "bedrock"); s.State != "failing" || s.Provider.LastAnswer.Status != 429 {
		t.Fatalf("after a 429: %s %+v", s.State, s.Provider.LastAnswer)
	}
	until(t, ctx, "failing on its card", engineState("bedrock")+` === 'failing' && `+field("last answer")+`.startsWith('429')`)
	for _, r := range bed.All() {
		if !strings.HasPrefix(r.Path, "/model/") {
			t.Fatalf("the provider was sent %s", r.Path)
		}
	}
}
