package caddymodule

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go/v3/option"
)

// sseAnswer streams a short chat completion with the model it was asked for.
func sseAnswer(words ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if !strings.Contains(string(body), `"stream":true`) {
			okChat(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, `data: {"id":"f1","object":"chat.completion.chunk","created":1,"model":"fb","choices":[{"index":0,"delta":{"role":"assistant","content":""}}]}`+"\n\n")
		for _, word := range words {
			fmt.Fprintf(w, `data: {"id":"f1","object":"chat.completion.chunk","created":1,"model":"fb","choices":[{"index":0,"delta":{"content":%q}}]}`+"\n\n", word)
			w.(http.Flusher).Flush()
		}
		fmt.Fprint(w, `data: {"id":"f1","object":"chat.completion.chunk","created":1,"model":"fb","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\ndata: [DONE]\n\n")
	}
}

func TestSlowPrimaryFallsBackAfterWaitAndKeepsStarting(t *testing.T) {
	fb := newRecorder(t, okChat)
	t.Setenv("LLMGW_TEST_FB_KEY", "fallback-key-1")
	logFile := startGateway(t, fmt.Sprintf(`
		keys caller-key-1-000001
		engine gpu {
			`+engineCmd("--load-time 1500ms")+`
			models qwen
			model_name qwen-gpu-name
			fallback cpu
			fallback_after 300ms
			fallback_model qwen-7b-q4
		}
		engine cpu {
			to %s
			api_key {env.LLMGW_TEST_FB_KEY}
			models qwen-cpu
		}`, fb.URL))
	start := time.Now()
	resp, body := post(t, "/v1/chat/completions", `{"model":"qwen","messages":[{"role":"user","content":"hi"}]}`,
		"Authorization", "Bearer caller-key-1-000001")
	waited := time.Since(start)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Fallback") != "cpu" || resp.Header.Get("X-LLM-Engine") != "cpu" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	// the answer came from the fallback (headers above), so the switch came
	// before the engine was up; only the lower bound is the gateway's
	if waited < 300*time.Millisecond {
		t.Fatalf("switched after %s, before fallback_after 300ms", waited)
	}
	got := fb.all()[0]
	if !strings.Contains(string(got.body), `"model":"qwen-7b-q4"`) {
		t.Fatalf("the fallback was sent %s", got.body)
	}
	if a := got.header.Get("Authorization"); a != "Bearer fallback-key-1" {
		t.Fatalf("fallback saw Authorization %q, want its own key", a)
	}

	// the switch did not cancel the primary's start: the next request is its
	awaitState(t, "gpu", "ready")
	resp, body = post(t, "/v1/chat/completions", `{"model":"qwen"}`, "Authorization", "Bearer caller-key-1-000001")
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "gpu" || resp.Header.Get("X-LLM-Fallback") != "" ||
		!strings.Contains(body, "qwen-gpu-name") {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if n := len(fb.all()); n != 1 {
		t.Fatalf("the fallback saw %d requests, want 1", n)
	}
	if n := strings.Count(readFile(t, logFile), "engine slow to start: request goes to its fallback"); n != 1 {
		t.Fatalf("%d switch log lines, want exactly 1", n)
	}
}

func TestSlowPrimaryStreamGetsPreambleKeepAlivesAndOneSwitchComment(t *testing.T) {
	fb := newRecorder(t, sseAnswer("hello", " from", " the", " fallback"))
	startGateway(t, fmt.Sprintf(`
		keys caller-key-2-000002
		keepalive 100ms
		engine gpu {
			`+engineCmd("--load-time 5s")+`
			models qwen
			fallback cpu
			fallback_after 1200ms
		}
		engine cpu {
			to %s
			models qwen-cpu
		}`, fb.URL))
	req, _ := http.NewRequest(http.MethodPost, gwURL+"/v1/chat/completions",
		strings.NewReader(`{"model":"qwen","stream":true,"messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer caller-key-2-000002")
	req.Header.Set("X-Api-Key", "caller-key-2-000002")
	start := time.Now()
	resp, err := testClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if took := time.Since(start); took > time.Second || resp.StatusCode != 200 ||
		!strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		t.Fatalf("preamble after %s: %d %v", took, resp.StatusCode, resp.Header)
	}
	var keepAlives, switches int
	var text strings.Builder
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case line == ": keep-alive":
			keepAlives++
			if switches > 0 {
				t.Fatal("a keep-alive after the switch")
			}
		case strings.HasPrefix(line, ": fallback "):
			switches++
			if line != ": fallback cpu" {
				t.Fatalf("switch comment %q", line)
			}
		case strings.HasPrefix(line, "data: {"):
			if switches != 1 {
				t.Fatal("data before the switch comment")
			}
			if i := strings.Index(line, `"content":"`); i >= 0 {
				text.WriteString(strings.SplitN(line[i+len(`"content":"`):], `"`, 2)[0])
			}
		}
	}
	if keepAlives < 3 || switches != 1 || text.String() != "hello from the fallback" {
		t.Fatalf("%d keep-alives, %d switch comments, text %q", keepAlives, switches, text.String())
	}
	// the headers went out before the switch: the trailers say who answered
	if resp.Trailer.Get("X-LLM-Engine") != "cpu" || resp.Trailer.Get("X-LLM-Fallback") != "cpu" {
		t.Fatalf("trailers %v", resp.Trailer)
	}
	// the fallback has no key of its own: it must get none of the caller's
	h := fb.all()[0].header
	if h.Get("Authorization") != "" || h.Get("X-Api-Key") != "" {
		t.Fatalf("the caller's key reached the fallback: %v", h)
	}
}

