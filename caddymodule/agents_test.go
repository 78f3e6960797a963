package caddymodule

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/providertest"
)

// Real coding agents through translation: Claude Code (Messages) and Codex
// CLI (Responses) against an engine that speaks only Chat Completions and
// asks the agent to run a shell command; the agent runs it and sends the
// result back, which must reach the engine as a Chat tool message. They
// are opt-in (LLMGW_AGENT_TESTS=1): they fetch the agents from the npm
// registry with npx and take a minute each.

// agentMarker is what the engine asks the agent's shell to echo: it can
// only come back in a request if the agent ran the command.
const agentMarker = "llmgw-agent-marker-7f3a"

func agentTests(t *testing.T) {
	t.Helper()
	if os.Getenv("LLMGW_AGENT_TESTS") != "1" {
		t.Skip("agent test: set LLMGW_AGENT_TESTS=1 to run it (needs npx and the npm registry)")
	}
	if _, err := exec.LookPath("npx"); err != nil {
		t.Fatalf("LLMGW_AGENT_TESTS=1 but no npx: %v", err)
	}
}

// shellCall is a call of whichever shell tool the agent offers, with the
// arguments that tool takes, or "" when it offers none.
func shellCall(tools []string) (name, args string) {
	echo := "echo " + agentMarker
	switch {
	case slices.Contains(tools, "Bash"): // Claude Code
		return "Bash", fmt.Sprintf(`{"command":%q,"description":"Print a marker"}`, echo)
	case slices.Contains(tools, "shell_command"): // Codex
		return "shell_command", fmt.Sprintf(`{"command":%q}`, echo)
	case slices.Contains(tools, "exec_command"):
		return "exec_command", fmt.Sprintf(`{"cmd":%q}`, echo)
	case slices.Contains(tools, "shell"):
		return "shell", fmt.Sprintf(`{"command":["bash","-lc",%q]}`, echo)
	}
	return "", ""
}

// agentEngine speaks Chat Completions only: offered a shell tool, it calls
// it once; once a tool message is in the conversation it says it is done.
// Side requests (titles, quota checks) get a short text.
func agentEngine(t *testing.T) *scriptedEngine {
	t.Helper()
	return chatOnlyEngine(t, func(w http.ResponseWriter, r *http.Request, req providertest.ChatRequest) {
		var tools []string
		for _, tl := range req.Tools {
			tools = append(tools, tl.Function.Name)
		}
		text, finish := "OK.", "stop"
		name, args := shellCall(tools)
		if slices.ContainsFunc(req.Messages, func(m providertest.ChatMessage) bool { return m.Role == "tool" }) {
			text, name = "The command ran. Done.", ""
		}
		if name != "" {
			finish = "tool_calls"
			t.Logf("the engine calls %s %s (of the tools %v)", name, args, tools)
		}
		chunk := func(delta, finish string) { chatChunk(w, req.Model, delta, finish) }
		if !req.Stream {
			msg := map[string]any{"role": "assistant", "content": text}
			if name != "" {
				msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{"id": "call_agent1", "type": "function",
					"function": map[string]any{"name": name, "arguments": args}}}}
			}
			b, _ := json.Marshal(map[string]any{"id": "chatcmpl-agent", "object": "chat.completion", "created": 1700000000, "model": req.Model,
				"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
				"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}})
			w.Header().Set("Content-Type", "application/json")
			w.Write(b)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		chunk(`{"role":"assistant","content":""}`, "null")
		if name != "" {
			chunk(fmt.Sprintf(`{"tool_calls":[{"index":0,"id":"call_agent1","type":"function","function":{"name":%q,"arguments":""}}]}`, name), "null")
			half := len(args) / 2
			for _, frag := range []string{args[:half], args[half:]} {
				q, _ := json.Marshal(frag)
				chunk(`{"tool_calls":[{"index":0,"function":{"arguments":`+string(q)+`}}]}`, "null")
			}
		} else {
			q, _ := json.Marshal(text)
			chunk(`{"content":`+string(q)+`}`, "null")
		}
		chunk(`{}`, `"`+finish+`"`)
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, `data: {"id":"chatcmpl-agent","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[],"usage":{"prompt_tokens":100,"completion_tokens":10,"total_tokens":110}}`+"\n\n", req.Model)
		}
		io.WriteString(w, "data: [DONE]\n\n")
	})
}

