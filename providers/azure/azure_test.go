package azure

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/azcore/policy"
	"github.com/Azure/azure-sdk-for-go/sdk/azidentity"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"

	"github.com/llmgateway/caddy-llm-gateway/api"
	gatewaycaddyfile "github.com/llmgateway/caddy-llm-gateway/caddyfile"
	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
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
		t.Fatalf("%q %v", p.APIVersion, err)
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

// fakeCredential is Entra ID as a test wants it: tokens entra-1, entra-2…,
// each expiring life after the credential's own clock, which only the test
// moves; or err, with a secret in the body of the token endpoint's answer.
type fakeCredential struct {
	mu     sync.Mutex
	n      int
	now    time.Time
	life   time.Duration
	err    error
	scopes []string
}

func (f *fakeCredential) GetToken(_ context.Context, o policy.TokenRequestOptions) (azcore.AccessToken, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.scopes = o.Scopes
	if f.err != nil {
		return azcore.AccessToken{}, f.err
	}
	return azcore.AccessToken{Token: fmt.Sprintf("entra-%d", f.n), ExpiresOn: f.now.Add(f.life)}, nil
}

// clock is the credential's time, which the provider judges tokens by.
func (f *fakeCredential) clock() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

func (f *fakeCredential) advance(d time.Duration) {
	f.mu.Lock()
	f.now = f.now.Add(d)
	f.mu.Unlock()
}

func (f *fakeCredential) calls() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// withEntra is a provider with entra whose credential is cred.
func withEntra(cred *fakeCredential) *Azure {
	p := &Azure{APIVersion: providertest.AzureAPIVersion, Entra: true}
	p.entra.find = func() (azcore.TokenCredential, error) { return cred, nil }
	p.entra.now = cred.clock
	return p
}

// send targets, authorizes and sends one chat request as the handler
// does, with the caller's own credentials on it (which the handler strips
// before: Authorize must not count on that).
func send(t *testing.T, p *Azure, to string) (*http.Response, error) {
	t.Helper()
	base, _ := url.Parse(to)
	u := *base
	p.Target(&u, providers.Request{Base: base, API: api.Chat, Path: "/v1/chat/completions", Model: providertest.AzureDeployment})
	body := []byte(`{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`)
	req, _ := http.NewRequest(http.MethodPost, u.String(), bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer caller-gateway-key")
	req.Header.Set("Api-Key", "caller-gateway-key")
	if err := p.Authorize(context.Background(), req, body); err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

// With entra the fake Azure gets the credential's token as Bearer, never an
// api-key nor the caller's Authorization; the token is reused while it is
// fresh and replaced once it is not (5 minutes before it expires, or past
// it), on the credential's own clock.
func TestAzureEntraSendsAFreshToken(t *testing.T) {
	cred := &fakeCredential{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), life: time.Hour}
	p := withEntra(cred)
	srv := providertest.Azure(t, "ok")
	ask := func(token string) {
		t.Helper()
		srv.SetKey(token)
		resp, err := send(t, p, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("with %s: %s", token, resp.Status)
		}
	}
	ask("entra-1")
	cred.advance(50 * time.Minute)
	ask("entra-1") // 10 minutes left: still fresh
	if cred.calls() != 1 || !slices.Equal(cred.scopes, []string{"https://cognitiveservices.azure.com/.default"}) {
		t.Fatalf("a fresh token was not reused: %d calls, scopes %v", cred.calls(), cred.scopes)
	}
	cred.advance(6 * time.Minute) // 4 minutes left: replaced before it expires
	ask("entra-2")
	cred.advance(2 * time.Hour) // entra-2 is past its expiry
	ask("entra-3")
	if cred.calls() != 3 {
		t.Errorf("%d tokens for 3 lifetimes", cred.calls())
	}
	for i, r := range srv.All() {
		if r.Header.Get("Api-Key") != "" || !strings.HasPrefix(r.Header.Get("Authorization"), "Bearer entra-") {
			t.Errorf("request %d: api-key %q, Authorization %q", i, r.Header.Get("Api-Key"), r.Header.Get("Authorization"))
		}
	}
}

// A token that was issued with a suggested refresh time (MSAL's refresh_in
// for long-lived tokens) is replaced from then on, as Azure's clients do.
func TestAzureEntraRefreshesOnTheSuggestedTime(t *testing.T) {
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	tok := azcore.AccessToken{Token: "t", ExpiresOn: now.Add(24 * time.Hour), RefreshOn: now.Add(12 * time.Hour)}
	if stale(tok, now.Add(time.Hour)) || !stale(tok, now.Add(12*time.Hour)) {
		t.Error("RefreshOn was not the time to refresh")
	}
}

// A refresh that fails while the held token is still valid keeps it; once
// that token has expired, the failure is the request's.
func TestAzureEntraKeepsAValidTokenWhenARefreshFails(t *testing.T) {
	cred := &fakeCredential{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC), life: time.Hour}
	p := withEntra(cred)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	if err := p.Authorize(context.Background(), req, nil); err != nil {
		t.Fatal(err)
	}
	cred.advance(58 * time.Minute)
	cred.mu.Lock()
	cred.err = errors.New("ManagedIdentityCredential: the metadata endpoint timed out")
	cred.mu.Unlock()
	if err := p.Authorize(context.Background(), req, nil); err != nil || req.Header.Get("Authorization") != "Bearer entra-1" {
		t.Errorf("a valid token dropped: %v %q", err, req.Header.Get("Authorization"))
	}
	cred.advance(3 * time.Minute)
	if err := p.Authorize(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "metadata endpoint timed out") {
		t.Errorf("past expiry: %v", err)
	}
}

