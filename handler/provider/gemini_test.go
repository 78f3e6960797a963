package provider

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func TestGeminiTarget(t *testing.T) {
	gem, _ := New(&engines.Config{Name: "g", Provider: "gemini"})
	vtx, _ := New(&engines.Config{Name: "v", Provider: "vertex", Project: "proj", Location: "us-central1"})
	cases := []struct {
		p      Provider
		base   string
		model  string
		stream bool
		want   string
	}{
		{gem, "https://generativelanguage.googleapis.com", "gemini-2.5-flash", false,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:generateContent"},
		{gem, "https://generativelanguage.googleapis.com/", "gemini-2.5-flash", true,
			"https://generativelanguage.googleapis.com/v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse"},
		{gem, "https://proxy.example/google?team=a", "models/gemini-3-pro-preview", true,
			"https://proxy.example/google/v1beta/models/gemini-3-pro-preview:streamGenerateContent?alt=sse&team=a"},
		{gem, "https://proxy.example/google?team=a", "tunedModels/mine-1", false,
			"https://proxy.example/google/v1beta/tunedModels/mine-1:generateContent?team=a"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "gemini-2.5-pro", false,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "gemini-2.5-pro", true,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "publishers/meta/models/llama-4", false,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/meta/models/llama-4:generateContent"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "projects/other/locations/europe-west4/endpoints/123", false,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/other/locations/europe-west4/endpoints/123:generateContent"},
		{vtx, "https://us-central1-aiplatform.googleapis.com", "models/gemini-2.5-pro", false,
			"https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"},
	}
	for _, c := range cases {
		base, _ := url.Parse(c.base)
		u := *base
		c.p.Target(&u, base, api.Gemini, "/v1/chat/completions", c.model, c.stream)
		if u.String() != c.want {
			t.Errorf("%s %s stream=%v:\n got %s\nwant %s", c.base, c.model, c.stream, u.String(), c.want)
		}
	}
	if _, err := New(&engines.Config{Name: "v", Provider: "vertex"}); err == nil {
		t.Error("vertex without project and location: no error")
	}
}

// gmFakeTokens issues tok-1, tok-2…, each valid for life (oauth2's reuse
// refreshes 10 s before the end).
type gmFakeTokens struct {
	mu   sync.Mutex
	n    int
	life time.Duration
}

func (f *gmFakeTokens) Token() (*oauth2.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return &oauth2.Token{AccessToken: "tok-" + string(rune('0'+f.n)), TokenType: "Bearer", Expiry: time.Now().Add(f.life)}, nil
}

// gmFakeVertex answers generateContent when its bearer is want's.
func gmFakeVertex(t *testing.T, want *string, mu *sync.Mutex) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if r.URL.Path != "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent" {
			http.Error(w, `{"error":{"code":404,"message":"no such path","status":"NOT_FOUND"}}`, http.StatusNotFound)
			return
		}
		if r.Header.Get("Authorization") != "Bearer "+*want {
			http.Error(w, `{"error":{"code":401,"message":"bad token","status":"UNAUTHENTICATED"}}`, http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"candidates":[{"content":{"role":"model","parts":[{"text":"hi"}]},"finishReason":"STOP"}]}`))
	}))
	t.Cleanup(srv.Close)
	return srv
}

// gmSend targets, authorizes and sends one request as the handler does.
func gmSend(t *testing.T, p Provider, cfg *engines.Config, to string) (*http.Response, error) {
	t.Helper()
	base, _ := url.Parse(to)
	u := *base
	p.Target(&u, base, api.Gemini, "", "gemini-2.5-pro", false)
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	req, _ := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(string(body)))
	cfg.SetKey(req.Header)
	if err := p.Authorize(context.Background(), req, body); err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

func TestVertexADCToken(t *testing.T) {
	fake := &gmFakeTokens{life: 10*time.Second + 300*time.Millisecond}
	finds := 0
	restore := findCredentials
	findCredentials = func(context.Context) (oauth2.TokenSource, error) { finds++; return fake, nil }
	t.Cleanup(func() { findCredentials = restore })

	var mu sync.Mutex
	want := "tok-1"
	srv := gmFakeVertex(t, &want, &mu)
	cfg := &engines.Config{Name: "v", Provider: "vertex", Project: "proj", Location: "us-central1", To: srv.URL}
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if finds != 0 {
		t.Fatal("credentials were looked for before the first request")
	}
	for i := range 2 {
		resp, err := gmSend(t, p, cfg, srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("request %d: %s", i, resp.Status)
		}
	}
	if fake.n != 1 || finds != 1 {
		t.Fatalf("a valid token was not reused: %d tokens, %d finds", fake.n, finds)
	}
	time.Sleep(400 * time.Millisecond) // tok-1 is now within oauth2's refresh margin
	mu.Lock()
	want = "tok-2"
	mu.Unlock()
	resp, err := gmSend(t, p, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || fake.n != 2 {
		t.Fatalf("after expiry: %s, %d tokens", resp.Status, fake.n)
	}
}

func TestVertexWithKeyAndWithoutCredentials(t *testing.T) {
	restore := findCredentials
	t.Cleanup(func() { findCredentials = restore })
	findCredentials = func(context.Context) (oauth2.TokenSource, error) {
		return nil, errors.New("google: could not find default credentials")
	}
	cfg := &engines.Config{Name: "v", Provider: "vertex", Project: "proj", Location: "us-central1"}
	p, _ := New(cfg)
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	if err := p.Authorize(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "Application Default Credentials") {
		t.Errorf("no credentials: %v", err)
	}

	// An engine with an api_key (an express-mode key, a token of its own)
	// sends it as Bearer, and ADC is never looked for.
	findCredentials = func(context.Context) (oauth2.TokenSource, error) {
		t.Error("ADC looked for with an api_key")
		return nil, errors.New("no")
	}
	var mu sync.Mutex
	want := "own-key"
	srv := gmFakeVertex(t, &want, &mu)
	cfg = &engines.Config{Name: "v", Provider: "vertex", Project: "proj", Location: "us-central1", APIKey: "own-key"}
	p, _ = New(cfg)
	resp, err := gmSend(t, p, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with api_key: %s", resp.Status)
	}
}

// gmRefused is a token source whose endpoint refused, with the secret
// oauth2 would put in its message.
type gmRefused struct{}

func (gmRefused) Token() (*oauth2.Token, error) {
	return nil, &oauth2.RetrieveError{Response: &http.Response{Status: "400 Bad Request"},
		Body: []byte(`{"error":"invalid_grant","assertion":"SECRET-ASSERTION"}`), ErrorCode: "invalid_grant"}
}

func TestVertexTokenErrorKeepsNoSecret(t *testing.T) {
	restore := findCredentials
	t.Cleanup(func() { findCredentials = restore })
	findCredentials = func(context.Context) (oauth2.TokenSource, error) { return gmRefused{}, nil }
	p, _ := New(&engines.Config{Name: "v", Provider: "vertex", Project: "proj", Location: "us-central1"})
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	err := p.Authorize(context.Background(), req, nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("error: %v", err)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("an Authorization header without a token")
	}
}

func TestGeminiAPIKeyHeader(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Path != "/v1beta/models/gemini-2.5-pro:generateContent":
			http.Error(w, "path "+r.URL.Path, http.StatusNotFound)
		case r.Header.Get("X-Goog-Api-Key") != "AIza-test" || r.Header.Get("Authorization") != "":
			http.Error(w, "key", http.StatusUnauthorized)
		default:
			_, _ = w.Write([]byte(`{}`))
		}
	}))
	defer srv.Close()
	restore := findCredentials
	t.Cleanup(func() { findCredentials = restore })
	findCredentials = func(context.Context) (oauth2.TokenSource, error) {
		t.Error("ADC looked for by a Gemini API engine")
		return nil, errors.New("no")
	}
	cfg := &engines.Config{Name: "g", Provider: "gemini", APIKey: "AIza-test", APIKeyHeader: "x-goog-api-key"}
	p, _ := New(cfg)
	resp, err := gmSend(t, p, cfg, srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("%s", resp.Status)
	}
}
