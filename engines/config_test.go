package engines

import (
	"strings"
	"testing"
)

// A placeholder pasted from llama-swap, or Caddy's request {port}, would
// reach the engine as written and fail at the first request: it is refused
// at load, saying what to write instead (issue 28).
func TestForeignPortPlaceholdersAreRefusedWithWhatToWrite(t *testing.T) {
	base := Config{Name: "qwen", Models: []string{"qwen"},
		Cmd: []string{"llama-server", "--port", "{engine.port}"}, To: "http://127.0.0.1:{engine.port}"}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"${PORT} in cmd", func(c *Config) { c.Cmd = []string{"llama-server", "--port", "${PORT}"} },
			"engine qwen: cmd: ${PORT} is llama-swap's placeholder and nothing fills it in here: write {engine.port}"},
		{"${PORT} in to", func(c *Config) { c.To = "http://127.0.0.1:${PORT}" },
			"engine qwen: to: ${PORT} is llama-swap's placeholder"},
		{"${PORT} in stop_cmd", func(c *Config) { c.StopCmd = []string{"docker", "stop", "qwen-${PORT}"} },
			"engine qwen: stop_cmd: ${PORT}"},
		{"another ${…}", func(c *Config) {
			c.Cmd = []string{"llama-server", "-m", "${MODELS}/qwen.gguf", "--port", "{engine.port}"}
		},
			"engine qwen: cmd: ${MODELS} is not filled in here: write {engine.port} for the engine's port"},
		{"an unclosed ${", func(c *Config) { c.Cmd = []string{"llama-server", "--port", "${PORT"} },
			"engine qwen: cmd: ${PORT is not filled in here"},
		{"{port} in cmd", func(c *Config) { c.Cmd = []string{"llama-server", "--port", "{port}"} },
			"engine qwen: cmd: {port} is the port of the request to Caddy, not the engine's: write {engine.port}"},
		{"{port} as the Caddyfile adapter writes it, in to", func(c *Config) { c.To = "http://127.0.0.1:{http.request.port}" },
			"engine qwen: to: {http.request.port} is the port of the request to Caddy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base
			tc.edit(&c)
			err := c.Validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v\nwant %s", err, tc.want)
			}
		})
	}
	if err := base.Validate(); err != nil {
		t.Fatalf("{engine.port} is refused: %v", err)
	}
	// a shell variable without braces is the script's own business
	shell := base
	shell.Cmd = []string{"sh", "-c", "exec llama-server --port $PORT", "--", "{engine.port}"}
	if err := shell.Validate(); err != nil {
		t.Fatalf("$PORT without braces is refused: %v", err)
	}
}
