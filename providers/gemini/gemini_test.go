package gemini

import (
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func TestGeminiSetsItsAPIEndpointAndKeyHeader(t *testing.T) {
	var e providers.Engine
	if err := new(Gemini).Engine(&e); err != nil || !slices.Equal(e.APIs, []string{"gemini"}) || e.To != Endpoint || e.KeyHeader != "x-goog-api-key" {
		t.Fatalf("%+v %v", e, err)
	}
	// what the engine says itself wins
	e = providers.Engine{To: "http://127.0.0.1:9", KeyHeader: "Authorization", APIs: []string{"chat"}}
	_ = new(Gemini).Engine(&e)
	if e.To != "http://127.0.0.1:9" || e.KeyHeader != "Authorization" || !slices.Equal(e.APIs, []string{"chat"}) {
		t.Fatalf("%+v", e)
	}
}

func TestGeminiTarget(t *testing.T) {
	for _, c := range []struct {
		base   string
		model  string
		stream bool
		want   string
	}{
		{"https://generativelanguage.googleapis.com", "gemini-2.5-flash", false,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{"https://generativelanguage.googleapis.com/", "gemini-2.5-flash", true,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{"https://proxy.example/google?team=a", "models/gemini-3-pro-preview", true,
			"https://proxy.example/google/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse&team=a"},
		{"https://proxy.example/google?team=a", "tunedModels/mine-1", false,
			"https://proxy.example/google/v1beta/tunedModels/mine-1:generateContent?team=a"},
	} {
		base, _ := url.Parse(c.base)
		u := *base
		new(Gemini).Target(&u, providers.Request{Base: base, API: api.Gemini, Path: "/v1/chat/completions", Model: c.model, Stream: c.stream})
		if u.String() != c.want {
			t.Errorf("%s %s stream=%v:\n got %s\nwant %s", c.base, c.model, c.stream, u.String(), c.want)
		}
	}
}

// A model's methods are read as Google's SDKs write them, under v1beta or
// v1; a path that is no method of a model is no route.
func TestGeminiReadsItsRoutes(t *testing.T) {
	p := new(Gemini)
	for _, c := range []struct {
		tail        string
		name, model string // "" name: no route
	}{
		{"/v1beta/models/gemini-2.5-flash:generateContent", "generateContent", "gemini-2.5-flash"},
		{"/v1/models/gemini-2.5-flash:countTokens", "countTokens", "gemini-2.5-flash"},
		{"/v1beta/tunedModels/mine-1:generateContent", "generateContent", "tunedModels/mine-1"},
		{"/v1beta/models/gemini-2.5-flash", "", ""},
		{"/v1beta/files", "", ""},
		{"/v1beta/models/gemini-2.5-flash:rawPredict", "", ""},
		{"/v1beta/cachedContents", "", ""},
	} {
		r, ok := p.ReadRoute(c.tail)
		if ok != (c.name != "") || r.Name != c.name || r.Model != c.model {
			t.Errorf("%s: %+v %v, want %q %q", c.tail, r, ok, c.name, c.model)
		}
		if ok && !slices.Contains(p.Routes(), r.Name) {
			t.Errorf("%s: route %s is not in the provider's list", c.tail, r.Name)
		}
	}
	for name, want := range map[string]string{
		"countTokens":           "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:countTokens",
		"streamGenerateContent": "https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse",
	} {
		base, _ := url.Parse(Endpoint)
		u, _ := url.Parse(Endpoint + "/caller/wrote/this?key=theirs")
		p.RouteTarget(u, base, name, "gemini-2.5-flash")
		if u.String() != want {
			t.Errorf("%s:\n got %s\nwant %s", name, u, want)
		}
	}
}

// The key goes in x-goog-api-key, set by the handler as the engine's key
// header says: the provider adds nothing (it has no Authorize).
func TestGeminiAPIKeyHeader(t *testing.T) {
	srv := providertest.Gemini(t, "ok") // refuses any other key, and an Authorization
	var p providers.Provider = new(Gemini)
	if _, ok := p.(providers.Authorizer); ok {
		t.Fatal("Gemini has credentials of its own to add")
	}
	e := providers.Engine{To: srv.URL}
	_ = p.Engine(&e)
	base, _ := url.Parse(e.To)
	u := *base
	p.Target(&u, providers.Request{Base: base, API: api.Gemini, Model: providertest.GeminiModel})
	req, _ := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(e.KeyHeader, providertest.GeminiKey)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || srv.N() != 1 {
		t.Errorf("%s, %d requests", resp.Status, srv.N())
	}
}

// A 429's wait is in its RetryInfo detail, not a header; a body without
// one, or with one that is no duration, leaves the header's.
func TestGeminiReadsItsRetryDelay(t *testing.T) {
	for body, want := range map[string]time.Duration{
		`{"error":{"code":429,"message":"Resource has been exhausted","status":"RESOURCE_EXHAUSTED","details":[{"@type":"type.googleapis.com/google.rpc.QuotaFailure","violations":[]},{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36s"}]}}`: 36 * time.Second,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"0.5s"}]}}`: 500 * time.Millisecond,
		`{"error":{"details":[{"@type":"type.googleapis.com/google.rpc.RetryInfo","retryDelay":"36"}]}}`:   0,
		`{"error":{"code":429,"status":"RESOURCE_EXHAUSTED"}}`:                                             0,
		`not json`: 0,
	} {
		f := &providers.Failure{Status: 429, Body: []byte(body)}
		new(Gemini).ReadFailure(f)
		if f.RetryAfter != want {
			t.Errorf("%s: %v, want %v", body, f.RetryAfter, want)
		}
	}
}

func TestGeminiChecksItsModelList(t *testing.T) {
	base, _ := url.Parse(Endpoint + "?x=1")
	u := *base
	new(Gemini).Check(&u, base)
	if u.String() != Endpoint+"/v1beta/models?pageSize=1&x=1" {
		t.Errorf("%s", u.String())
	}
}
