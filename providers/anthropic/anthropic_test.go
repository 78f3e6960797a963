package anthropic

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func TestAnthropicSetsItsAPIEndpointAndKeyHeader(t *testing.T) {
	var e providers.Engine
	if err := new(Anthropic).Engine(&e); err != nil || !slices.Equal(e.APIs, []string{"messages"}) || e.To != Endpoint || e.KeyHeader != "x-api-key" {
		t.Fatalf("%+v %v", e, err)
	}
	// what the engine says itself wins
	e = providers.Engine{To: "http://127.0.0.1:9", KeyHeader: "Authorization"}
	_ = new(Anthropic).Engine(&e)
	if e.To != "http://127.0.0.1:9" || e.KeyHeader != "Authorization" {
		t.Fatalf("%+v", e)
	}
}

func TestAnthropicGoesToMessagesWithItsVersion(t *testing.T) {
	p := new(Anthropic)
	for _, c := range []struct {
		api        api.API
		path, want string
	}{
		{api.Messages, "/v1/messages", "https://api.anthropic.com/v1/messages"},
		{api.Messages, "/v1/messages/count_tokens", "https://api.anthropic.com/v1/messages/count_tokens"},
		{api.Messages, "/v1/chat/completions", "https://api.anthropic.com/v1/messages"}, // a translated chat request
	} {
		base, _ := url.Parse(Endpoint)
		u := *base
		u.Path = c.path
		p.Target(&u, providers.Request{Base: base, API: c.api, Path: c.path, Model: "claude"})
		if u.String() != c.want {
			t.Errorf("%s: %s, want %s", c.path, u.String(), c.want)
		}
	}
	r, _ := http.NewRequest(http.MethodPost, "https://api.anthropic.com/v1/messages", nil)
	if err := p.Authorize(context.Background(), r, nil); err != nil || r.Header.Get("Anthropic-Version") != api.AnthropicVersion {
		t.Fatalf("anthropic-version %q, %v", r.Header.Get("Anthropic-Version"), err)
	}
	r.Header.Set("Anthropic-Version", "2024-01-01")
	_ = p.Authorize(context.Background(), r, nil)
	if v := r.Header.Get("Anthropic-Version"); v != "2024-01-01" {
		t.Fatalf("a client's anthropic-version was replaced: %q", v)
	}
	r.Header.Del("Anthropic-Version")
	_ = (&Anthropic{APIVersion: "2023-01-01"}).Authorize(context.Background(), r, nil)
	if v := r.Header.Get("Anthropic-Version"); v != "2023-01-01" {
		t.Fatalf("the engine's api_version: %q", v)
	}
}

// Messages and count_tokens pass /upstream/, sent to their own path;
// batches and files, every tenant's, do not.
func TestAnthropicRoutes(t *testing.T) {
	p := new(Anthropic)
	for tail, name := range map[string]string{
		"/v1/messages":              "messages",
		"/v1/messages/count_tokens": "count_tokens",
		"/v1/messages/batches":      "",
		"/v1/files":                 "",
	} {
		r, ok := p.ReadRoute(tail)
		if ok != (name != "") || r.Name != name || r.Model != "" {
			t.Errorf("%s: %+v %v, want %q", tail, r, ok, name)
		}
	}
	base, _ := url.Parse(Endpoint)
	u, _ := url.Parse(Endpoint + "/caller/wrote/this?key=theirs")
	p.RouteTarget(u, base, "count_tokens", "")
	if u.String() != "https://api.anthropic.com/v1/messages/count_tokens" {
		t.Errorf("count_tokens: %s", u)
	}
}

func TestAnthropicCaddyfile(t *testing.T) {
	var p Anthropic
	if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser("anthropic {\n api_version 2023-01-01\n}")); err != nil || p.APIVersion != "2023-01-01" {
		t.Fatalf("%+v %v", p, err)
	}
	if err := new(Anthropic).UnmarshalCaddyfile(caddyfile.NewTestDispenser("anthropic {\n region us-east-1\n}")); err == nil {
		t.Fatal("a line it does not take")
	}
}

func TestAnthropicChecksItsModelList(t *testing.T) {
	base, _ := url.Parse(Endpoint)
	u := *base
	new(Anthropic).Check(&u, base)
	if u.String() != Endpoint+"/v1/models" {
		t.Errorf("%s", u.String())
	}
}
