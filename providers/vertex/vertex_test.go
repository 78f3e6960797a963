package vertex

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/oauth2"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
	"github.com/llmgateway/caddy-llm-gateway/providers"
)

func TestVertexSetsItsEndpointAndNeedsItsProjectAndLocation(t *testing.T) {
	for loc, want := range map[string]string{"us-central1": "https://us-central1-aiplatform.googleapis.com", "global": "https://aiplatform.googleapis.com"} {
		var e providers.Engine
		if err := (&Vertex{Project: "p", Location: loc}).Engine(&e); err != nil || e.To != want || !slices.Equal(e.APIs, []string{"gemini"}) || e.KeyHeader != "" {
			t.Errorf("%s: %+v %v", loc, e, err)
		}
	}
	var e providers.Engine
	if err := (&Vertex{Location: "us-central1"}).Engine(&e); err == nil || !strings.Contains(err.Error(), "needs its project and location") {
		t.Errorf("without a project: %v", err)
	}
}

func TestVertexTarget(t *testing.T) {
	p := &Vertex{Project: "proj", Location: "us-central1"}
	const base = "https://us-central1-aiplatform.googleapis.com"
	for _, c := range []struct {
		model  string
		stream bool
		want   string
	}{
		{"gemini-2.5-pro", false, base + "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"},
		{"gemini-2.5-pro", true, base + "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:streamGenerateContent?alt=sse"},
		{"publishers/meta/models/llama-4", false, base + "/v1/projects/proj/locations/us-central1/publishers/meta/models/llama-4:generateContent"},
		{"projects/other/locations/europe-west4/endpoints/123", false, base + "/v1/projects/other/locations/europe-west4/endpoints/123:generateContent"},
		{"models/gemini-2.5-pro", false, base + "/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent"},
	} {
		b, _ := url.Parse(base)
		u := *b
		p.Target(&u, providers.Request{Base: b, API: api.Gemini, Path: "/v1/chat/completions", Model: c.model, Stream: c.stream})
		if u.String() != c.want {
			t.Errorf("%s stream=%v:\n got %s\nwant %s", c.model, c.stream, u.String(), c.want)
		}
	}
}

