package caddymodule

import (
	"bufio"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// The official Node SDK (the npm package openai, the one Codex's users and
// most JavaScript agents have) as a client: a script that streams a
// Responses answer through its helper (client.responses.stream) and says,
// a JSON line each, every event it read, every text delta, and how the
// stream ended: the final response, or the error the SDK raised. .ci/run
// installs the package into a folder and names it in LLMGW_NODE_OPENAI;
// without it the tests skip with a message.

const nodeResponsesScript = `import OpenAI from 'openai';
const [baseURL, model] = process.argv.slice(2);
const client = new OpenAI({ baseURL, apiKey: 'unused', maxRetries: 0 });
const say = (o) => console.log(JSON.stringify(o));
const stream = client.responses.stream({ model, input: 'hi' });
stream.on('event', (e) => say({ event: e.type, code: e.code ?? '' }));
stream.on('response.output_text.delta', (e) => say({ delta: e.delta }));
try {
	const r = await stream.finalResponse();
	say({ end: 'final', status: r.status, text: r.output_text });
} catch (e) {
	say({ end: 'error', type: e?.type ?? '', code: e?.code ?? '', message: String(e?.message ?? e) });
}
`

// nodeLine is one line the script says.
type nodeLine struct {
	Event   string `json:"event"`
	Delta   string `json:"delta"`
	End     string `json:"end"` // final or error
	Code    string `json:"code"`
	Type    string `json:"type"`
	Status  string `json:"status"` // the final response's
	Text    string `json:"text"`   // the final response's output_text
	Message string `json:"message"`
}

// nodeSDK is the folder holding the npm package openai, or "" when
// LLMGW_NODE_OPENAI does not name one.
func nodeSDK(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("LLMGW_NODE_OPENAI")
	if dir == "" {
		return ""
	}
	if _, err := os.Stat(filepath.Join(dir, "node_modules", "openai", "package.json")); err != nil {
		t.Fatalf("LLMGW_NODE_OPENAI=%s: %v", dir, err)
	}
	if _, err := exec.LookPath("node"); err != nil {
		t.Fatalf("LLMGW_NODE_OPENAI is set but there is no node: %v", err)
	}
	return dir
}

// skipWithoutNodeSDK skips a test whose client is the Node SDK where it
// is not installed.
func skipWithoutNodeSDK(t *testing.T) {
	t.Helper()
	if nodeSDK(t) == "" {
		t.Skip("no Node SDK: set LLMGW_NODE_OPENAI to a folder where `npm install openai` ran (.ci/run does)")
	}
}

// nodeResponses starts the script (the SDK in nodeSDK's folder) against
// the gateway at baseURL (…/v1) for model, and returns its lines as it
// says them; the channel closes when it exits.
func nodeResponses(t *testing.T, baseURL, model string) <-chan nodeLine {
	t.Helper()
	dir := nodeSDK(t)
	node, err := exec.LookPath("node")
	if dir == "" || err != nil {
		t.Fatalf("no Node SDK (LLMGW_NODE_OPENAI=%q): %v", dir, err)
	}
	// the script beside a link to the package, where node's ES module
	// resolution finds it
	work := t.TempDir()
	if err := os.Symlink(filepath.Join(dir, "node_modules"), filepath.Join(work, "node_modules")); err != nil {
		t.Fatal(err)
	}
	script := filepath.Join(work, "responses.mjs")
	if err := os.WriteFile(script, []byte(nodeResponsesScript), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(node, script, baseURL, model)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan nodeLine, 1024)
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			var l nodeLine
			if err := json.Unmarshal(sc.Bytes(), &l); err != nil {
				l = nodeLine{Message: "not a line of the script: " + sc.Text()}
			}
			lines <- l
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		<-done
		_ = cmd.Wait()
		if t.Failed() && stderr.Len() > 0 {
			t.Logf("node's stderr:\n%s", stderr.String())
		}
	})
	return lines
}
