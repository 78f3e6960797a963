package provider

import (
	"context"
	"net/http"
	"net/url"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// target is where p sends a request spoken in api (tail the client's path,
// or the translated API's), for model, from base.
func target(t *testing.T, p Provider, base string, api api.API, tail, model string, stream bool) string {
	t.Helper()
	b, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	u := *b
	u.Path = joinPath(b.Path, tail)
	p.Target(&u, b, api, tail, model, stream)
	return u.String()
}

func TestAnthropicGoesToMessagesWithItsVersion(t *testing.T) {
	p, _ := New(&engines.Config{Provider: "anthropic", APIVersion: "2023-06-01"})
	for _, c := range []struct {
		api        api.API
		tail, want string
	}{
		{api.Messages, "/v1/messages", "https://api.anthropic.com/v1/messages"},
		{api.Messages, "/v1/messages/count_tokens", "https://api.anthropic.com/v1/messages/count_tokens"},
		{api.Messages, "/v1/chat/completions", "https://api.anthropic.com/v1/messages"}, // a translated chat request
	} {
		if got := target(t, p, "https://api.anthropic.com", c.api, c.tail, "claude", false); got != c.want {
			t.Errorf("%s: %s, want %s", c.tail, got, c.want)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.com/v1/messages", nil)
	if err := p.Authorize(context.Background(), r, nil); err != nil || r.Header.Get("Anthropic-Version") != "2023-06-01" {
		t.Fatalf("anthropic-version %q, %v", r.Header.Get("Anthropic-Version"), err)
	}
	r.Header.Set("Anthropic-Version", "2024-01-01")
	_ = p.Authorize(context.Background(), r, nil)
	if v := r.Header.Get("Anthropic-Version"); v != "2024-01-01" {
		t.Fatalf("a client's anthropic-version was replaced: %q", v)
	}
}

func TestAzureGoesToTheDeploymentOrTheV1API(t *testing.T) {
	dep, _ := New(&engines.Config{Provider: "azure", APIVersion: "2024-10-21"})
	v1, _ := New(&engines.Config{Provider: "azure"})
	base := "https://r.openai.azure.com"
	for _, c := range []struct {
		p          Provider
		api        api.API
		tail, want string
	}{
		{dep, api.Chat, "/v1/chat/completions", base + "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"},
		{dep, api.Embeddings, "/v1/embeddings", base + "/openai/deployments/gpt-4o/embeddings?api-version=2024-10-21"},
		{dep, api.Responses, "/v1/responses", base + "/openai/responses?api-version=2024-10-21"},
		{v1, api.Chat, "/v1/chat/completions", base + "/openai/v1/chat/completions"},
		{v1, api.Responses, "/v1/responses", base + "/openai/v1/responses"},
	} {
		if got := target(t, c.p, base, c.api, c.tail, "gpt-4o", false); got != c.want {
			t.Errorf("%s: %s, want %s", c.tail, got, c.want)
		}
	}
}

func TestAnEngineWithoutAProviderHasNone(t *testing.T) {
	if p, err := New(&engines.Config{}); p != nil || err != nil {
		t.Fatalf("%v %v", p, err)
	}
}
