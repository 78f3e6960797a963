package caddymodule

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/caddyserver/caddy/v2/caddytest"
	_ "github.com/caddyserver/caddy/v2/modules/standard"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/packages/ssestream"

	"github.com/llmgateway/caddy-llm-gateway/internal/demoengine"
)

// The test binary doubles as the engine binary: with LLMGW_TEST_ENGINE=1 in
// its environment (set by the engine's `env` line) it runs the demo engine
// with its arguments instead of the tests, so engine tests start real
// processes without building anything else.
func TestMain(m *testing.M) {
	if os.Getenv("LLMGW_TEST_ENGINE") == "1" {
		// a test that counts starts names a file each start appends to
		if f := os.Getenv("LLMGW_TEST_STARTS"); f != "" {
			if fh, err := os.OpenFile(f, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintln(fh, os.Getpid())
				fh.Close()
			}
		}
		if err := demoengine.Run(os.Args[1:]); err != nil {
			fmt.Fprintln(os.Stderr, "demo engine:", err)
			os.Exit(2)
		}
		os.Exit(0)
	}
	pickPorts()
	// Caddy's data directory (certificates, the key limits' counters) is
	// this run's own: nothing carries over from another run
	data, err := os.MkdirTemp("", "llmgw-data-")
	if err != nil {
		panic(err)
	}
	os.Setenv("XDG_DATA_HOME", data)
	code := m.Run()
	removeBinary()
	os.RemoveAll(data)
	os.Exit(code)
}

// Test Caddys listen on free ports, picked once per test binary, so the
// suite runs beside anything else on the machine (and beside itself).
var (
	gwAddr    string // the gateway's site
	gwURL     string
	adminAddr string // Caddy's admin endpoint
	adminURL  string
	tlsAddr   string // the TLS tests' site
	ports     *strings.Replacer
	allPorts  []string
)

// pickPorts takes free loopback ports for the test Caddys. The listeners
// are closed at once: a port another process grabs in between fails a test
// loudly rather than silently, and the kernel hands out ports in a cycle.
func pickPorts() {
	free := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer l.Close()
		return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
	}
	gw, admin, http, https, tls := free(), free(), free(), free(), free()
	gwAddr, gwURL = "127.0.0.1:"+gw, "http://127.0.0.1:"+gw
	adminAddr, adminURL = "localhost:"+admin, "http://localhost:"+admin
	tlsAddr = "127.0.0.1:" + tls
	ports = strings.NewReplacer("@ADMIN@", admin, "@HTTP@", http, "@HTTPS@", https, "@TLS@", tls)
	allPorts = []string{gw, admin, http, https, tls}
}

// freePort is a free loopback port, as text, for a config that is loaded
// but not served (adapted, validated, probed): no test depends on a fixed
// port being free.
func freePort(t *testing.T) string {
	t.Helper()
	_, port, err := net.SplitHostPort(freeAddr(t))
	if err != nil {
		t.Fatal(err)
	}
	return port
}

// withPorts fills a test Caddyfile's port marks (@ADMIN@, @HTTP@, @HTTPS@,
// @TLS@) with this run's ports.
func withPorts(cfg string) string { return ports.Replace(cfg) }

// engineCmd is the cmd/env lines of an engine that runs the demo engine in
// this test binary, with extra demo-engine flags.
func engineCmd(flags string) string {
	return "cmd {gateway.executable} --port {engine.port} --pace-answers=false " + flags + "\n\t\t\tenv LLMGW_TEST_ENGINE=1\n\t\t\tto http://127.0.0.1:{engine.port}"
}

// startGateway loads a config into the in-process Caddy: site holds the
// llm_gateway block's insides. It returns the path of the log file Caddy
// writes for this config.
func startGateway(t *testing.T, site string) string {
	t.Helper()
	logFile := filepath.Join(t.TempDir(), "caddy.log")
	cfg := testGlobals(fmt.Sprintf("log {\n\t\toutput file %s\n\t\tlevel DEBUG\n\t}", logFile)) + fmt.Sprintf(`http://%s {
	llm_gateway {
%s
	}
}
`, gwAddr, site)
	initRaw(t, cfg)
	t.Cleanup(func() {
		// a failure's story is in Caddy's log: its end goes with the failure
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			lines := strings.Split(strings.TrimSpace(string(b)), "\n")
			t.Logf("the end of Caddy's log:\n%s", strings.Join(lines[max(0, len(lines)-40):], "\n"))
		}
	})
	return logFile
}

