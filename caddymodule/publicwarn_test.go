package caddymodule

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddytls"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

const (
	openWarning = "llm_gateway has no keys and its site listens without TLS on a non-loopback address"
	tlsWarning  = "llm_gateway has no keys and its site listens on a non-loopback address"
)

func TestWarningForAGatewayWithoutKeysOnAPlainPublicListener(t *testing.T) {
	withTLS := caddytls.ConnectionPolicies{new(caddytls.ConnectionPolicy)}
	for _, tc := range []struct {
		name   string
		listen []string
		tls    caddytls.ConnectionPolicies
		keys   bool
		warn   bool
		// tlsWarn: warned as a public bind behind TLS
		tlsWarn bool
	}{
		{name: "wildcard", listen: []string{":8080"}, warn: true},
		{name: "all IPv4 interfaces", listen: []string{"0.0.0.0:8080"}, warn: true},
		{name: "a LAN address", listen: []string{"10.0.0.7:8080"}, warn: true},
		{name: "a host name", listen: []string{"gateway.internal:8080"}, warn: true},
		{name: "loopback and a public address", listen: []string{"127.0.0.1:8080", "192.0.2.1:8080"}, warn: true},
		{name: "TLS policies but the HTTP port", listen: []string{":80"}, tls: withTLS, warn: true},
		{name: "a port range over the HTTP port", listen: []string{":79-81"}, tls: withTLS, warn: true},
		{name: "a socket from the service manager", listen: []string{"fd/3"}, warn: true},

		{name: "IPv4 loopback", listen: []string{"127.0.0.1:8080"}},
		{name: "IPv6 loopback", listen: []string{"[::1]:8080"}},
		{name: "localhost", listen: []string{"localhost:8080", "tcp4/localhost:8081"}},
		{name: "a unix socket", listen: []string{"unix//run/llm.sock"}},
		{name: "TLS on a wildcard", listen: []string{":443"}, tls: withTLS, tlsWarn: true},
		{name: "TLS on a LAN address", listen: []string{"10.0.0.7:8443"}, tls: withTLS, tlsWarn: true},
		{name: "TLS on loopback", listen: []string{"127.0.0.1:8443"}, tls: withTLS},
		{name: "keys behind TLS", listen: []string{":443"}, tls: withTLS, keys: true},
		{name: "keys on a wildcard", listen: []string{":8080"}, keys: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := &caddyhttp.Server{Listen: tc.listen, TLSConnPolicies: tc.tls}
			ctx := caddy.Context{Context: context.WithValue(context.Background(), caddyhttp.ServerCtxKey, srv)}
			core, logs := observer.New(zapcore.WarnLevel)
			warnIfOpen(ctx, zap.New(core), tc.keys)
			warned := logs.FilterMessageSnippet(openWarning).Len() == 1
			tlsWarned := logs.FilterMessageSnippet(tlsWarning).Len() == 1
			if warned != tc.warn || tlsWarned != tc.tlsWarn || logs.Len() > 1 {
				t.Fatalf("listen %v, TLS %v, keys %v: warned %v/%v behind TLS, want %v/%v (%v)", tc.listen, tc.tls != nil, tc.keys, warned, tlsWarned, tc.warn, tc.tlsWarn, logs.All())
			}
		})
	}
}

func TestPublicWarningWithoutAServerToLookAt(t *testing.T) {
	core, logs := observer.New(zapcore.WarnLevel)
	warnIfOpen(caddy.Context{Context: context.Background()}, zap.New(core), false)
	if logs.FilterMessageSnippet("llm_gateway has no keys").Len() != 1 {
		t.Fatalf("a gateway without keys outside any server we can see must warn: %v", logs.All())
	}
}

// The tests below let Caddy provision a real config, so they prove what the
// table above takes for granted: the server is in the context of its
// handlers, its listen addresses are resolved, automatic HTTPS has already
// decided on TLS, and the http app's http_port can be read.

// warnProbe is a handler that only runs warnIfOpen in its Provision, as
// Gateway.Provision does.
type warnProbe struct {
	Keys bool `json:"keys,omitempty"`
}

// probeLogger receives the probe's warnings.
var probeLogger = zap.NewNop()

func init() { caddy.RegisterModule(warnProbe{}) }

func (warnProbe) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_gateway_test_warn_probe",
		New: func() caddy.Module { return new(warnProbe) },
	}
}

func (p *warnProbe) Provision(ctx caddy.Context) error {
	warnIfOpen(ctx, probeLogger, p.Keys)
	return nil
}

func (p *warnProbe) ServeHTTP(w http.ResponseWriter, r *http.Request, next caddyhttp.Handler) error {
	return next.ServeHTTP(w, r)
}

