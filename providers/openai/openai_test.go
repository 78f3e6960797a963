package openai

import (
	"context"
	"net/http"
	"net/url"
	"slices"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func TestOpenAISetsItsAPIAndEndpoint(t *testing.T) {
	var e providers.Engine
	if err := new(OpenAI).Engine(&e); err != nil || !slices.Equal(e.APIs, []string{"openai"}) || e.To != Endpoint || e.KeyHeader != "" {
		t.Fatalf("%+v %v", e, err)
	}
}

// A request goes to its API's path, under a base that may end in /v1 (as
// OpenAI's SDKs write it) without doubling it; the client's query stays.
func TestOpenAITarget(t *testing.T) {
	for _, c := range []struct {
		base, client, path, want string
	}{
		{"https://api.openai.com", "/v1/chat/completions?x=1", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions?x=1"},
		{"https://api.openai.com/v1", "/v1/responses", "/v1/responses", "https://api.openai.com/v1/responses"},
		{"https://api.openai.com/", "/v1/messages", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions"}, // a translated Messages request
	} {
		base, _ := url.Parse(c.base)
		u, _ := url.Parse(c.base + c.client)
		new(OpenAI).Target(u, providers.Request{Base: base, API: api.Chat, Path: c.path, Model: "gpt-4o-mini"})
		if u.String() != c.want {
			t.Errorf("%s %s: %s, want %s", c.base, c.path, u, c.want)
		}
	}
}

func TestOpenAINamesItsOrganizationAndProject(t *testing.T) {
	r, _ := http.NewRequest(http.MethodPost, Endpoint, nil)
	_ = new(OpenAI).Authorize(context.Background(), r, nil)
	if len(r.Header) != 0 {
		t.Fatalf("headers without an organization: %v", r.Header)
	}
	_ = (&OpenAI{Organization: "org-1", Project: "proj_1"}).Authorize(context.Background(), r, nil)
	if r.Header.Get("OpenAI-Organization") != "org-1" || r.Header.Get("OpenAI-Project") != "proj_1" {
		t.Fatalf("%v", r.Header)
	}
}

// The endpoints whose body names the model pass /upstream/; the account's
// files, batches and fine-tuning do not.
func TestOpenAIRoutes(t *testing.T) {
	p := new(OpenAI)
	for tail, name := range map[string]string{
		"/v1/chat/completions": "chat/completions",
		"/v1/responses":        "responses",
		"/v1/embeddings":       "embeddings",
		"/v1/files":            "",
		"/v1/batches":          "",
		"/v1/fine_tuning/jobs": "",
	} {
		r, ok := p.ReadRoute(tail)
		if ok != (name != "") || r.Name != name || r.Model != "" {
			t.Errorf("%s: %+v %v, want %q", tail, r, ok, name)
		}
	}
	base, _ := url.Parse("https://api.openai.com/v1?x=1")
	u, _ := url.Parse("https://api.openai.com/caller/wrote/this?key=theirs")
	p.RouteTarget(u, base, "embeddings", "")
	if u.String() != "https://api.openai.com/v1/embeddings?x=1" {
		t.Errorf("embeddings: %s", u)
	}
}

func TestOpenAICaddyfile(t *testing.T) {
	var p OpenAI
	if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser("openai {\n organization org-1\n project proj_1\n}")); err != nil || p.Organization != "org-1" || p.Project != "proj_1" {
		t.Fatalf("%+v %v", p, err)
	}
}

// retry-after-ms is the wait, before the whole second Retry-After rounds
// it up to; none, or one that is no number, leaves Retry-After's.
func TestOpenAIReadsRetryAfterMS(t *testing.T) {
	for v, want := range map[string]time.Duration{"200": 200 * time.Millisecond, "1500.5": 1500*time.Millisecond + 500*time.Microsecond, "": time.Second, "soon": time.Second, "-1": time.Second} {
		f := &providers.Failure{Status: 429, RetryAfter: time.Second, Header: http.Header{}}
		if v != "" {
			f.Header.Set("retry-after-ms", v)
		}
		new(OpenAI).ReadFailure(f)
		if f.RetryAfter != want || f.Status != 429 {
			t.Errorf("retry-after-ms %q: %v, want %v", v, f.RetryAfter, want)
		}
	}
}

func TestOpenAIChecksItsModelList(t *testing.T) {
	base, _ := url.Parse("https://api.openai.com/v1")
	u := *base
	new(OpenAI).Check(&u, base)
	if u.String() != "https://api.openai.com/v1/models" {
		t.Errorf("%s", u.String())
	}
}