// testGlobals is the global options block of a config the tests load
// whole: the tests' admin endpoint and ports (initRaw fills them in), no
// trust store to install, no grace period; extra holds more options, as
// they are written inside the block.
func testGlobals(extra string) string {
	g := "{\n\tskip_install_trust\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n\tgrace_period 1ns\n"
	if extra != "" {
		g += "\t" + extra + "\n"
	}
	return g + "}\n"
}

// initRaw loads a whole Caddyfile into the in-process Caddy.
func initRaw(t *testing.T, cfg string) {
	t.Helper()
	port, _ := strconv.Atoi(strings.TrimPrefix(adminAddr, "localhost:"))
	tc := caddytest.NewTester(t).WithDefaultOverrides(caddytest.Config{AdminPort: port})
	tc.InitServer(withPorts(cfg), "caddyfile")
	if t.Failed() {
		t.FailNow()
	}
	waitOldListeners(t, allPorts...) // reload_test.go
}

// testClient opens a connection per request: every test loads a new config,
// and a reload closes the server's idle connections, so a pooled one could
// meet its close on a POST (which is not retried) and fail with EOF.
var testClient = &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}

func sdk(key string, opts ...option.RequestOption) *openai.Client {
	base := []option.RequestOption{
		option.WithHTTPClient(testClient),
		option.WithBaseURL(gwURL + "/v1/"),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(30 * time.Second),
	}
	c := openai.NewClient(append(base, opts...)...)
	return &c
}

// readStream reads the rest of an SDK stream: the text of its deltas, and
// the error it ended with.
func readStream(stream *ssestream.Stream[openai.ChatCompletionChunk]) (string, error) {
	var text strings.Builder
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
		}
	}
	return text.String(), stream.Err()
}

func chatParams(model, msg string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{
		Model:    model,
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(msg)},
	}
}

// apiError asserts err is an OpenAI API error with the status and returns it.
func apiError(t *testing.T, err error, status int) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an API error with status %d, got %v", status, err)
	}
	if e.StatusCode != status {
		t.Fatalf("want status %d, got %d: %s", status, e.StatusCode, e.Message)
	}
	return e
}

// recorder is an upstream on 127.0.0.1 that records what it was sent and
// answers with respond.
type recorder struct {
	*httptest.Server
	mu       sync.Mutex
	requests []recorded
}

type recorded struct {
	header http.Header
	body   []byte
	path   string
}

func newRecorder(t *testing.T, respond http.HandlerFunc) *recorder {
	t.Helper()
	rec := &recorder{}
	rec.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.mu.Lock()
		rec.requests = append(rec.requests, recorded{r.Header.Clone(), body, r.URL.Path})
		rec.mu.Unlock()
		r.Body = io.NopCloser(bytes.NewReader(body))
		respond(w, r)
	}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	rec.Listener = ln
	rec.Start()
	t.Cleanup(rec.Close)
	return rec
}

// all returns the requests it was sent, without readiness probes.
func (r *recorder) all() []recorded {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []recorded
	for _, req := range r.requests {
		if req.path != "/health" {
			out = append(out, req)
		}
	}
	return out
}

// okChat answers a minimal chat completion.
func okChat(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`)
}

// post sends a raw request to the gateway.
func post(t *testing.T, path, body string, header ...string) (*http.Response, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, gwURL+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

// mustAnswer asks for a chat completion of model and fails the test unless
// it gets a 200.
func mustAnswer(t *testing.T, model string) *http.Response {
	t.Helper()
	resp, body := post(t, "/v1/chat/completions", `{"model":"`+model+`"}`)
	if resp.StatusCode != 200 {
		t.Fatalf("%s: %d %s", model, resp.StatusCode, body)
	}
	return resp
}

func do(t *testing.T, req *http.Request) (*http.Response, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	resp, err := testClient.Do(req.WithContext(ctx))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// adaptCaddyfile adapts a Caddyfile named "Caddyfile" to JSON.
func adaptCaddyfile(body []byte) ([]byte, []caddyconfig.Warning, error) {
	return caddyconfig.GetAdapter("caddyfile").Adapt(body, map[string]any{"filename": "Caddyfile"})
}
