package caddymodule

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// llm-probe --config checks each cloud provider's engine before a deploy
// goes live: a one-token request on its own path, translated and keyed as
// its requests are, says whether its credentials work and its model exists.
func TestProbeChecksEachProvidersCredentialsAndModel(t *testing.T) {
	messages := func(status int, body string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path != "/v1/messages" || r.Header.Get("X-Api-Key") == "" || r.Header.Get("Anthropic-Version") == "" {
				http.Error(w, "not Anthropic's API: "+r.URL.Path, http.StatusBadRequest)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(status)
			io.WriteString(w, body)
		}
	}
	good := newRecorder(t, messages(200, `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":[{"type":"text","text":"pong"}],"stop_reason":"max_tokens","stop_sequence":null,"usage":{"input_tokens":3,"output_tokens":1}}`))
	badKey := newRecorder(t, messages(401, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`))
	noModel := newRecorder(t, messages(404, `{"type":"error","error":{"type":"not_found_error","message":"model: claude-nope"}}`))
	t.Setenv("PROBE_KEY", "probe-key-1234")
	site := fmt.Sprintf(`
		engine good {
			provider anthropic
			to %s
			api_key {env.PROBE_KEY}
			models claude-x
		}
		engine badkey {
			provider anthropic
			to %s
			api_key {env.PROBE_KEY}
			models claude-y
		}
		engine nomodel {
			provider anthropic
			to %s
			api_key {env.PROBE_KEY}
			models claude-nope
		}`, good.URL, badKey.URL, noModel.URL)
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgFile, []byte(":"+freePort(t)+" {\n\tllm_gateway {"+site+"\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runProbe(t, "--config", cfgFile, "--adapter", "caddyfile")
	if code != 1 || !strings.Contains(out, ProvidersTable) {
		t.Fatalf("exit %d\n%s", code, out)
	}
	rows := map[string]string{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == ProvidersTable {
			rows[f[1]] = line
		}
	}
	for engine, want := range map[string]string{"good": "pass", "badkey": "credentials refused", "nomodel": "no model claude-nope"} {
		if !strings.Contains(rows[engine], want) {
			t.Errorf("%s: %q, want %q in\n%s", engine, rows[engine], want, out)
		}
	}
	if strings.Contains(out, "probe-key-1234") {
		t.Errorf("the key is in the probe's output:\n%s", out)
	}
}
