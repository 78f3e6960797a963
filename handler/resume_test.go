package handler

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/api"
	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
)

func TestCutStreamIsCompletedByTheSameEngine(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fl := http.NewResponseController(w)
		if n == 1 {
			io.WriteString(w, `data: {"id":"first","object":"chat.completion.chunk","created":7,"model":"m","choices":[{"index":0,"delta":{"role":"assistant"},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, chunk("first", "Hello, "))
			io.WriteString(w, chunk("first", "wor"))
			fl.Flush()
			panic(http.ErrAbortHandler) // the engine dies mid-answer
		}
		io.WriteString(w, chunk("second", "ld!"))
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer eng.Close()
	_, url := testGateway(t, config.Config{Engines: []engines.Config{
		{Name: "local", To: eng.URL, Models: []string{"m"}, Resume: new(true), Prefill: new(true)},
	}}, nil)

	req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"greet"}]}`))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	seams, done := 0, false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, ": resumed on "):
			seams++
			if line != ": resumed on local" {
				t.Fatalf("seam %q", line)
			}
		case line == "data: [DONE]":
			done = true
		case strings.HasPrefix(line, "data: "):
			var c struct {
				ID      string
				Created int
				Choices []struct{ Delta struct{ Content string } }
			}
			if err := json.Unmarshal([]byte(line[6:]), &c); err != nil {
				t.Fatalf("%q: %v", line, err)
			}
			if c.ID != "first" || c.Created != 7 {
				t.Fatalf("a chunk of the continuation reads as another answer: %s", line)
			}
			if len(c.Choices) > 0 {
				text.WriteString(c.Choices[0].Delta.Content)
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if text.String() != "Hello, world!" || seams != 1 || !done {
		t.Fatalf("text %q, %d seams, [DONE] %v", text.String(), seams, done)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(bodies) != 2 || !strings.Contains(bodies[1], `{"role":"assistant","content":"Hello, wor"}]`) {
		t.Fatalf("the engine was sent %q", bodies)
	}
}

func TestAResumeIsAnAttemptAndReportsTheWholeAnswersUsage(t *testing.T) {
	var mu sync.Mutex
	var bodies []string
	eng := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		mu.Lock()
		bodies = append(bodies, string(body))
		n := len(bodies)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		if n == 1 {
			io.WriteString(w, chunk("first", strings.Repeat("word ", 8))) // 40 bytes: about 10 tokens
			http.NewResponseController(w).Flush()
			panic(http.ErrAbortHandler) // the engine dies mid-answer
		}
		io.WriteString(w, chunk("second", "end."))
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"second","object":"chat.completion.chunk","created":9,"model":"m","choices":[],"usage":{"prompt_tokens":30,"completion_tokens":5,"total_tokens":35}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	}))
	defer eng.Close()
	const body = `{"model":"m","stream":true,"max_tokens":100,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"go"}]}`
	for _, maxAttempts := range []int{1, 0} {
		mu.Lock()
		bodies = nil
		mu.Unlock()
		_, url := testGateway(t, config.Config{MaxAttempts: maxAttempts, Engines: []engines.Config{
			{Name: "local", To: eng.URL, Models: []string{"m"}, Resume: new(true), Prefill: new(true)},
		}}, nil)
		drain()
		resp, out := postJSON(t, url, body)
		resp.Body.Close()
		res := <-served
		mu.Lock()
		calls := len(bodies)
		sent := append([]string(nil), bodies...)
		mu.Unlock()
		if maxAttempts == 1 {
			if calls != 1 || !strings.Contains(out, "upstream_stream_cut") {
				t.Fatalf("max_attempts 1: %d upstream calls, answer %s", calls, out)
			}
			continue
		}
		if calls != 2 || !strings.Contains(sent[1], `"max_tokens":90`) {
			t.Fatalf("the continuation was sent %q", sent)
		}
		if !strings.Contains(out, `"usage":{"prompt_tokens":30,"completion_tokens":15,"total_tokens":45}`) {
			t.Fatalf("the answer's usage is not the whole answer's:\n%s", out)
		}
		if res.Attempts != 2 || res.Usage != (api.Usage{Input: 30, Output: 15}) {
			t.Fatalf("the access log says %d attempts and usage %+v", res.Attempts, res.Usage)
		}
		if len(res.Tries) != 2 || res.Tries[0].Resume || !res.Tries[1].Resume || res.Tries[1].Reason != "ok" {
			t.Fatalf("story %+v", res.Tries)
		}
	}
}
