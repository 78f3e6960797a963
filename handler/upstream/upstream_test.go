package upstream

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"reflect"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// caller is a request as a client sends it, with every header the gateway
// must not pass on and some it must.
func caller(method, target string) *http.Request {
	r := httptest.NewRequest(method, target, nil)
	r.Header = http.Header{
		"Authorization":       {"Bearer the-callers-gateway-key"},
		"Proxy-Authorization": {"Basic cHJveHk6a2V5"},
		"X-Api-Key":           {"the-callers-anthropic-key"},
		"Api-Key":             {"the-callers-azure-key"},
		"Cookie":              {"session=the-gateway-sites"},
		"Connection":          {"keep-alive, X-Hop"},
		"X-Hop":               {"named by Connection"},
		"Keep-Alive":          {"timeout=5"},
		"Te":                  {"trailers"},
		"Upgrade":             {"h2c"},
		"Accept-Encoding":     {"gzip"},
		"Content-Length":      {"999"},
		"Openai-Organization": {"org-caller"},
		"Openai-Project":      {"proj-caller"},
		"Content-Type":        {"application/json"},
		"Anthropic-Version":   {"2023-06-01"},
		"X-Session-Id":        {"s1"},
		"User-Agent":          {"openai-python/1.0"},
	}
	return r
}

// TestNoCallerCredentialReachesAnEngine: the caller's key is for the
// gateway, never for an engine, whether the engine has a key of its own
// (which then takes its place) or not.
func TestNoCallerCredentialReachesAnEngine(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		cfg  engines.Config
		want http.Header // the credentials the engine sees
	}{
		{"no key of its own", engines.Config{}, http.Header{}},
		{"a bearer key", engines.Config{APIKey: "sk-engine"}, http.Header{"Authorization": {"Bearer sk-engine"}}},
		{"a key in Authorization by name", engines.Config{APIKey: "sk-engine", APIKeyHeader: "authorization"}, http.Header{"Authorization": {"Bearer sk-engine"}}},
		{"an Anthropic key", engines.Config{APIKey: "sk-ant", APIKeyHeader: "x-api-key"}, http.Header{"X-Api-Key": {"sk-ant"}}},
		{"an Azure key", engines.Config{APIKey: "az", APIKeyHeader: "Api-Key"}, http.Header{"Api-Key": {"az"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			out := NewRequest(context.Background(), caller(http.MethodPost, "/v1/chat/completions"), mustURL(t, "http://127.0.0.1:8080"), &tc.cfg, []byte(`{}`))
			got := http.Header{}
			for _, k := range []string{"Authorization", "Proxy-Authorization", "X-Api-Key", "Api-Key", "Cookie"} {
				if v, ok := out.Header[k]; ok {
					got[k] = v
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("credentials %v, want %v", got, tc.want)
			}
		})
	}
}

// Hop-by-hop headers (RFC 9110 §7.6.1, and those Connection names) stay
// on the caller's hop; the transport negotiates its own compression, and
// the length is the body's. The rest passes as sent.
func TestNewRequestShapesTheHeaders(t *testing.T) {
	t.Parallel()
	out := NewRequest(context.Background(), caller(http.MethodPost, "/v1/chat/completions"), mustURL(t, "http://127.0.0.1:8080"), &engines.Config{}, []byte(`{"model":"m"}`))
	for _, k := range []string{"Connection", "X-Hop", "Keep-Alive", "Te", "Upgrade", "Accept-Encoding"} {
		if v, ok := out.Header[k]; ok {
			t.Errorf("%s reached the engine: %q", k, v)
		}
	}
	for k, want := range map[string]string{
		"Content-Type": "application/json", "Anthropic-Version": "2023-06-01", "X-Session-Id": "s1",
		"User-Agent": "openai-python/1.0", "Content-Length": "13",
		"Openai-Organization": "org-caller", "Openai-Project": "proj-caller",
	} {
		if got := out.Header.Get(k); got != want {
			t.Errorf("%s: %q, want %q", k, got, want)
		}
	}
	if out.ContentLength != 13 || out.Host != "127.0.0.1:8080" || out.Method != http.MethodPost || out.ProtoMajor != 1 {
		t.Errorf("%+v", out)
	}
}

// An engine with a key of its own decides its own organization and
// project: the caller's are for another account.
func TestAnEnginesOwnKeyDropsTheCallersOrganization(t *testing.T) {
	t.Parallel()
	out := NewRequest(context.Background(), caller(http.MethodPost, "/v1/chat/completions"), mustURL(t, "https://api.example"), &engines.Config{APIKey: "sk-engine"}, nil)
	for _, k := range []string{"Openai-Organization", "Openai-Project"} {
		if v, ok := out.Header[k]; ok {
			t.Errorf("%s reached an engine with its own key: %q", k, v)
		}
	}
}

// Without a User-Agent of the caller's none is added (Go would add its
// own), as reverse_proxy does.
func TestNoUserAgentIsAdded(t *testing.T) {
	t.Parallel()
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	r.Header = http.Header{}
	out := NewRequest(context.Background(), r, mustURL(t, "http://127.0.0.1:1"), &engines.Config{}, nil)
	if v, ok := out.Header["User-Agent"]; !ok || len(v) != 1 || v[0] != "" {
		t.Fatalf("User-Agent %q", v)
	}
}

// The body is the exact bytes given, readable again (for a retry on a new
// connection); a GET or HEAD has none.
func TestTheBodyIsTheBytesGiven(t *testing.T) {
	t.Parallel()
	body := []byte(`{"model":"m","stream":true}`)
	out := NewRequest(context.Background(), caller(http.MethodPost, "/v1/chat/completions"), mustURL(t, "http://e"), &engines.Config{}, body)
	for range 2 {
		rc, err := out.GetBody()
		if err != nil {
			t.Fatal(err)
		}
		if b, _ := io.ReadAll(rc); string(b) != string(body) {
			t.Fatalf("%q", b)
		}
	}
	if b, _ := io.ReadAll(out.Body); string(b) != string(body) {
		t.Fatalf("%q", b)
	}
	empty := NewRequest(context.Background(), caller(http.MethodPost, "/v1/x"), mustURL(t, "http://e"), &engines.Config{}, nil)
	if empty.Body != http.NoBody || empty.Header.Get("Content-Length") != "0" {
		t.Fatalf("an empty body: %v %q", empty.Body, empty.Header.Get("Content-Length"))
	}
	for _, m := range []string{http.MethodGet, http.MethodHead} {
		get := NewRequest(context.Background(), caller(m, "/upstream/m/props"), mustURL(t, "http://e"), &engines.Config{}, nil)
		if get.Body != nil || get.Header.Get("Content-Length") != "" {
			t.Fatalf("%s has a body: %v %q", m, get.Body, get.Header.Get("Content-Length"))
		}
	}
}

func TestNewRequestCarriesTheContext(t *testing.T) {
	t.Parallel()
	type key struct{}
	ctx := context.WithValue(context.Background(), key{}, "mine")
	out := NewRequest(ctx, caller(http.MethodPost, "/v1/x"), mustURL(t, "http://e"), &engines.Config{}, nil)
	if out.Context().Value(key{}) != "mine" {
		t.Fatal("the attempt's context is lost")
	}
}

// The path joins the engine's base; a query in `to` (Azure's api-version)
// is kept and the caller's added; a fragment never leaves.
func TestTheURLJoinsTheEnginesBase(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, target, want string }{
		{"http://127.0.0.1:8080", "/v1/chat/completions", "http://127.0.0.1:8080/v1/chat/completions"},
		{"https://api.example/v1", "/v1/chat/completions", "https://api.example/v1/chat/completions"},
		{"https://api.example/v1/", "/v1/chat/completions", "https://api.example/v1/chat/completions"},
		{"https://host/openai/deployments/d", "/v1/chat/completions?x=1", "https://host/openai/deployments/d/v1/chat/completions?x=1"},
		{"https://host/az?api-version=2024-10-21", "/v1/chat/completions", "https://host/az/v1/chat/completions?api-version=2024-10-21"},
		{"https://host/az?api-version=2024-10-21", "/v1/chat/completions?y=2", "https://host/az/v1/chat/completions?api-version=2024-10-21&y=2"},
		{"http://e#frag", "/rerank", "http://e/rerank"},
	} {
		out := NewRequest(context.Background(), caller(http.MethodPost, tc.target), mustURL(t, tc.base), &engines.Config{}, nil)
		if got := out.URL.String(); got != tc.want {
			t.Errorf("%s + %s = %s, want %s", tc.base, tc.target, got, tc.want)
		}
	}
}