// chatOnlyEngine speaks Chat Completions only, as OpenAI checks a request:
// it refuses any other path and what OpenAI would refuse, and hands a
// good request to respond.
func chatOnlyEngine(t *testing.T, respond func(w http.ResponseWriter, r *http.Request, req providertest.ChatRequest)) *scriptedEngine {
	t.Helper()
	e := &scriptedEngine{}
	e.recorder = newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/chat/completions" {
			providertest.OpenAIError(w, 404, "invalid_request_error", "Invalid URL ("+r.Method+" "+r.URL.Path+")")
			return
		}
		body, _ := io.ReadAll(r.Body)
		var req providertest.ChatRequest
		if msg := providertest.CheckChat(body, &req); msg != "" {
			e.refuse(msg)
			providertest.OpenAIError(w, 400, "invalid_request_error", msg)
			return
		}
		respond(w, r, req)
	})
	return e
}

// chatChunk writes one chunk of a Chat stream, delta and finish as JSON.
func chatChunk(w http.ResponseWriter, model, delta, finish string) {
	fmt.Fprintf(w, `data: {"id":"chatcmpl-agent","object":"chat.completion.chunk","created":1700000000,"model":%q,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", model, delta, finish)
}

// sawToolResult asserts that a request after the engine's call carried the
// command's output back as a Chat tool message.
func (e *scriptedEngine) sawToolResult(t *testing.T, agentOutput string) {
	t.Helper()
	for _, r := range e.all() {
		var req providertest.ChatRequest
		if json.Unmarshal(r.body, &req) != nil {
			continue
		}
		for _, m := range req.Messages {
			if m.Role == "tool" && strings.Contains(textOf(m.Content), agentMarker) {
				return
			}
		}
	}
	var paths []string
	for _, r := range e.all() {
		paths = append(paths, fmt.Sprintf("%s %.300s", r.path, r.body))
	}
	t.Fatalf("no request carried the command's output %q in a tool message; the engine got:\n%s\nthe agent said:\n%s",
		agentMarker, strings.Join(paths, "\n"), agentOutput)
}

// runAgent runs an agent command with env and a deadline, and returns what
// it printed.
func runAgent(t *testing.T, dir string, env []string, name string, args ...string) string {
	t.Helper()
	out, err := runAgentErr(t, dir, env, name, args...)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return out
}

// runAgentErr runs an agent command as runAgent does, and returns how it
// ended: an agent that fails, as it should, is not the test's failure. A
// run that outlives its deadline is.
func runAgentErr(t *testing.T, dir string, env []string, name string, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	t.Logf("%s %s:\n%s", name, strings.Join(args, " "), out)
	if ctx.Err() != nil {
		t.Fatalf("%s still ran after 5 minutes: %v", name, err)
	}
	return string(out), err
}

// agentGateway serves model agent-model from the agent engine, for one
// gateway key.
func agentGateway(t *testing.T) *scriptedEngine {
	t.Helper()
	e := agentEngine(t)
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine agent {
			to %s
			api chat
			api_key agent-engine-key
			models agent-model
		}`, callerKey, e.URL))
	return e
}

// Claude Code runs with docs/clients.md's settings.json, as printed but for
// the gateway's address, key and model: nothing in its environment.
func TestTranslatedClaudeCodeRunsAToolOnAChatEngine(t *testing.T) {
	agentTests(t)
	e := agentGateway(t)
	dir := t.TempDir()
	home := t.TempDir()
	settings := clientsSnippet(t, "json", "ANTHROPIC_BASE_URL")
	if err := os.MkdirAll(filepath.Join(home, ".claude"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, ".claude", "settings.json"), []byte(settings), 0o600); err != nil {
		t.Fatal(err)
	}
	out := runAgent(t, dir, []string{"HOME=" + home, "npm_config_cache=" + npmCache(t)},
		"npx", "-y", "@anthropic-ai/claude-code", "-p", "Print a marker with the shell, then stop.",
		"--allowedTools", "Bash", "--max-turns", "4")
	e.sawToolResult(t, out)
	if !strings.Contains(out, "The command ran. Done.") {
		t.Fatalf("Claude Code did not print the engine's final answer")
	}
	e.sawOnly(t, "/v1/chat/completions", "Authorization", "agent-engine-key", callerKey)
	e.noneRefused(t)
}