func TestPrimaryThatComesUpInTimeKeepsTheRequest(t *testing.T) {
	fb := newRecorder(t, okChat)
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			`+engineCmd("--load-time 200ms")+`
			models qwen
			fallback cpu
			fallback_after 3s
		}
		engine cpu {
			to %s
			models qwen-cpu
		}`, fb.URL))
	resp, body := post(t, "/v1/chat/completions", `{"model":"qwen"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "gpu" || resp.Header.Get("X-LLM-Fallback") != "" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if len(fb.all()) != 0 {
		t.Fatal("the fallback was used although the primary came up in time")
	}
}

func TestFallbackThatIsDownLeavesTheRequestWaitingForThePrimary(t *testing.T) {
	dead := newRecorder(t, okChat)
	deadURL := dead.URL
	dead.Close()
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			`+engineCmd("--load-time 800ms")+`
			models qwen
			fallback cpu
			fallback_after 200ms
		}
		engine cpu {
			to %s
			models qwen-cpu
		}`, deadURL))
	start := time.Now()
	_, err := sdk("").Chat.Completions.New(context.Background(), chatParams("qwen", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 800*time.Millisecond {
		t.Fatalf("answered after %s, before the primary was up", took)
	}
}

func TestFallbackIsNeverStartedOrLeased(t *testing.T) {
	startGateway(t, `
		engine gpu {
			`+engineCmd("--load-time 1s")+`
			models qwen
			fallback cpu
			fallback_after 100ms
		}
		engine cpu {
			`+engineCmd("--model cpu --words-per-chunk 1 --chunk-delay 50ms")+`
			models qwen-cpu
		}`)
	// a stopped managed fallback is not started: the request waits for gpu
	resp, body := post(t, "/v1/chat/completions", `{"model":"qwen"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "gpu" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if s := status(t, "cpu"); s.State != "stopped" {
		t.Fatalf("the fallback was started: %s", s.State)
	}

	// once cpu runs (started by hand) a slow gpu falls back to it, without a lease
	do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/gpu/stop"))
	if resp, body := do(t, mustReq(http.MethodPost, adminURL+"/llm_gateway/engines/cpu/start")); resp.StatusCode != 200 {
		t.Fatalf("%d %s", resp.StatusCode, body)
	}
	stream := sdk("").Chat.Completions.NewStreaming(context.Background(), chatParams("qwen", "hi"),
		option.WithHeader("X-Test", "fallback"))
	if !stream.Next() {
		t.Fatal(stream.Err())
	}
	if s := status(t, "cpu"); s.Leases != 0 {
		t.Fatalf("the fallback holds %d leases while serving", s.Leases)
	}
	for stream.Next() {
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
}

func TestInvalidFallbacksAreRefusedNamingBothEngines(t *testing.T) {
	cases := map[string]string{
		"unknown":  "engine a {\n to http://127.0.0.1:1\n models a\n fallback nope\n}",
		"itself":   "engine a {\n to http://127.0.0.1:1\n models a\n fallback a\n}",
		"chained":  "engine a {\n to http://127.0.0.1:1\n models a\n fallback b\n}\nengine b {\n to http://127.0.0.1:2\n models b\n fallback c\n}\nengine c {\n to http://127.0.0.1:3\n models c\n}",
		"contextx": "engine a {\n to http://127.0.0.1:1\n models a\n context_fallback zz/m\n}",
	}
	// a fallback that names no engine, or the engine itself, is pointed at
	// its own line; a chain, which is about two engines, at the
	// engine's
	want := map[string][]string{
		"unknown":  {"engine a", "fallback nope", "Caddyfile:9"},
		"itself":   {"engine a", "fallback a", "Caddyfile:9"},
		"chained":  {"engine a", "fallback b", "fallback of its own", "Caddyfile:6"},
		"contextx": {"engine a", "context_fallback zz", "Caddyfile:9"},
	}
	for name, body := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := "{\n\tadmin localhost:" + freePort(t) + "\n}\n:" + freePort(t) + " {\nllm_gateway {\n" + body + "\n}\n}\n"
			_, _, err := adaptCaddyfile([]byte(cfg))
			if err == nil {
				t.Fatal("accepted")
			}
			for _, w := range want[name] {
				if !strings.Contains(err.Error(), w) {
					t.Fatalf("error %q lacks %q", err, w)
				}
			}
		})
	}
}

func TestFallbackThatFailsAfterASlowStartSendsTheRequestBackToThePrimary(t *testing.T) {
	fb := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			return // ready: it takes the slow start
		}
		http.Error(w, `{"error":{"message":"fallback overloaded"}}`, http.StatusServiceUnavailable)
	})
	startGateway(t, fmt.Sprintf(`
		engine gpu {
			`+engineCmd("--load-time 1s")+`
			models qwen
			fallback cpu
			fallback_after 200ms
		}
		engine cpu {
			to %s
			models qwen-cpu
			retries 0
		}`, fb.URL))
	start := time.Now()
	resp, body := post(t, "/v1/chat/completions", `{"model":"qwen"}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-LLM-Engine") != "gpu" {
		t.Fatalf("%d %v %s", resp.StatusCode, resp.Header, body)
	}
	if took := time.Since(start); took < time.Second {
		t.Fatalf("answered after %s, before the primary was up", took)
	}
	if n := len(fb.all()); n != 1 {
		t.Fatalf("the fallback saw %d requests, want 1", n)
	}
}