func TestJoinPath(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, req, want string }{
		{"", "/v1/models", "/v1/models"},
		{"/", "/v1/models", "/v1/models"},
		{"/v1", "/v1/models", "/v1/models"},
		{"/v1/", "/v1/models", "/v1/models"},
		{"/v1", "/v1", "/v1"},
		{"/api/v1", "/v1/chat/completions", "/api/v1/chat/completions"},
		{"/v1", "/rerank", "/v1/rerank"},
		{"/v1", "/v1beta/x", "/v1/v1beta/x"},
		{"/base", "/v1/models", "/base/v1/models"},
	} {
		if got := JoinPath(tc.base, tc.req); got != tc.want {
			t.Errorf("JoinPath(%q, %q) = %q, want %q", tc.base, tc.req, got, tc.want)
		}
	}
}

// CopyHeader drops the hop-by-hop list and what Connection names (in any
// case, with spaces and empty items), and copies the rest as it is.
func TestCopyHeaderDropsHopByHop(t *testing.T) {
	t.Parallel()
	src := http.Header{
		"Connection":         {"close, x-one", " X-Two ,,"},
		"X-One":              {"1"},
		"X-Two":              {"2"},
		"Transfer-Encoding":  {"chunked"},
		"Trailer":            {"X-Sum"},
		"Alt-Svc":            {"h3=\":443\""},
		"Proxy-Connection":   {"keep-alive"},
		"Proxy-Authenticate": {"Basic"},
		"Content-Type":       {"text/event-stream"},
		"X-Many":             {"a", "b"},
	}
	dst := http.Header{"X-Already": {"kept"}}
	CopyHeader(dst, src)
	want := http.Header{"X-Already": {"kept"}, "Content-Type": {"text/event-stream"}, "X-Many": {"a", "b"}}
	if !reflect.DeepEqual(dst, want) {
		t.Fatalf("%v\nwant %v", dst, want)
	}
}