// No credentials, or a token endpoint that refused them: the request gets
// an error that says which, with the endpoint's code and status and never
// its answer's body (azidentity prints it whole), and no Authorization.
func TestAzureEntraErrorsKeepNoSecret(t *testing.T) {
	p := &Azure{Entra: true}
	p.entra.find = func() (azcore.TokenCredential, error) {
		return nil, errors.New("DefaultAzureCredential: failed to acquire a token.\nAttempted credentials:\n\tEnvironmentCredential: missing environment variable AZURE_TENANT_ID")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	err := p.Authorize(context.Background(), req, nil)
	if err == nil || !strings.Contains(err.Error(), "no Microsoft Entra ID credentials") || !strings.Contains(err.Error(), "Attempted credentials: EnvironmentCredential: missing environment variable AZURE_TENANT_ID") {
		t.Errorf("no credentials: %v", err)
	}

	body := `{"error":"invalid_client","error_description":"AADSTS7000215: Invalid client secret provided: ` + providertest.AzureEntraSecret + `"}`
	refused := &azidentity.AuthenticationFailedError{RawResponse: &http.Response{Status: "401 Unauthorized", StatusCode: 401,
		Body: io.NopCloser(strings.NewReader(body)), Request: req}}
	if !strings.Contains(refused.Error(), providertest.AzureEntraSecret) {
		t.Fatal("azidentity no longer prints the body: this test proves nothing")
	}
	cred := &fakeCredential{err: refused}
	p = withEntra(cred)
	req.Header.Set("Authorization", "Bearer caller-gateway-key")
	err = p.Authorize(context.Background(), req, nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "401 Unauthorized (invalid_client)") {
		t.Errorf("refused: %v", err)
	}
	if req.Header.Get("Authorization") != "" {
		t.Errorf("Authorization %q without a token", req.Header.Get("Authorization"))
	}
}

// Without entra the engine's api_key is the credential: Authorize adds
// nothing and no credential is looked for.
func TestAzureWithoutEntraAddsNothing(t *testing.T) {
	p := &Azure{}
	p.entra.find = func() (azcore.TokenCredential, error) {
		t.Error("credentials looked for without entra")
		return nil, errors.New("no")
	}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	req.Header.Set("Api-Key", providertest.AzureKey)
	if err := p.Authorize(context.Background(), req, nil); err != nil || req.Header.Get("Api-Key") != providertest.AzureKey || req.Header.Get("Authorization") != "" {
		t.Errorf("%v %v", err, req.Header)
	}
}

// entra reads in the provider's block or beside it; with an api_key (the
// engine's or its defaults') the config is refused where the engine is
// written, and a config whose credentials are not there yet loads.
func TestAzureEntraCaddyfile(t *testing.T) {
	var p Azure
	if err := p.UnmarshalCaddyfile(caddyfile.NewTestDispenser("azure {\n api_version 2024-10-21\n entra\n}")); err != nil || !p.Entra {
		t.Fatalf("%+v %v", p.Entra, err)
	}
	if err := new(Azure).UnmarshalCaddyfile(caddyfile.NewTestDispenser("azure {\n entra yes\n}")); err == nil || !strings.Contains(err.Error(), "entra takes no value") {
		t.Errorf("entra yes: %v", err)
	}
	const to = "to https://r.openai.azure.com\n models gpt-4o\n"
	for _, c := range []struct{ config, want string }{
		{"engine e {\n provider azure {\n entra\n }\n " + to + " }", ""},
		{"engine e {\n provider azure\n entra\n " + to + " }", ""},
		{"engine e {\n provider azure {\n entra\n }\n api_key {env.AZURE_OPENAI_API_KEY}\n " + to + " }",
			"engine e: provider azure has both entra and an api_key: entra sends a Microsoft Entra ID token in the key's place, so keep one of them, at Testfile:2"},
		{"defaults {\n api_key k\n }\n engine e {\n provider azure\n entra\n " + to + " }", "provider azure has both entra and an api_key"},
	} {
		cfg, err := gatewaycaddyfile.Parse(caddyfile.NewTestDispenser("llm_gateway {\n " + c.config + "\n}"))
		if c.want == "" && (err != nil || !strings.Contains(string(cfg.Engines[0].ProviderRaw), `"entra":true`)) {
			t.Errorf("%s:\n %v %s", c.config, err, cfg.Engines[0].ProviderRaw)
		}
		if c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s:\n got %v\nwant %s", c.config, err, c.want)
		}
	}
}