func TestTranslatedCodexRunsAToolOnAChatEngine(t *testing.T) {
	agentTests(t)
	e := agentGateway(t)
	out, err := codexExec(t, codexHome(t, ""), "Print a marker with the shell, then stop.")
	if err != nil {
		t.Fatalf("codex exec: %v", err)
	}
	e.sawToolResult(t, out)
	if !strings.Contains(out, "The command ran. Done.") {
		t.Fatalf("Codex did not print the engine's final answer")
	}
	e.sawOnly(t, "/v1/chat/completions", "Authorization", "agent-engine-key", callerKey)
	e.noneRefused(t)
}

// codexHome is a CODEX_HOME whose config.toml is docs/clients.md's, as
// printed but for the gateway's address, key and model, and what a test
// needs: no questions, commands run as they are, and extra (lines of the
// gateway's [model_providers] table, which the snippet ends with).
func codexHome(t *testing.T, extra string) string {
	t.Helper()
	home := t.TempDir()
	config := "approval_policy = \"never\"\nsandbox_mode = \"danger-full-access\"\n" + clientsSnippet(t, "toml", "wire_api") + extra
	if err := os.WriteFile(filepath.Join(home, "config.toml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	return home
}

// noCodexRetries bounds Codex to one try of each request: it retries a
// failed request (request_max_retries) and a stream that broke
// (stream_max_retries: 5 reconnects by default, about 7 s with its
// back-off), which would hide a hedge's failure behind a retry and make a
// cut take longer than it must.
const noCodexRetries = "request_max_retries = 0\nstream_max_retries = 0\n"

// codexExec runs codex exec on prompt with the gateway of codexHome.
func codexExec(t *testing.T, home, prompt string) (string, error) {
	t.Helper()
	return runAgentErr(t, t.TempDir(), []string{
		"CODEX_HOME=" + home, "LLMGW_KEY=" + callerKey, "npm_config_cache=" + npmCache(t),
	}, "npx", "-y", "@openai/codex", "exec", "--skip-git-repo-check", prompt)
}

// streamChatText answers a streamed Chat request with text and a clean end.
func streamChatText(w http.ResponseWriter, req providertest.ChatRequest, text string) {
	w.Header().Set("Content-Type", "text/event-stream")
	chatChunk(w, req.Model, `{"role":"assistant","content":""}`, "null")
	for _, word := range words(text) {
		q, _ := json.Marshal(word)
		chatChunk(w, req.Model, `{"content":`+string(q)+`}`, "null")
	}
	chatChunk(w, req.Model, `{}`, `"stop"`)
	io.WriteString(w, "data: [DONE]\n\n")
}

// Codex against a Chat-only engine whose first token never comes while
// the test runs (the engine sends its headers and a role-only chunk, then
// holds): hedged at hedge_after to a fallback that answers at once, codex
// exec prints the fallback's answer and exits 0, and the history tells it
// was the hedge that answered and the held attempt that lost.
func TestCodexIsAnsweredByTheHedgeOfAChatEngineWhoseFirstTokenIsSlow(t *testing.T) {
	agentTests(t)
	since := fmt.Sprint("&since=", time.Now().UnixMilli())
	held := make(chan struct{})
	slow := chatOnlyEngine(t, func(w http.ResponseWriter, r *http.Request, req providertest.ChatRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		chatChunk(w, req.Model, `{"role":"assistant","content":""}`, "null")
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-held:
		}
	})
	t.Cleanup(func() { close(held) }) // before the engine closes: its handlers return
	const answer = "The fallback answered this."
	fast := chatOnlyEngine(t, func(w http.ResponseWriter, r *http.Request, req providertest.ChatRequest) {
		streamChatText(w, req, answer)
	})
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine codex-slow {
			to %s
			api chat
			models agent-model
			fallback codex-fast
			hedge_after 200ms
			hedge_budget 100%%
		}
		engine codex-fast {
			to %s
			api chat
			models codex-fast
		}`, callerKey, slow.URL, fast.URL))
	out, err := codexExec(t, codexHome(t, noCodexRetries), "Say something.")
	if err != nil || !strings.Contains(out, answer) {
		t.Fatalf("codex exec (%v) did not print the fallback's answer", err)
	}
	slow.noneRefused(t)
	fast.noneRefused(t)
	if len(fast.all()) == 0 {
		t.Fatal("the fallback was never asked")
	}
	syncHistory(t)
	reqs := historyPage(t, "?model=agent-model"+since).Requests
	if len(reqs) == 0 {
		t.Fatal("no request of agent-model in the history")
	}
	for _, r := range reqs {
		if len(r.Tries) != 2 || r.Tries[0].Engine != "codex-fast" || !r.Tries[0].Hedge || r.Tries[0].Reason != "ok" ||
			r.Tries[1].Engine != "codex-slow" || r.Tries[1].Reason != "lost" {
			t.Fatalf("a request that was not answered by the hedge: %+v", r)
		}
	}
}

// Codex against a Chat-only engine that cuts its stream after some text
// (the body ends with no finish and no [DONE]): codex exec prints an error
// and exits non-zero, after one request (its retries are off); a cut is
// never taken for a whole answer. The gateway sends error and
// response.failed (upstream_stream_cut) and then aborts the connection;
// Codex 0.171 reports the broken connection, not the event before it:
// "stream disconnected before completion". The history records the cut.
func TestCodexPrintsAnErrorWhenAChatEngineCutsItsStream(t *testing.T) {
	agentTests(t)
	since := fmt.Sprint("&since=", time.Now().UnixMilli())
	cutter := chatOnlyEngine(t, func(w http.ResponseWriter, r *http.Request, req providertest.ChatRequest) {
		w.Header().Set("Content-Type", "text/event-stream")
		chatChunk(w, req.Model, `{"role":"assistant","content":""}`, "null")
		chatChunk(w, req.Model, `{"content":"Half an ans"}`, "null")
	})
	startGateway(t, fmt.Sprintf(`
		keys %s
		engine codex-cutter {
			to %s
			api chat
			models agent-model
		}`, callerKey, cutter.URL))
	out, err := codexExec(t, codexHome(t, noCodexRetries), "Say something.")
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 {
		t.Fatalf("codex exec ended with %v on a cut stream, want exit status 1", err)
	}
	if !strings.Contains(out, "ERROR: stream disconnected before completion") {
		t.Fatal("codex exec did not print that the stream broke")
	}
	cutter.noneRefused(t)
	if n := len(cutter.all()); n != 1 {
		t.Fatalf("the engine was asked %d times, want once: Codex retried", n)
	}
	syncHistory(t)
	reqs := historyPage(t, "?model=agent-model"+since).Requests
	if len(reqs) != 1 || reqs[0].Cut != "closed" || reqs[0].RelayedBytes <= 0 {
		t.Fatalf("the history of the cut request: %+v", reqs)
	}
}

// clientsSnippet is the block of docs/clients.md in lang that holds want,
// with the page's gateway, key and model replaced by this test's.
func clientsSnippet(t *testing.T, lang, want string) string {
	t.Helper()
	page, err := os.ReadFile("../docs/clients.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, part := range strings.Split(string(page), "```"+lang+"\n")[1:] {
		block, _, _ := strings.Cut(part, "```")
		if strings.Contains(block, want) {
			return strings.NewReplacer("http://localhost:8080", gwURL, "change-me-to-a-long-secret", callerKey,
				`"coder"`, `"agent-model"`).Replace(block)
		}
	}
	t.Fatalf("docs/clients.md has no %s block with %q", lang, want)
	return ""
}

// npmCache is npm's cache of the user running the tests, so that an agent
// run with its own HOME does not fetch the agent again.
func npmCache(t *testing.T) string {
	t.Helper()
	if c := os.Getenv("npm_config_cache"); c != "" {
		return c
	}
	home, err := os.UserHomeDir()
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(home, ".npm")
}
