package caddymodule

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
)

// The public example (examples/public/Caddyfile) on loopback: the same site
// block, with `tls internal` (Caddy's own CA) in place of a public domain's
// ACME certificate.

// startTLSGateway loads a gateway behind TLS with keys from the environment
// and the access log of the public example. It returns an HTTP client that
// trusts only Caddy's internal CA and may speak HTTP/2, and the access log's
// path.
func startTLSGateway(t *testing.T) (*http.Client, string) {
	t.Helper()
	t.Setenv("LLMGW_TEST_KEY_TEAM_A", "team-a-secret")
	t.Setenv("LLMGW_TEST_GATEWAY_KEYS", "key-1, key-2")
	dir := t.TempDir()
	accessLog := filepath.Join(dir, "access.log")
	initRaw(t, fmt.Sprintf(`{
	skip_install_trust
	admin localhost:@ADMIN@
	http_port @HTTP@
	https_port @TLS@
	grace_period 1ns
	local_certs
	log {
		output file %s
	}
}
https://%s {
	tls internal
	log {
		output file %s
		format filter {
			request>headers>X-Api-Key delete
			request>headers>Api-Key delete
			wrap json
		}
	}
	log_append llm_engine {http.llm_gateway.engine}
	log_append llm_model {http.llm_gateway.model}
	log_append llm_model_sent {http.llm_gateway.model_sent}
	log_append llm_attempts {http.llm_gateway.attempts}
	log_append llm_key {http.llm_gateway.key_name}
	llm_gateway {
		key team-a {env.LLMGW_TEST_KEY_TEAM_A}
		keys {env.LLMGW_TEST_GATEWAY_KEYS}
		engine demo {
			%s
			models demo
			model_name demo-engine
		}
	}
}
`, filepath.Join(dir, "caddy.log"), tlsAddr, accessLog, engineCmd("--model demo-engine --chunk-delay 0s")))

	tlsConfig := &tls.Config{RootCAs: internalRoots(t)}
	awaitCertificate(t, tlsConfig)
	tr := &http.Transport{
		TLSClientConfig:   tlsConfig,
		ForceAttemptHTTP2: true, // a custom TLS config turns HTTP/2 off otherwise
	}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 30 * time.Second}, accessLog
}

