package caddymodule

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A front door told to exit (SIGTERM, as a rolling deploy stops it) with a
// stream open: Caddy's grace_period bounds the wait for it, and shortly
// before the period ends the stream gets an error event saying the gateway
// is going away and a clean end (a whole chunked body), not the cut the
// process's exit would be: a Chat client reads the event, a Messages
// client its own error event, a Responses client its own error and
// response.failed, and the Node SDK raises it as an error. The real binary runs, since only an exiting process cuts its
// streams.
func TestAStreamOpenAtExitEndsWithGoingAwayBeforeTheGracePeriod(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs the caddy binary")
	}
	const grace = 2 * time.Second
	addr, admin := freeAddr(t), freeAddr(t)
	file := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %s
	skip_install_trust
	grace_period %s
}
http://%s {
	llm_gateway {
		engine slow {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model slow --reply "%s" --words-per-chunk 1 --chunk-delay 100ms
			to http://127.0.0.1:{engine.port}
			models slow
		}
	}
}
`, admin, grace, addr, strings.Repeat("word ", 100))
	if err := os.WriteFile(file, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd, exited := runCaddy(t, file, addr)

	req, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/chat/completions",
		strings.NewReader(`{"model":"slow","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body := bufio.NewReader(resp.Body)
	for {
		// the first event; a preamble comment (": engine slow") comes
		// before it when the engine's start is slow, as on a busy machine
		line, err := body.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, ":") && strings.TrimSpace(line) != "" && !strings.HasPrefix(line, "data: ") {
			t.Fatalf("no first event: %q %v", line, err)
		}
		if strings.HasPrefix(line, "data: ") {
			break
		}
	}
	// and a Responses client's stream, which is told in its own grammar
	rreq, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/responses",
		strings.NewReader(`{"model":"slow","stream":true,"input":"hi"}`))
	rreq.Header.Set("Content-Type", "application/json")
	rresp, err := testClient.Do(rreq)
	if err != nil {
		t.Fatal(err)
	}
	defer rresp.Body.Close()
	rbody := bufio.NewReader(rresp.Body)
	for {
		line, err := rbody.ReadString('\n')
		if err != nil {
			t.Fatalf("the Responses stream ended before its first delta: %v", err)
		}
		if strings.Contains(line, "response.output_text.delta") {
			break
		}
	}

	// and a Messages client's, told in its own grammar too
	mreq, _ := http.NewRequest(http.MethodPost, "http://"+addr+"/v1/messages",
		strings.NewReader(`{"model":"slow","max_tokens":500,"stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	mreq.Header.Set("Content-Type", "application/json")
	mresp, err := testClient.Do(mreq)
	if err != nil {
		t.Fatal(err)
	}
	defer mresp.Body.Close()
	mbody := bufio.NewReader(mresp.Body)
	for {
		line, err := mbody.ReadString('\n')
		if err != nil {
			t.Fatalf("the Messages stream ended before its first delta: %v", err)
		}
		if strings.Contains(line, "content_block_delta") {
			break
		}
	}
	// and the Node SDK's Responses helper, where it is installed
	var node <-chan nodeLine
	if nodeSDK(t) != "" {
		node = nodeResponses(t, "http://"+addr+"/v1", "slow")
		for l := range node {
			if l.Delta != "" {
				break
			}
			if l.End != "" {
				t.Fatalf("the Node SDK's stream ended before its first delta: %+v", l)
			}
		}
	}

	told := time.Now()
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	rest, err := io.ReadAll(body)
	took := time.Since(told)
	if err != nil {
		t.Fatalf("the stream was cut %v after SIGTERM: %v\n%s", took, err, rest)
	}
	text := strings.TrimSpace(string(rest))
	if strings.Contains(text, "[DONE]") || !strings.Contains(text[strings.LastIndex(text, "\n")+1:], `"gateway_going_away"`) {
		t.Fatalf("the stream did not end with the going-away event:\n%s", text)
	}
	if took > 5*grace {
		t.Fatalf("the stream ended %v after SIGTERM, the grace period being %v", took, grace)
	}
	events, err := sseEventsOf(io.NopCloser(rbody))
	if n := len(events); err != nil || n < 2 || events[n-2].name != "error" || events[n-1].name != "response.failed" ||
		!strings.Contains(string(events[n-2].data), `"code":"gateway_going_away"`) {
		t.Fatalf("the Responses stream did not end with its own error events (%v): %v", err, events)
	}
	events, err = sseEventsOf(io.NopCloser(mbody))
	if n := len(events); err != nil || n < 1 || events[n-1].name != "error" || !strings.Contains(string(events[n-1].data), `{"type":"error","error":{"type":"overloaded_error"`) ||
		!strings.Contains(string(events[n-1].data), "the gateway is restarting") {
		t.Fatalf("the Messages stream did not end with its own error event (%v): %v", err, events)
	}
	if node != nil {
		// the SDK raises the going-away event as an error: the stream
		// ended cleanly, and yet no final response
		var end nodeLine
		for l := range node {
			if l.End != "" {
				end = l
			}
		}
		if end.End != "error" || end.Type != "error" || end.Code != "gateway_going_away" {
			t.Fatalf("the Node SDK ended with %+v", end)
		}
	}
	select {
	case <-exited:
	case <-time.After(10 * grace):
		t.Fatal("caddy did not exit")
	}
	t.Logf("a stream open at SIGTERM with grace_period %v ended with gateway_going_away %v after it; caddy exited %v after it",
		grace, took.Round(time.Millisecond), time.Since(told).Round(time.Millisecond))
}

// runCaddy runs the caddy binary the tests build on the Caddyfile file, as
// an operator does (its own data folders, its output kept and shown if the
// test fails), until it answers on addr; the process is killed at cleanup.
// exited closes when it has exited.
func runCaddy(t *testing.T, file, addr string) (*exec.Cmd, <-chan struct{}) {
	t.Helper()
	data := t.TempDir()
	cmd := exec.Command(caddyBinary(t), "run", "--config", file, "--adapter", "caddyfile")
	cmd.Env = append(os.Environ(), "XDG_DATA_HOME="+data, "XDG_CONFIG_HOME="+data)
	logFile := filepath.Join(t.TempDir(), "caddy.out")
	out, err := os.Create(logFile)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-exited
		if t.Failed() {
			b, _ := os.ReadFile(logFile)
			t.Logf("caddy's output:\n%s", b)
		}
	})
	eventually(t, "caddy answers on "+addr, func() bool {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
		}
		return err == nil
	})
	return cmd, exited
}
