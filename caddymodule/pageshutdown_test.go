package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// A process told to exit with status pages open, on a site and on the
// admin endpoint, and no grace_period (Caddy waits for ever for what its
// servers serve): the pages' streams end cleanly at once and the process
// exits, where it used to wait for the browser tab to close. The real
// binary runs, since only an exiting process waits for its servers.
func TestAnOpenStatusPageDoesNotHoldTheExit(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the caddy binary")
	}
	addr, admin := freeAddr(t), freeAddr(t)
	file := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %s
	skip_install_trust
}
http://%s {
	llm_gateway {
		key ops %s
		ui /llm
		engine remote {
			to http://127.0.0.1:9
			models remote
		}
	}
}
`, admin, addr, uiKey)
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, exited := runCaddy(t, file, addr)

	// the page's state stream, on the site (with the key) and on the admin
	// endpoint, each read to its first state
	open := func(url string, header ...string) *bufio.Reader {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		for i := 0; i+1 < len(header); i += 2 {
			req.Header.Set(header[i], header[i+1])
		}
		resp, err := testClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { resp.Body.Close() })
		if resp.StatusCode != 200 {
			b, _ := io.ReadAll(resp.Body)
			t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
		}
		body := bufio.NewReader(resp.Body)
		for {
			line, err := body.ReadString('\n')
			if err != nil {
				t.Fatalf("%s ended before its first state: %v", url, err)
			}
			if line == "event: state\n" {
				return body
			}
		}
	}
	site := open("http://"+addr+"/llm/api/events", "Authorization", "Bearer "+uiKey)
	adminPage := open("http://" + admin + "/llm_gateway/ui/api/events")

	told := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string]*bufio.Reader{"the site's page": site, "the admin endpoint's page": adminPage} {
		// a clean end: the chunked body's last chunk, not a cut connection
		ended := make(chan error, 1)
		go func() { _, err := io.Copy(io.Discard, body); ended <- err }()
		select {
		case err := <-ended:
			if err != nil {
				t.Fatalf("%s's stream was cut %v after SIGTERM: %v", name, time.Since(told), err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("%s's stream was still open a minute after SIGTERM", name)
		}
	}
	select {
	case <-exited:
	case <-time.After(time.Minute):
		t.Fatal("caddy did not exit a minute after SIGTERM with a status page open")
	}
	t.Logf("with both pages open, caddy exited %v after SIGTERM", time.Since(told).Round(time.Millisecond))
}
