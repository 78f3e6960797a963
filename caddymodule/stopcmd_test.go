package caddymodule

import (
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// stop_cmd through the Caddyfile: its placeholders are the running engine's
// ({engine.pid}), and Caddy's ({env.*}) are resolved at load.
func TestStopCmdStopsTheEngineWithItsPid(t *testing.T) {
	out := filepath.Join(t.TempDir(), "stopped")
	t.Setenv("LLMGW_TEST_STOP_FILE", out)
	startGateway(t, `
		engine boxed {
			`+engineCmd("--ignore-sigterm")+`
			models boxed
			stop_cmd sh -c "echo $1 > $2; kill -INT $1" sh {engine.pid} {env.LLMGW_TEST_STOP_FILE}
			stop_timeout 1m
		}`)
	mustAnswer(t, "boxed")
	pid := status(t, "boxed").PID
	began := time.Now()
	resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/boxed/stop"))
	if resp.StatusCode != 200 {
		t.Fatalf("stop: %d %s", resp.StatusCode, body)
	}
	// it ignores SIGTERM and stop_timeout is a minute: only the command
	// can have stopped it this soon
	if took := time.Since(began); took >= time.Minute || alive(pid) {
		t.Fatalf("after %s: alive %v", took, alive(pid))
	}
	if got := strings.TrimSpace(readFile(t, out)); got != strconv.Itoa(pid) {
		t.Fatalf("stop_cmd was given pid %q, want %d", got, pid)
	}
}
