// Package providertest holds the fakes of the cloud providers that tests
// share: Anthropic, Bedrock, Gemini, Vertex and Azure OpenAI, one each, so
// that a test in providers/<name> and one through Caddy (caddymodule) hold
// the gateway to the same rules. Each fake listens on 127.0.0.1, speaks its
// provider's documented wire format, refuses what the provider refuses (a
// refusal fails the test: Fake.refuse), and records what it was sent.
// Beside them: the request rules of the APIs the fakes speak (Anthropic's
// Messages, OpenAI's Chat Completions), which the tests' own single-API
// engines use too, and Bedrock's pieces (SigV4, event stream frames,
// AWS's credential chain).
//
// What the fakes answer is written from the providers' documentation and
// their SDKs' types; each file names its sources. This package is a leaf
// for tests: it imports no package of the gateway.
package providertest

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
)

// Fakes of the cloud providers on 127.0.0.1, each speaking its provider's
// documented wire format and refusing what the provider refuses: a wrong
// path, a missing or wrong key, a bad signature, a member its API does not
// have. What a refusal says goes to the test as an error, so a request the
// gateway got wrong fails the test even when a fallback hides it.

// In mode "cached" every fake answers as "ok" and reports the same large
// usage in its own words: 100,000 prompt tokens, of which 60,000 were read
// from the prompt cache and (where the provider says so: Anthropic,
// Bedrock) 10,000 written to it, and 2,000 out. Anthropic's and Bedrock's
// input counts leave the cache's tokens out; Gemini's and Azure's hold them.
const (
	cachedIn    = 100_000
	cachedRead  = 60_000
	cachedWrite = 10_000
	cachedOut   = 2_000
)

// Request is what a fake was sent.
type Request struct {
	Path   string // escaped, as on the wire
	Query  string
	Header http.Header
	Body   []byte
}

// Fake is a provider's fake: a mode (ok, or a failure the provider
// answers), the key it takes, the requests it got, and what it refused.
// Its Server's URL is the engine's `to`.
type Fake struct {
	*httptest.Server
	t    testing.TB
	mu   sync.Mutex
	mode string
	key  string
	reqs []Request
}

// newFake starts a fake on 127.0.0.1 (never the wildcard address: tests
// reach only loopback) that records each request whole before serve
// answers it, and closes it when the test ends.
func newFake(t testing.TB, mode, key string, serve func(f *Fake, w http.ResponseWriter, r *http.Request, body []byte)) *Fake {
	t.Helper()
	f := &Fake{t: t, mode: mode, key: key}
	f.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		f.mu.Lock()
		f.reqs = append(f.reqs, Request{r.URL.EscapedPath(), r.URL.RawQuery, r.Header.Clone(), body})
		f.mu.Unlock()
		serve(f, w, r, body)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f.Listener = ln
	f.Start()
	t.Cleanup(f.Close)
	return f
}

// SetMode makes the fake answer the requests after it in mode m.
func (f *Fake) SetMode(m string) {
	f.mu.Lock()
	f.mode = m
	f.mu.Unlock()
}

// Mode is the mode the fake answers in.
func (f *Fake) Mode() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mode
}

// SetKey makes the fake take k (its provider's key, or Vertex's bearer
// token) from the next request on, as a provider does once a key is
// rotated or a token has expired.
func (f *Fake) SetKey(k string) {
	f.mu.Lock()
	f.key = k
	f.mu.Unlock()
}

func (f *Fake) getKey() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.key
}

// N is how many requests the fake was sent.
func (f *Fake) N() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.reqs)
}

// All are the requests the fake was sent, in order.
func (f *Fake) All() []Request {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]Request(nil), f.reqs...)
}

// refuse is a request the provider would refuse: the test fails.
func (f *Fake) refuse(format string, args ...any) {
	f.t.Errorf("%s refused: %s", f.URL, fmt.Sprintf(format, args...))
}

func writeJSON(w http.ResponseWriter, status int, body string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	io.WriteString(w, body)
}

// UnknownMembers are the members of a JSON object not in known.
func UnknownMembers(body []byte, known ...string) []string {
	var m map[string]json.RawMessage
	json.Unmarshal(body, &m)
	var out []string
	for k := range m {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

// words splits a text into stream deltas that add up to it.
func words(s string) []string { return strings.SplitAfter(s, " ") }