// A model's methods are read in the engine's own project and location
// only, Google's and another publisher's.
func TestVertexReadsItsRoutes(t *testing.T) {
	p := &Vertex{Project: "proj", Location: "us-central1"}
	for _, c := range []struct {
		tail        string
		name, model string // "" name: no route
	}{
		{"/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "generateContent", "gemini-2.5-pro"},
		{"/v1beta1/projects/proj/locations/us-central1/publishers/anthropic/models/claude:streamRawPredict", "streamRawPredict", "publishers/anthropic/models/claude"},
		{"/v1/projects/other/locations/us-central1/publishers/google/models/gemini-2.5-pro:generateContent", "", ""},
		{"/v1/projects/proj/locations/europe-west4/publishers/google/models/gemini-2.5-pro:generateContent", "", ""},
		{"/v1/projects/proj/locations/us-central1/endpoints/123:predict", "", ""},
	} {
		r, ok := p.ReadRoute(c.tail)
		if ok != (c.name != "") || r.Name != c.name || r.Model != c.model {
			t.Errorf("%s: %+v %v, want %q %q", c.tail, r, ok, c.name, c.model)
		}
		if ok && !slices.Contains(p.Routes(), r.Name) {
			t.Errorf("%s: route %s is not in the provider's list", c.tail, r.Name)
		}
	}
	base, _ := url.Parse("https://us-central1-aiplatform.googleapis.com")
	u, _ := url.Parse(base.String() + "/caller/wrote/this?key=theirs")
	p.RouteTarget(u, base, "countTokens", "gemini-2.5-pro")
	if want := "https://us-central1-aiplatform.googleapis.com/v1/projects/proj/locations/us-central1/publishers/google/models/gemini-2.5-pro:countTokens"; u.String() != want {
		t.Errorf("\n got %s\nwant %s", u, want)
	}
}

// fakeTokens issues tok-1, tok-2…, each valid for life (oauth2's reuse
// refreshes 10 s before the end).
type fakeTokens struct {
	mu   sync.Mutex
	n    int
	life time.Duration
}

func (f *fakeTokens) Token() (*oauth2.Token, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	return &oauth2.Token{AccessToken: "tok-" + string(rune('0'+f.n)), TokenType: "Bearer", Expiry: time.Now().Add(f.life)}, nil
}

// send targets, authorizes and sends one request as the handler does,
// with the engine's key (if any) set first as Bearer.
func send(t *testing.T, p *Vertex, key, to string) (*http.Response, error) {
	t.Helper()
	base, _ := url.Parse(to)
	u := *base
	p.Target(&u, providers.Request{Base: base, API: api.Gemini, Model: providertest.GeminiModel})
	body := []byte(`{"contents":[{"role":"user","parts":[{"text":"hi"}]}]}`)
	req, _ := http.NewRequest(http.MethodPost, u.String(), strings.NewReader(string(body)))
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	if err := p.Authorize(context.Background(), req, body); err != nil {
		return nil, err
	}
	return http.DefaultClient.Do(req)
}

func TestVertexADCToken(t *testing.T) {
	fake := &fakeTokens{life: 10*time.Second + 300*time.Millisecond}
	finds := 0
	srv := providertest.Vertex(t, "ok")
	srv.SetKey("tok-1")
	p := &Vertex{Project: providertest.VertexProject, Location: providertest.VertexLocation,
		find: func(context.Context) (oauth2.TokenSource, error) { finds++; return fake, nil }}
	for i := range 2 {
		resp, err := send(t, p, "", srv.URL)
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
	srv.SetKey("tok-2")
	resp, err := send(t, p, "", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || fake.n != 2 {
		t.Fatalf("after expiry: %s, %d tokens", resp.Status, fake.n)
	}
}

func TestVertexWithKeyAndWithoutCredentials(t *testing.T) {
	p := &Vertex{Project: "proj", Location: "us-central1", find: func(context.Context) (oauth2.TokenSource, error) {
		return nil, errors.New("google: could not find default credentials")
	}}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	if err := p.Authorize(context.Background(), req, nil); err == nil || !strings.Contains(err.Error(), "Application Default Credentials") {
		t.Errorf("no credentials: %v", err)
	}

	// An engine with an api_key (a token of its own as Bearer, an
	// express-mode key in x-goog-api-key) sends it, and ADC is never
	// looked for.
	p = &Vertex{Project: providertest.VertexProject, Location: providertest.VertexLocation, find: func(context.Context) (oauth2.TokenSource, error) {
		t.Error("ADC looked for with an api_key")
		return nil, errors.New("no")
	}}
	srv := providertest.Vertex(t, "ok")
	srv.SetKey("own-key")
	resp, err := send(t, p, "own-key", srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("with api_key: %s", resp.Status)
	}
	req, _ = http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	req.Header.Set("X-Goog-Api-Key", "express-key")
	if err := p.Authorize(context.Background(), req, nil); err != nil || req.Header.Get("Authorization") != "" {
		t.Errorf("an express-mode key: %v, Authorization %q", err, req.Header.Get("Authorization"))
	}
}

// refused is a token source whose endpoint refused, with the secret
// oauth2 would put in its message.
type refused struct{}

func (refused) Token() (*oauth2.Token, error) {
	return nil, &oauth2.RetrieveError{Response: &http.Response{Status: "400 Bad Request"},
		Body: []byte(`{"error":"invalid_grant","assertion":"SECRET-ASSERTION"}`), ErrorCode: "invalid_grant"}
}

func TestVertexTokenErrorKeepsNoSecret(t *testing.T) {
	p := &Vertex{Project: "proj", Location: "us-central1", find: func(context.Context) (oauth2.TokenSource, error) { return refused{}, nil }}
	req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1/", nil)
	err := p.Authorize(context.Background(), req, nil)
	if err == nil || strings.Contains(err.Error(), "SECRET") || !strings.Contains(err.Error(), "invalid_grant") {
		t.Errorf("error: %v", err)
	}
	if req.Header.Get("Authorization") != "" {
		t.Error("an Authorization header without a token")
	}
}
