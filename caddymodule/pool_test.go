package caddymodule

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/spf13/pflag"
)

// answerAs answers every route as JSON naming the engine, so a test can
// tell which member served.
func answerAs(name string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch {
		case strings.HasSuffix(r.URL.Path, "/embeddings"):
			fmt.Fprintf(w, `{"object":"list","model":%q,"data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}]}`, name)
		case strings.HasSuffix(r.URL.Path, "/responses"):
			fmt.Fprintf(w, `{"id":"r1","object":"response","created_at":1,"model":%q,"status":"completed","output":[]}`, name)
		case strings.HasSuffix(r.URL.Path, "/chat/completions"):
			fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}]}`, name)
		default:
			fmt.Fprintf(w, `{"id":"t1","object":"text_completion","created":1,"model":%q,"choices":[{"index":0,"finish_reason":"stop","text":"ok"}]}`, name)
		}
	}
}

func poolGateway(t *testing.T, extra string, ups ...string) {
	t.Helper()
	var engines, members strings.Builder
	for i, u := range ups {
		fmt.Fprintf(&engines, "\t\tengine m%d {\n\t\t\tto %s\n\t\t\tmodels model-%d\n\t\t\tretries 0\n\t\t}\n", i, u, i)
		fmt.Fprintf(&members, "\t\t\tmember m%d/upstream-%d\n", i, i)
	}
	startGateway(t, engines.String()+"\t\tpool auto {\n"+members.String()+extra+"\n\t\t}")
}

func TestAutoRotatesOverMembersOnEveryRouteAndNeverLeaksTheSentinel(t *testing.T) {
	var recs []*recorder
	var urls []string
	for i := range 3 {
		r := newRecorder(t, answerAs(fmt.Sprint("m", i)))
		recs, urls = append(recs, r), append(urls, r.URL)
	}
	poolGateway(t, "", urls...)
	client := sdk("")
	ctx := context.Background()
	for range 4 {
		if _, err := client.Chat.Completions.New(ctx, chatParams("auto", "hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Completions.New(ctx, openai.CompletionNewParams{Model: "auto",
			Prompt: openai.CompletionNewParamsPromptUnion{OfString: openai.String("hi")}}); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "auto",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil {
			t.Fatal(err)
		}
	}
	// the Responses API through a raw request: the SDK's types are not the point
	for range 3 {
		if resp, body := post(t, "/v1/responses", `{"model":"auto","input":"hi"}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
	}
	for i, r := range recs {
		got := r.all()
		if len(got) != 5 {
			t.Errorf("member %d served %d of 15 requests, want 5 (round robin)", i, len(got))
		}
		for _, req := range got {
			if bytes.Contains(req.body, []byte(`"auto"`)) || !bytes.Contains(req.body, []byte(fmt.Sprintf(`"upstream-%d"`, i))) {
				t.Fatalf("member %d was sent %s", i, req.body)
			}
		}
	}
	page, err := client.Models.List(ctx)
	if err != nil {
		t.Fatal(err)
	}
	last := page.Data[len(page.Data)-1]
	if last.ID != "auto" || last.OwnedBy != "pool" {
		t.Fatalf("pool not listed: %+v", last)
	}
}

func TestSessionStaysOnItsMember(t *testing.T) {
	var urls []string
	for i := range 3 {
		urls = append(urls, newRecorder(t, answerAs(fmt.Sprint("m", i))).URL)
	}
	poolGateway(t, "\t\t\tsticky header X-Session-Id", urls...)
	served := map[string]bool{}
	for range 50 {
		var raw *http.Response
		_, err := sdk("", option.WithHeader("X-Session-Id", "session-42")).Chat.Completions.New(
			context.Background(), chatParams("auto", "hi"), option.WithResponseInto(&raw))
		if err != nil {
			t.Fatal(err)
		}
		served[raw.Header.Get("X-LLM-Engine")] = true
	}
	if len(served) != 1 {
		t.Fatalf("one session was served by %v", served)
	}
	// other sessions spread over the members
	spread := map[string]bool{}
	for i := range 30 {
		resp, _ := post(t, "/v1/chat/completions", `{"model":"auto"}`, "X-Session-Id", fmt.Sprint("s", i))
		spread[resp.Header.Get("X-LLM-Engine")] = true
	}
	if len(spread) != 3 {
		t.Fatalf("30 sessions landed on %v", spread)
	}
}

