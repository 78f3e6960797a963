package engines

import (
	"context"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A placeholder pasted from llama-swap, or Caddy's request {port}, would
// reach the engine as written and fail at the first request: it is refused
// at load, saying what to write instead.
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

// {engine.name} (llama-swap's ${MODEL_ID}) is the engine's name wherever
// {engine.port} may be written, also when it comes from the defaults that
// every engine shares, which are left as they are.
func TestEngineNamePlaceholderIsTheEnginesName(t *testing.T) {
	defaults := Config{
		Cmd:     []string{"llama-server", "-m", "/models/{engine.name}.gguf", "--alias", "{engine.name}", "--port", "{engine.port}"},
		To:      "http://127.0.0.1:{engine.port}",
		Env:     []string{"LOG_PREFIX={engine.name}"},
		Dir:     "/srv/{engine.name}",
		StopCmd: []string{"docker", "stop", "llm-{engine.name}"},
	}
	for _, name := range []string{"qwen", "gemma"} {
		c := Config{Name: name, Models: []string{name}}.Inherit(defaults).WithDefaults()
		want := Config{
			Cmd:     []string{"llama-server", "-m", "/models/" + name + ".gguf", "--alias", name, "--port", "{engine.port}"},
			To:      "http://127.0.0.1:{engine.port}",
			Env:     []string{"LOG_PREFIX=" + name},
			Dir:     "/srv/" + name,
			StopCmd: []string{"docker", "stop", "llm-" + name},
		}
		got := Config{Cmd: c.Cmd, To: c.To, Env: c.Env, Dir: c.Dir, StopCmd: c.StopCmd}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("engine %s: got %+v\nwant %+v", name, got, want)
		}
		if err := c.Validate(); err != nil {
			t.Errorf("engine %s: %v", name, err)
		}
	}
	if defaults.Cmd[2] != "/models/{engine.name}.gguf" || defaults.Env[0] != "LOG_PREFIX={engine.name}" {
		t.Fatalf("the shared defaults were changed: %+v", defaults)
	}
}

// The process itself gets its name: the demo engine serves the model its
// --model flag names.
func TestEngineNamePlaceholderReachesTheProcess(t *testing.T) {
	e := testEngine(t, "named-engine", nil, "--model", NamePlaceholder)
	l, err := e.Acquire(context.Background(), true)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	resp, err := (&http.Client{Transport: direct}).Get(l.Base().JoinPath("/v1/models").String())
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if !strings.Contains(string(body), `"named-engine"`) {
		t.Fatalf("the engine was not started with its name: /v1/models answered %s", body)
	}
}

// `ready none` (llama-swap's checkEndpoint: none) makes a started engine
// ready once its process runs, for a server without a health path: here one
// whose /health says "loading" for ten minutes. The fake clock never moves,
// so no probe and no start_timeout could end the wait.
func TestReadyNoneIsReadyOnceTheProcessRuns(t *testing.T) {
	e := testEngine(t, "unprobed", func(c *Config) { c.Ready = ReadyNone }, "--load-time", "10m")
	e.SetClock(clock.NewFake())
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := e.Acquire(ctx, true)
	if err != nil {
		t.Fatalf("not ready with ready none: %v", err)
	}
	defer l.Release()
	if !e.Probe(ctx) {
		t.Fatal("a running engine with ready none does not pass its probe")
	}
	bad := Config{Name: "remote", To: "http://10.0.0.1:8000", Models: []string{"m"}, Ready: ReadyNone,
		HealthInterval: caddy.Duration(time.Second)}
	if err := bad.WithDefaults().Validate(); err == nil || !strings.Contains(err.Error(), "need a health_path") {
		t.Fatalf("health checks of a ready none engine without health_path: got %v", err)
	}
}

// A name listed twice in one engine's models is a slip, said as such
// (rather than "served by both engine demo and engine demo").
func TestAModelListedTwiceIsSaidSo(t *testing.T) {
	c := Config{Name: "demo", To: "http://127.0.0.1:9001", Models: []string{"demo", "gpt-4o-mini", "demo"}}
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "engine demo: model demo is listed twice in its models") {
		t.Fatalf("got %v", err)
	}
}

func TestAnEngineReadsItsOwnAPIsNativelyAndTheConversationsByTranslation(t *testing.T) {
	off := false
	for _, c := range []struct {
		apis      []string
		translate *bool
		asked     api.API
		in        api.API
		ok        bool
	}{
		{nil, nil, api.Responses, api.Responses, true}, // the default: every API natively
		{[]string{"chat"}, nil, api.Chat, api.Chat, true},
		{[]string{"chat"}, nil, api.Responses, api.Chat, true}, // Codex on a chat-only engine
		{[]string{"chat"}, nil, api.Messages, api.Chat, true},  // Claude Code on a chat-only engine
		{[]string{"chat"}, nil, api.Completions, 0, false},     // no translation of text completions
		{[]string{"chat"}, nil, api.Embeddings, 0, false},      // nor of embeddings
		{[]string{"chat"}, &off, api.Messages, 0, false},       // translate off
		{[]string{"anthropic"}, nil, api.Chat, api.Messages, true},
		{[]string{"messages"}, nil, api.Responses, api.Messages, true},
		{[]string{"responses"}, nil, api.Messages, api.Responses, true},
		{[]string{"openai"}, nil, api.Messages, api.Chat, true}, // chat preferred over responses
		{[]string{"openai"}, nil, api.Other, api.Other, true},
		{[]string{"chat", "embeddings"}, nil, api.Other, 0, false},
		{[]string{"embeddings"}, nil, api.Chat, 0, false},
	} {
		cfg := Config{APIs: c.apis, Translate: c.translate}
		in, ok := cfg.Reads(c.asked)
		if in != c.in || ok != c.ok {
			t.Errorf("api %v, translate %v: a %s request read in %s, %v; want %s, %v", c.apis, c.translate, c.asked, in, ok, c.in, c.ok)
		}
	}
}
