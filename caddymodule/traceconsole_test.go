package caddymodule

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// OTEL_TRACES_EXPORTER=console, the first way to see a trace that
// examples/tracing and docs/observability.md give: Caddy prints the
// gateway's spans on its standard output, with no collector.
func TestConsoleExporterPrintsTheGatewaysSpans(t *testing.T) {
	addr, admin := freeAddr(t), freeAddr(t)
	file := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %s
	skip_install_trust
}
http://%s {
	tracing {
		span llm_gateway
	}
	llm_gateway {
%s
	}
}
`, admin, addr, demoEngineSite(""))
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	dataDir := t.TempDir()
	cmd := exec.Command(caddyBinary(t), "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "OTEL_TRACES_EXPORTER=console", "XDG_DATA_HOME="+dataDir, "XDG_CONFIG_HOME="+dataDir)
	stdout := filepath.Join(t.TempDir(), "stdout")
	out, err := os.Create(stdout)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	t.Cleanup(func() { _ = cmd.Process.Signal(syscall.SIGTERM); <-done })
	eventually(t, "caddy answers on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"demo","messages":[{"role":"user","content":"hi"}]}`))
	if resp, body := do(t, req); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	eventually(t, "the request's span on standard output", func() bool {
		b, _ := os.ReadFile(stdout)
		return strings.Contains(string(b), `{"Name":"chat demo"`) && strings.Contains(string(b), `"gen_ai.request.model"`)
	})
}