// internalRoots is a pool holding only the root of Caddy's internal CA, as
// its PKI admin endpoint hands it out.
func internalRoots(t *testing.T) *x509.CertPool {
	t.Helper()
	resp, err := http.Get(adminURL + "/pki/ca/local")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var ca struct {
		Root string `json:"root_certificate"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&ca); err != nil || resp.StatusCode != 200 {
		t.Fatalf("GET /pki/ca/local: %d %v", resp.StatusCode, err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM([]byte(ca.Root)) {
		t.Fatalf("no certificate in the CA's root_certificate %q", ca.Root)
	}
	return pool
}

// awaitCertificate waits until the site's certificate is issued: Caddy
// obtains it as the server starts, and a handshake before that fails. It
// shakes hands without sending a request, so the access log stays empty.
func awaitCertificate(t *testing.T, cfg *tls.Config) {
	t.Helper()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := tls.DialWithDialer(dialer, "tcp", tlsAddr, cfg)
		if err == nil {
			conn.Close()
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no TLS handshake with the internal CA's certificate: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func tlsSDK(client *http.Client, key string) *openai.Client {
	c := openai.NewClient(
		option.WithBaseURL("https://"+tlsAddr+"/v1/"),
		option.WithHTTPClient(client),
		option.WithAPIKey(key),
		option.WithMaxRetries(0),
		option.WithRequestTimeout(30*time.Second),
	)
	return &c
}

// assertHTTP2OverTLS fails unless resp came over HTTP/2 on a verified TLS
// connection.
func assertHTTP2OverTLS(t *testing.T, resp *http.Response) {
	t.Helper()
	if resp == nil {
		t.Fatal("no response")
	}
	if resp.ProtoMajor != 2 || resp.TLS == nil || resp.TLS.NegotiatedProtocol != "h2" || len(resp.TLS.VerifiedChains) == 0 {
		t.Fatalf("want HTTP/2 over verified TLS, got %s (TLS %v)", resp.Proto, resp.TLS != nil)
	}
}

func TestGatewayBehindTLSServesTheSDKOverHTTP2(t *testing.T) {
	client, _ := startTLSGateway(t)

	req, err := http.NewRequest(http.MethodGet, "https://"+tlsAddr+"/v1/models", nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer team-a-secret")
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	assertHTTP2OverTLS(t, resp)
	if resp.StatusCode != 200 || !strings.Contains(string(body), `"demo"`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	var streamed *http.Response
	stream := tlsSDK(client, "team-a-secret").Chat.Completions.NewStreaming(context.Background(),
		chatParams("demo", "over TLS"), option.WithResponseInto(&streamed))
	var text strings.Builder
	chunks := 0
	for stream.Next() {
		if c := stream.Current(); len(c.Choices) > 0 {
			text.WriteString(c.Choices[0].Delta.Content)
			chunks++
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	assertHTTP2OverTLS(t, streamed)
	if ct := streamed.Header.Get("Content-Type"); !strings.HasPrefix(ct, "text/event-stream") {
		t.Fatalf("Content-Type %q, want an event stream", ct)
	}
	if chunks < 2 || !strings.Contains(text.String(), `You said: "over TLS"`) ||
		!strings.HasSuffix(text.String(), "as a real model server would.") {
		t.Fatalf("%d chunks: %q", chunks, text.String())
	}
}

func TestGatewayBehindTLSRefusesABadKey(t *testing.T) {
	client, _ := startTLSGateway(t)
	for _, key := range []string{"wrong-key", ""} {
		var raw *http.Response
		_, err := tlsSDK(client, key).Chat.Completions.New(context.Background(),
			chatParams("demo", "hi"), option.WithResponseInto(&raw))
		e := apiError(t, err, http.StatusUnauthorized)
		if e.Code != "invalid_api_key" {
			t.Fatalf("key %q: code %q, want invalid_api_key", key, e.Code)
		}
		assertHTTP2OverTLS(t, raw)
	}
}

// TestAccessLogBehindTLSNamesTheKeyNeverTheToken proves the public example's log
// block: the gateway's fields are in each line, the key's name but no
// token, whichever header carried it.
func TestAccessLogBehindTLSNamesTheKeyNeverTheToken(t *testing.T) {
	client, accessLog := startTLSGateway(t)
	_, err := tlsSDK(client, "team-a-secret").Chat.Completions.New(context.Background(), chatParams("demo", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	for _, header := range []string{"X-Api-Key", "Api-Key"} {
		req, err := http.NewRequest(http.MethodPost, "https://"+tlsAddr+"/v1/chat/completions",
			strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set(header, "key-2")
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: %d", header, resp.StatusCode)
		}
	}

	entries := awaitAccessLog(t, accessLog, 3)
	for i, e := range entries {
		if e["llm_engine"] != "demo" || e["llm_model"] != "demo" || e["llm_model_sent"] != "demo-engine" ||
			e["llm_attempts"] != "1" {
			t.Errorf("line %d lacks the gateway's fields: %v", i, e)
		}
		if req, _ := e["request"].(map[string]any); req["proto"] != "HTTP/2.0" {
			t.Errorf("line %d: proto %v, want HTTP/2.0", i, req["proto"])
		}
	}
	if k := entries[0]["llm_key"]; k != "team-a" {
		t.Errorf("llm_key %v, want team-a", k)
	}
	if k := entries[1]["llm_key"]; k != "" {
		t.Errorf("llm_key %v for an unnamed key, want empty", k)
	}
	all := readFile(t, accessLog)
	for _, token := range []string{"team-a-secret", "key-2"} {
		if strings.Contains(all, token) {
			t.Errorf("the access log holds the token %s:\n%s", token, all)
		}
	}
}

// awaitAccessLog returns the first n entries of an access log, waiting for
// them: a line is written once its handler has returned, which may be just
// after the client has read the whole response.
func awaitAccessLog(t *testing.T, path string, n int) []map[string]any {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		b, _ := os.ReadFile(path)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(b) > 0 && len(lines) >= n {
			entries := make([]map[string]any, n)
			for i := range entries {
				if err := json.Unmarshal([]byte(lines[i]), &entries[i]); err != nil {
					t.Fatalf("access log line %d: %v\n%s", i, err, lines[i])
				}
			}
			return entries
		}
		if time.Now().After(deadline) {
			t.Fatalf("want %d access log lines, have:\n%s", n, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
