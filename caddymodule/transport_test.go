package caddymodule

import (
	"encoding/pem"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/h2c"
)

// Engines on other machines reach the gateway through Caddy's own HTTP
// transport, configured per engine with reverse_proxy's `transport http`
// block (issue 16).

// internalCAEngine is an engine behind TLS whose certificate no system root
// trusts (as a vLLM behind a company CA), and the PEM file of that CA.
func internalCAEngine(t *testing.T) (*httptest.Server, string) {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(answerAs("secure")))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.StartTLS()
	t.Cleanup(srv.Close)
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	block := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, block, 0o600); err != nil {
		t.Fatal(err)
	}
	return srv, caFile
}

// tlsEngines are three engines on the same internal-CA upstream: two that
// trust its CA (the deprecated and the current spelling of Caddy's option)
// and one that does not.
func tlsEngines(url, caFile string) string {
	return fmt.Sprintf(`
		engine trusted {
			to %[1]s
			models trusted
			retries 0
			transport http {
				tls_trusted_ca_certs %[2]s
			}
		}
		engine pooled {
			to %[1]s
			models pooled
			retries 0
			transport http {
				tls_trust_pool file %[2]s
			}
		}
		engine untrusted {
			to %[1]s
			models untrusted
			retries 0
		}`, url, caFile)
}

func TestEngineBehindInternalCAIsReachedThroughItsTransport(t *testing.T) {
	srv, caFile := internalCAEngine(t)
	startGateway(t, tlsEngines(srv.URL, caFile))
	mustAnswer(t, "trusted")
	mustAnswer(t, "pooled")

	resp, body := post(t, "/v1/chat/completions", `{"model":"untrusted"}`)
	want := "engine untrusted could not be reached: TLS handshake failed: its certificate is signed by an authority the gateway does not trust"
	if resp.StatusCode != http.StatusBadGateway || !strings.Contains(body, want) || !strings.Contains(body, `"upstream_unreachable"`) {
		t.Fatalf("an engine whose CA is not trusted: %d %s\nwant 502 saying %q", resp.StatusCode, body, want)
	}
}

// The deploy gate tests the path production uses: the probe of a config
// file passes only through the engine's configured transport.
func TestProbeOfAConfigFileUsesTheEngineTransport(t *testing.T) {
	srv, caFile := internalCAEngine(t)
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	site := tlsEngines(srv.URL, caFile) + `
		pool good {
			member trusted
			member pooled
		}
		pool bad {
			member untrusted
		}`
	if err := os.WriteFile(cfgFile, []byte(":"+freePort(t)+" {\n\tllm_gateway {"+site+"\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runProbe(t, "--config", cfgFile, "--adapter", "caddyfile", "--pool", "good")
	if code != 0 || strings.Count(out, "pass") != 2 {
		t.Fatalf("members that trust the engine's CA: exit %d\n%s", code, out)
	}
	out, code = runProbe(t, "--config", cfgFile, "--adapter", "caddyfile", "--pool", "bad")
	if code != 1 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "TLS handshake failed") {
		t.Fatalf("a member that does not trust it: exit %d\n%s", code, out)
	}
}

func TestH2CEngineIsSpokenToInH2C(t *testing.T) {
	var h2, other atomic.Int32
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return
		}
		if r.ProtoMajor == 2 {
			h2.Add(1)
		} else {
			other.Add(1)
		}
		answerAs("h2c")(w, r)
	})
	srv := httptest.NewUnstartedServer(h2c.NewHandler(handler, &http2.Server{}))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv.Listener = ln
	srv.Start()
	t.Cleanup(srv.Close)

	startGateway(t, fmt.Sprintf(`
		engine h2c {
			to %s
			models h2c
			transport http {
				versions h2c
			}
		}`, srv.URL))
	mustAnswer(t, "h2c")
	mustAnswer(t, "h2c")
	if h2.Load() != 2 || other.Load() != 0 {
		t.Fatalf("the engine saw %d HTTP/2 and %d other requests, want 2 and 0", h2.Load(), other.Load())
	}
}