func TestMemberThatHangsUpIsReplayedElsewhereAndItsBreakerOpens(t *testing.T) {
	cnt := &counter{}
	hangup := rawUpstream(t, cnt, hangUp)
	good := newRecorder(t, answerAs("good"))
	poolGateway(t, "\t\t\tbreaker 2 1m", hangup, good.URL)
	for i := range 6 {
		resp, body := post(t, "/v1/chat/completions", `{"model":"auto"}`)
		if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "m1" {
			t.Fatalf("request %d: %d %v %s", i, resp.StatusCode, resp.Header, body)
		}
	}
	if cnt.n() != 2 {
		t.Fatalf("the hanging-up member saw %d requests, want 2 (then its breaker opened)", cnt.n())
	}
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools"))
	if resp.StatusCode != 200 || !strings.Contains(body, `"breaker": "open"`) {
		t.Fatalf("admin pools: %d %s", resp.StatusCode, body)
	}
}

func TestPoolFailoverBudgetAndTheAttemptList(t *testing.T) {
	c503 := &counter{}
	busy := scripted(t, c503, func(_ int, w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		io.WriteString(w, `{"error":{"message":"member busy","type":"server_error"}}`)
	})
	cClosed := &counter{}
	closed := rawUpstream(t, cClosed, hangUp)
	cSilent := &counter{}
	silent := rawUpstream(t, cSilent, func(c net.Conn) { io.Copy(io.Discard, c) })
	bad := newRecorder(t, okChat)
	// a name that is no valid DNS name fails its lookup without a query:
	// tests send nothing beyond loopback
	badHost := strings.Replace(bad.URL, "127.0.0.1", "nodns-", 1)
	startGateway(t, fmt.Sprintf(`
		engine busy {
			to %s
			models b
		}
		engine closed {
			to %s
			models c
		}
		engine silent {
			to %s
			models s
			header_timeout 200ms
		}
		engine nodns {
			to %s
			models d
		}
		pool everything {
			member busy
			member closed
			member silent
			member nodns
			sticky header X-Session-Id
		}
		pool budget {
			member busy
			member closed
			member silent
			member nodns
			failover 2 1m
		}`, busy, closed, silent, badHost))
	resp, body := post(t, "/v1/chat/completions", `{"model":"everything"}`)
	if resp.StatusCode != 503 || !strings.Contains(body, "member busy (attempts:") {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	for _, want := range []string{"busy=503", "closed=closed", "silent=timeout", "nodns=dns"} {
		if !strings.Contains(body, want) {
			t.Fatalf("the error does not list %s: %s", want, body)
		}
	}
	before := c503.n() + cClosed.n() + cSilent.n()
	resp, body = post(t, "/v1/chat/completions", `{"model":"budget"}`)
	if got := c503.n() + cClosed.n() + cSilent.n() - before; got > 2 || resp.StatusCode < 500 {
		t.Fatalf("a budget of 2 attempts made %d: %d %s", got, resp.StatusCode, body)
	}
	if n := strings.Count(resp.Header.Get("X-LLM-Attempts"), "="); n != 2 {
		t.Fatalf("attempts %q", resp.Header.Get("X-LLM-Attempts"))
	}
}

func TestProbeTableAndExitCode(t *testing.T) {
	good := newRecorder(t, answerAs("good"))
	bad := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	site := fmt.Sprintf(`
		engine good {
			to %s
			models g
		}
		engine bad {
			to %s
			models b
		}
		pool auto {
			member good
			member bad/b-model
		}`, good.URL, bad.URL)
	startGateway(t, site)
	resp, body := do(t, mustReq(http.MethodGet, adminURL+"/llm_gateway/pools/auto/probe"))
	if resp.StatusCode != 503 || !strings.Contains(body, `"member": "bad/b-model"`) || !strings.Contains(body, `"pass": true`) {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}

	// the subcommand, on a config file, and on the running Caddy
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	if err := os.WriteFile(cfgFile, []byte(":"+freePort(t)+" {\n\tllm_gateway {"+site+"\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"--config", cfgFile, "--adapter", "caddyfile"}, {"--address", adminAddr}} {
		out, code := runProbe(t, args...)
		if code != 1 || !strings.Contains(out, "bad/b-model") || !strings.Contains(out, "FAIL") || !strings.Contains(out, "pass") {
			t.Fatalf("llm-probe %v: exit %d\n%s", args, code, out)
		}
	}
	out, code := runProbe(t, "--address", adminAddr, "--pool", "nope")
	if code == 0 {
		t.Fatalf("an unknown pool passed: %s", out)
	}
}

// A deploy gates on the exit status of the real binary: Caddy's command
// runner, not the command's function, decides it.
func TestProbeBinaryExitsNonZeroWhenAMemberFails(t *testing.T) {
	caddy := caddyBinary(t)
	good := newRecorder(t, answerAs("good"))
	bad := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { http.Error(w, "down", http.StatusServiceUnavailable) })
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	cfg := fmt.Sprintf(`:%s {
	llm_gateway {
		engine good {
			to %s
			models g
		}
		engine bad {
			to %s
			models b
		}
		pool healthy {
			member good
		}
		pool mixed {
			member good
			member bad
		}
	}
}
`, freePort(t), good.URL, bad.URL)
	if err := os.WriteFile(cfgFile, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := exitCode(t, exec.Command(caddy, "llm-probe", "--config", cfgFile, "--pool", "healthy"))
	if code != 0 || !strings.Contains(out, "pass") {
		t.Fatalf("a passing pool: exit %d\n%s", code, out)
	}
	out, code = exitCode(t, exec.Command(caddy, "llm-probe", "--config", cfgFile))
	if code == 0 || !strings.Contains(out, "FAIL") || !strings.Contains(out, "1 of 3 pool members failed") {
		t.Fatalf("a failing member: exit %d\n%s", code, out)
	}
}

// runProbe runs the llm-probe command's function with args and returns what
// it printed and its exit code.
func runProbe(t *testing.T, args ...string) (string, int) {
	t.Helper()
	fs := pflag.NewFlagSet("llm-probe", pflag.ContinueOnError)
	fs.String("config", "", "")
	fs.String("adapter", "", "")
	fs.String("address", "localhost:2019", "")
	fs.String("pool", "", "")
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	r, w, _ := os.Pipe()
	stdout := os.Stdout
	os.Stdout = w
	done := make(chan string)
	go func() {
		b, _ := io.ReadAll(r)
		done <- string(b)
	}()
	code, err := cmdProbe(caddycmd.Flags{FlagSet: fs})
	os.Stdout = stdout
	w.Close()
	out := <-done
	if err != nil {
		out += "\nerror: " + err.Error()
	}
	return out, code
}

func TestPoolOfEnginesServingOneModelPrefersReadyThenStartingThenStarts(t *testing.T) {
	starts := startsFile(t)
	startGateway(t, `
		engine gpu0 {
			`+engineCmd("--model gpu0 --load-time 300ms")+`
			models qwen-gpu0
		}
		engine gpu1 {
			`+engineCmd("--model gpu1 --load-time 300ms")+`
			models qwen-gpu1
		}
		pool qwen {
			member gpu0
			member gpu1
		}`)
	// nothing runs: the first request starts one engine, and requests that
	// arrive while it loads wait for it instead of starting the other
	done := make(chan string, 4)
	for range 4 {
		go func() {
			resp, _ := post(t, "/v1/chat/completions", `{"model":"qwen"}`)
			done <- resp.Header.Get("X-LLM-Engine")
		}()
	}
	served := map[string]int{}
	for range 4 {
		served[<-done]++
	}
	if len(served) != 1 || countStarts(t, starts) != 1 {
		t.Fatalf("4 cold requests were served by %v with %d starts, want one engine, one start", served, countStarts(t, starts))
	}
	var running string
	for name := range served {
		running = name
	}
	// with one engine ready, every request goes to it
	for range 6 {
		resp, body := post(t, "/v1/chat/completions", `{"model":"qwen"}`)
		if resp.Header.Get("X-LLM-Engine") != running {
			t.Fatalf("served by %s while %s is ready: %s", resp.Header.Get("X-LLM-Engine"), running, body)
		}
	}
	if countStarts(t, starts) != 1 {
		t.Fatal("a second engine was started while one was ready")
	}
}

func TestProbeChecksEachEnginesPrefillClaim(t *testing.T) {
	answer := func(content string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"c","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":%q}}]}`, content)
		}
	}
	continues := newRecorder(t, answer(" 6 7 8 9 10"))
	restarts := newRecorder(t, answer("Sure! 1 2 3 4 5 6"))
	cfgFile := filepath.Join(t.TempDir(), "Caddyfile")
	site := fmt.Sprintf(`
		engine llama {
			to %s
			models l
			prefill on
		}
		engine ollama {
			to %s
			models o
			prefill on
		}`, continues.URL, restarts.URL)
	if err := os.WriteFile(cfgFile, []byte(":"+freePort(t)+" {\n\tllm_gateway {"+site+"\n\t}\n}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, code := runProbe(t, "--config", cfgFile, "--adapter", "caddyfile")
	if code != 1 || !strings.Contains(out, "(prefill)") || !strings.Contains(out, "answered the assistant's message anew") ||
		!strings.Contains(out, "continues the assistant's message") {
		t.Fatalf("exit %d\n%s", code, out)
	}
}

// A pool that mixes an embedding engine (api
// embeddings) with a chat engine sends chat requests to the chat engine
// only, and embeddings to both; a chat request naming the embedding model
// is refused at the door, saying what its engine speaks.
func TestPoolMixingAnEmbeddingEngineSendsItOnlyEmbeddings(t *testing.T) {
	chat := newRecorder(t, answerAs("chat"))
	embed := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/embeddings") {
			// what llama-server started with --embeddings answers
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusNotImplemented)
			io.WriteString(w, `{"error":{"code":501,"message":"This server does not support completions.","type":"not_supported_error"}}`)
			return
		}
		answerAs("embed")(w, r)
	})
	startGateway(t, fmt.Sprintf(`
		engine chat {
			to %s
			models qwen
		}
		engine embed {
			to %s
			models nomic
			api embeddings
		}
		pool auto {
			member chat
			member embed
		}`, chat.URL, embed.URL))
	client := sdk("")
	ctx := context.Background()
	for range 4 {
		if _, err := client.Chat.Completions.New(ctx, chatParams("auto", "hi")); err != nil {
			t.Fatal(err)
		}
		if _, err := client.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "auto",
			Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hi")}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, r := range embed.all() {
		if r.path != "/v1/embeddings" {
			t.Fatalf("the embedding engine was sent %s %s", r.path, r.body)
		}
	}
	if n := len(embed.all()); n == 0 || n > 4 {
		t.Fatalf("the embedding engine served %d of 4 embeddings, want some (round robin)", n)
	}
	_, err := client.Chat.Completions.New(ctx, chatParams("nomic", "hi"))
	if e := apiError(t, err, 404); !strings.Contains(e.Message, "speaks only embeddings") {
		t.Fatalf("a chat request for the embedding model: %s", e.Message)
	}
}
