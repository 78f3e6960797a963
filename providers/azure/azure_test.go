package azure

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func TestAzureSetsItsAPIAndKeyHeaderAndNeedsTo(t *testing.T) {
	e := providers.Engine{To: "https://r.openai.azure.com"}
	if err := new(Azure).Engine(&e); err != nil || !slices.Equal(e.APIs, []string{"openai"}) || e.KeyHeader != "api-key" {
		t.Fatalf("%+v %v", e, err)
	}
	e = providers.Engine{}
	if err := new(Azure).Engine(&e); err == nil || !strings.Contains(err.Error(), "needs 'to'") {
		t.Fatalf("without to: %v", err)
	}
}

func TestAzureGoesToTheDeploymentOrTheV1API(t *testing.T) {
	dep, v1 := &Azure{APIVersion: "2024-10-21"}, new(Azure)
	const base = "https://r.openai.azure.com"
	for _, c := range []struct {
		p          *Azure
		api        api.API
		path, want string
	}{
		{dep, api.Chat, "/v1/chat/completions", base + "/openai/deployments/gpt-4o/chat/completions?api-version=2024-10-21"},
		{dep, api.Embeddings, "/v1/embeddings", base + "/openai/deployments/gpt-4o/embeddings?api-version=2024-10-21"},
		{dep, api.Responses, "/v1/responses", base + "/openai/responses?api-version=2024-10-21"},
		{v1, api.Chat, "/v1/chat/completions", base + "/openai/v1/chat/completions"},
		{v1, api.Responses, "/v1/responses", base + "/openai/v1/responses"},
	} {
		b, _ := url.Parse(base)
		u := *b
		c.p.Target(&u, providers.Request{Base: b, API: c.api, Path: c.path, Model: "gpt-4o"})
		if u.String() != c.want {
			t.Errorf("%s: %s, want %s", c.path, u.String(), c.want)
		}
	}
}

// A deployment's endpoints pass /upstream/ with an api_version, the v1
// API's without one; the resource's files and fine-tuning never.
func TestAzureRoutes(t *testing.T) {
	dep, v1 := &Azure{APIVersion: "2024-10-21"}, new(Azure)
	for _, c := range []struct {
		p           *Azure
		tail        string
		name, model string // "" name: no route
	}{
		{dep, "/openai/deployments/gpt-4o/chat/completions", "chat/completions", "gpt-4o"},
		{dep, "/openai/deployments/gpt-4o/embeddings", "embeddings", "gpt-4o"},
		{dep, "/openai/deployments/gpt-4o/fine_tuning/jobs", "", ""},
		{dep, "/openai/files", "", ""},
		{dep, "/openai/v1/chat/completions", "", ""},
		{v1, "/openai/v1/chat/completions", "chat/completions", ""},
		{v1, "/openai/deployments/gpt-4o/chat/completions", "", ""},
	} {
		r, ok := c.p.ReadRoute(c.tail)
		if ok != (c.name != "") || r.Name != c.name || r.Model != c.model {
			t.Errorf("%s: %+v %v, want %q %q", c.tail, r, ok, c.name, c.model)
		}
	}
	for _, c := range []struct {
		p                 *Azure
		name, model, want string
	}{
		{dep, "embeddings", "emb", "https://r.openai.azure.com/openai/deployments/emb/embeddings?api-version=2024-10-21"},
		{v1, "chat/completions", "", "https://r.openai.azure.com/openai/v1/chat/completions"},
	} {
		base, _ := url.Parse("https://r.openai.azure.com")
		u, _ := url.Parse("https://r.openai.azure.com/caller/wrote/this?key=theirs")
		c.p.RouteTarget(u, base, c.name, c.model)
		if u.String() != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, u, c.want)
		}
	}
}

func TestAzureCaddyfile(t *testing.T) {
	var p Azure
	if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser("azure {\n api_version 2024-10-21\n}")); err != nil || p.APIVersion != "2024-10-21" {
		t.Fatalf("%+v %v", p, err)
	}
}

func TestAzureReadsRetryAfterMSAndChecksItsModelList(t *testing.T) {
	f := &providers.Failure{Status: 429, RetryAfter: time.Second, Header: http.Header{"Retry-After-Ms": {"250"}}}
	new(Azure).ReadFailure(f)
	if f.RetryAfter != 250*time.Millisecond {
		t.Errorf("retry-after-ms 250: %v", f.RetryAfter)
	}
	for p, want := range map[*Azure]string{
		new(Azure):                 "https://r.openai.azure.com/openai/v1/models",
		{APIVersion: "2024-10-21"}: "https://r.openai.azure.com/openai/models?api-version=2024-10-21",
	} {
		base, _ := url.Parse("https://r.openai.azure.com")
		u := *base
		p.Check(&u, base)
		if u.String() != want {
			t.Errorf("%s, want %s", u.String(), want)
		}
	}
}
