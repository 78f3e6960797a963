package caddymodule

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func TestEngineCommandsThatListenBeyondThisMachineAreWarnedOf(t *testing.T) {
	for _, tc := range []struct {
		cmd    string
		env    []string
		listen string
	}{
		{cmd: "llama-server --host 0.0.0.0 --port {engine.port}", listen: "--host 0.0.0.0"},
		{cmd: "llama-server --host=0.0.0.0 --port {engine.port}", listen: "--host 0.0.0.0"},
		{cmd: "vllm serve m --host :: --port {engine.port}", listen: "--host ::"},
		{cmd: "llama-server --host 192.168.1.20", listen: "--host 192.168.1.20"},
		{cmd: "docker run --rm -p {engine.port}:8000 vllm/vllm-openai", listen: "-p {engine.port}:8000"},
		{cmd: "podman run --publish 0.0.0.0:{engine.port}:8000 img", listen: "--publish 0.0.0.0:{engine.port}:8000"},
		{cmd: "ollama serve", env: []string{"OLLAMA_HOST=0.0.0.0:{engine.port}"}, listen: "OLLAMA_HOST=0.0.0.0:{engine.port}"},
		{cmd: "sh|-c|exec llama-server --host 0.0.0.0 --port $PORT", listen: "--host 0.0.0.0"},

		{cmd: "llama-server --host 127.0.0.1 --port {engine.port}"},
		{cmd: "llama-server --host localhost"},
		{cmd: "llama-server --host ::1"},
		{cmd: "llama-server --port {engine.port}"},
		{cmd: "llama-server --host {env.BIND}"},
		{cmd: "docker run -p 127.0.0.1:{engine.port}:8000 img"},
		{cmd: "docker run -p [::1]:{engine.port}:8000 img"},
		{cmd: "other-tool -p 8080:8000"},
		{cmd: "ollama serve", env: []string{"OLLAMA_HOST=127.0.0.1:{engine.port}"}},
	} {
		argv := strings.Fields(tc.cmd)
		if strings.Contains(tc.cmd, "|") {
			argv = strings.Split(tc.cmd, "|")
		}
		if got := openListen(argv, tc.env); got != tc.listen {
			t.Errorf("%s %v: %q, want %q", tc.cmd, tc.env, got, tc.listen)
		}
	}
}

func TestAnEnginesMissingProgramIsWarnedOfAtLoad(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "serve"), []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no sh in PATH")
	}
	core, logs := observer.New(zapcore.WarnLevel)
	warnAboutCommands(zap.New(core), []engines.Config{
		{Name: "here", Cmd: []string{sh, "-c", "true"}},
		{Name: "in-path", Cmd: []string{"sh", "-c", "true"}},
		{Name: "in-dir", Cmd: []string{"./serve"}, Dir: dir},
		{Name: "placeholder", Cmd: []string{"{env.LLAMA_SERVER}"}},
		{Name: "remote", To: "http://10.0.0.1:8000"},
		{Name: "missing", Cmd: []string{"llama-server-that-is-not-installed", "--port", "1"}},
		{Name: "missing-path", Cmd: []string{"/opt/nowhere/llama-server"}},
		{Name: "open", Cmd: []string{"sh", "-c", "exec llama-server --host 0.0.0.0"}},
	})
	var missing, open []string
	for _, e := range logs.All() {
		switch e.Message {
		case warnNoProgram:
			missing = append(missing, e.ContextMap()["engine"].(string))
		case warnOpenCmd:
			open = append(open, e.ContextMap()["engine"].(string))
		}
	}
	if strings.Join(missing, " ") != "missing missing-path" || strings.Join(open, " ") != "open" || logs.Len() != 3 {
		t.Fatalf("missing %v, open %v: %v", missing, open, logs.All())
	}
}

// `caddy validate` says both, naming the engine: the check runs where the
// config loads, not at the engine's first start.
func TestValidateWarnsOfAMissingProgramAndAnOpenHost(t *testing.T) {
	caddy := caddyBinary(t)
	file := filepath.Join(t.TempDir(), "Caddyfile")
	config := `:0 {
	bind 127.0.0.1
	llm_gateway {
		engine qwen {
			cmd /opt/nowhere/llama-server --host 0.0.0.0 --port {engine.port}
			to http://127.0.0.1:{engine.port}
			models qwen
		}
	}
}
`
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	out, code := exitCode(t, exec.Command(caddy, "validate", "--config", file))
	if code != 0 || !strings.Contains(out, warnNoProgram) || !strings.Contains(out, warnOpenCmd) ||
		!strings.Contains(out, "qwen") || !strings.Contains(out, "--host 0.0.0.0") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}