// provisionWarnings provisions (as `caddy validate` does: nothing listens,
// no certificate is obtained) an http app with one server holding the probe,
// and returns the probe's warnings.
func provisionWarnings(t *testing.T, server string, keys bool) []observer.LoggedEntry {
	t.Helper()
	core, logs := observer.New(zapcore.WarnLevel)
	probeLogger = zap.New(core)
	t.Cleanup(func() { probeLogger = zap.NewNop() })
	// free ports, though nothing listens: @HTTP@ and @HTTPS@ are Caddy's
	// HTTP and HTTPS ports, @OTHER@ is neither
	httpPort, httpsPort := freePort(t), freePort(t)
	server = strings.NewReplacer("@HTTP@", httpPort, "@HTTPS@", httpsPort, "@OTHER@", freePort(t)).Replace(server)
	var srv map[string]any
	if err := json.Unmarshal([]byte(server), &srv); err != nil {
		t.Fatal(err)
	}
	probe := map[string]any{"handler": "llm_gateway_test_warn_probe", "keys": keys}
	if routes, ok := srv["routes"].([]any); ok {
		routes[0].(map[string]any)["handle"] = []any{probe}
	} else {
		srv["routes"] = []any{map[string]any{"handle": []any{probe}}}
	}
	raw, err := json.Marshal(map[string]any{
		// Validate installs the config's default log, as `caddy validate` does
		"logging": map[string]any{"logs": map[string]any{"default": map[string]any{"writer": map[string]any{"output": "discard"}}}},
		"apps":    map[string]any{"http": map[string]any{"http_port": json.Number(httpPort), "https_port": json.Number(httpsPort), "servers": map[string]any{"probe": srv}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	if err := caddy.Validate(&cfg); err != nil {
		t.Fatalf("%v\n%s", err, raw)
	}
	return logs.All()
}

func TestPublicWarningUnderCaddysProvisioning(t *testing.T) {
	for _, tc := range []struct {
		name   string
		server string
		keys   bool
		warn   bool
		// tlsWarn: warned as a public bind behind TLS
		tlsWarn bool
	}{
		{name: "a wildcard bind", server: `{"listen":[":@OTHER@"]}`, warn: true},
		{name: "a placeholder resolving to a LAN address", server: `{"listen":["{env.LLMGW_TEST_BIND}:@OTHER@"]}`, warn: true},
		// explicit TLS policies, but Caddy serves its HTTP port in plain text
		{name: "TLS policies on the HTTP port", server: `{"listen":[":@HTTP@"],"tls_connection_policies":[{}]}`, warn: true},

		{name: "a loopback bind", server: `{"listen":["127.0.0.1:@OTHER@","[::1]:@OTHER@"]}`},
		{name: "keys on a wildcard bind", server: `{"listen":[":@OTHER@"]}`, keys: true},
		// the adapter's JSON for a `llm.example.com` site: a host matcher,
		// to which automatic HTTPS adds TLS before handlers are provisioned
		{name: "a domain with automatic HTTPS", server: `{"listen":[":@HTTPS@"],"routes":[{"match":[{"host":["llm.example.com"]}]}]}`, tlsWarn: true},
		{name: "explicit TLS on a wildcard bind", server: `{"listen":[":@OTHER@"],"tls_connection_policies":[{}]}`, tlsWarn: true},
		{name: "keys on a domain with automatic HTTPS", server: `{"listen":[":@HTTPS@"],"routes":[{"match":[{"host":["llm.example.com"]}]}]}`, keys: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("LLMGW_TEST_BIND", "10.0.0.7")
			logs := provisionWarnings(t, tc.server, tc.keys)
			warned := len(logs) == 1 && strings.HasPrefix(logs[0].Message, openWarning)
			tlsWarned := len(logs) == 1 && strings.HasPrefix(logs[0].Message, tlsWarning)
			if warned != tc.warn || tlsWarned != tc.tlsWarn || len(logs) > 1 {
				t.Fatalf("%s (keys %v): warned %v/%v behind TLS, want %v/%v: %v", tc.server, tc.keys, warned, tlsWarned, tc.warn, tc.tlsWarn, logs)
			}
			if warned {
				if got := fmt.Sprint(logs[0].ContextMap()["listen"]); strings.Contains(got, "{env.") {
					t.Fatalf("the warning names the unresolved address %s", got)
				}
			}
		})
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*warnProbe)(nil)
	_ caddyhttp.MiddlewareHandler = (*warnProbe)(nil)
)

// The quickstart has no keys: it must listen where nobody else can reach it,
// so that its first log line is not the warning above.
func TestQuickstartListensOnLoopbackOnly(t *testing.T) {
	out, _, err := adaptCaddyfile(readFileBytes(t, "../examples/quickstart/Caddyfile"))
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Apps struct {
			HTTP struct {
				Servers map[string]*caddyhttp.Server `json:"servers"`
			} `json:"http"`
		} `json:"apps"`
	}
	if err := json.Unmarshal(out, &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.Apps.HTTP.Servers) == 0 {
		t.Fatalf("no servers in %s", out)
	}
	for name, srv := range cfg.Apps.HTTP.Servers {
		if open := plainPublicListeners(srv, caddyhttp.DefaultHTTPPort); len(open) > 0 || len(srv.Listen) == 0 {
			t.Errorf("server %s listens on %v: open to others: %v", name, srv.Listen, open)
		}
	}
}

func readFileBytes(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
