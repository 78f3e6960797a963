// Command fakeupstream is the benchmark's OpenAI-compatible model server: it
// answers POST /v1/chat/completions from precomputed bytes, so it costs next
// to nothing and is never the bottleneck of what it measures.
//
//	fakeupstream -addr 127.0.0.1:9000 [-chunks 50] [-chunk-delay 0]
//
// A body with "stream":true gets an SSE stream of -chunks chat.completion.chunk
// events, each flushed on its own, then data: [DONE]. Anything else gets one
// small chat.completion JSON object. GET /health answers 200.
//
// The X-Bench-Chunk-Delay request header (a Go duration, e.g. 60ms) overrides
// -chunk-delay for one request: both proxies forward it, so a single upstream
// serves the CPU phases (no delay) and the open-streams phase (slow streams).
//
// The hostile-mix phase uses more request headers, which the gateway forwards
// like any other:
//
//   - X-Bench-Fail: <status> answers that status (401, 404, 503, …) with a
//     64 KiB JSON error body, after X-Bench-Fail-Delay (a Go duration);
//   - X-Bench-Chunk-Pad: <bytes> pads every content chunk of a stream with
//     that many bytes of text (at most 1 MiB in all per chunk);
//   - X-Bench-Tool-Args: <bytes> streams one tool call with that many bytes
//     of arguments (toolargs.go);
//   - X-Bench-Req: <id> counts the call under that id. GET /bench/calls
//     answers {"total":N,"calls":{"<id>":n,…},"tokens":{"<id>":n,…},
//     "tool_args_sent":N}: every chat call since the last GET
//     /bench/calls?reset=1, the calls of each id, the tokens its answers
//     cost (prompt and completion, reported or not), and the bytes of
//     X-Bench-Tool-Args arguments written.
//
// The door's part of the hostile phase counts tokens, so the
// upstream answers as an engine does: an answer is X-Bench-Answer-Tokens
// completion tokens long (default 24, or 48 for a stream: its content
// chunks), cut to the request's max_tokens or max_completion_tokens, and a
// stream reports its usage in a last chunk when the body asks for
// stream_options.include_usage. The stream's bytes stay the precomputed
// chunks: only the usage says how long the answer was.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/laxengine"
)

// completion is the non-streaming answer, about 400 bytes.
const completion = `{"id":"chatcmpl-bench-0001","object":"chat.completion","created":1700000000,` +
	`"model":"bench","system_fingerprint":"fp_bench","choices":[{"index":0,"message":{"role":"assistant",` +
	`"content":"Hello! This is the benchmark upstream answering with a fixed completion of a modest size, ` +
	`like a short chat reply."},"logprobs":null,"finish_reason":"stop"}],` +
	`"usage":{"prompt_tokens":9,"completion_tokens":24,"total_tokens":33}}`

type upstream struct {
	completion []byte
	chunks     [][]byte // one SSE event each, the last one data: [DONE]
	delay      time.Duration
	bodies     sync.Pool
	errorBody  []byte // what X-Bench-Fail answers

	total  atomic.Int64 // chat calls since the last reset
	mu     sync.Mutex
	calls  map[string]int64 // chat calls per X-Bench-Req id
	tokens map[string]int64 // tokens of the answers per X-Bench-Req id

	// toolArgsSent: bytes of X-Bench-Tool-Args streams' arguments written
	// since the last reset (toolargs.go)
	toolArgsSent atomic.Int64
}

// errorBodySize is the size of a failing answer's body: large, like the
// 64 KiB error pages that made the gateway's memory grow with every
// attempt before it kept only 4 KiB of each later one.
const errorBodySize = 64 << 10

// maxPad bounds X-Bench-Chunk-Pad.
const maxPad = 1 << 20

func newUpstream(n int, delay time.Duration) *upstream {
	u := &upstream{completion: []byte(completion), delay: delay, calls: map[string]int64{}, tokens: map[string]int64{}}
	u.bodies.New = func() any { return new(bytes.Buffer) }
	msg := `{"error":{"message":"bench upstream failing on purpose","type":"bench_failure","code":"bench","padding":"`
	u.errorBody = []byte(msg + strings.Repeat("x", errorBodySize-len(msg)-4) + `"}}` + "\n")
	for i := range n {
		finish := "null"
		delta := fmt.Sprintf(`{"content":"tok%02d "}`, i)
		if i == 0 {
			delta = `{"role":"assistant","content":""}`
		}
		if i == n-1 {
			delta, finish = `{}`, `"stop"`
		}
		ev := fmt.Sprintf(`data: {"id":"chatcmpl-bench-0001","object":"chat.completion.chunk","created":1700000000,`+
			`"model":"bench","choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n", delta, finish)
		u.chunks = append(u.chunks, []byte(ev))
	}
	u.chunks = append(u.chunks, []byte("data: [DONE]\n\n"))
	return u
}

func (u *upstream) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok"}`))
	})
	mux.HandleFunc("POST /v1/chat/completions", u.chat)
	mux.HandleFunc("GET /bench/calls", u.callCounts)
	return mux
}

// count notes one chat call, under its X-Bench-Req id if it has one (only
// the hostile mix sends ids: the other phases pay one atomic add).
func (u *upstream) count(r *http.Request) {
	u.total.Add(1)
	if id := r.Header.Get("X-Bench-Req"); id != "" {
		u.mu.Lock()
		u.calls[id]++
		u.mu.Unlock()
	}
}

func (u *upstream) callCounts(w http.ResponseWriter, r *http.Request) {
	reset := r.URL.Query().Get("reset") == "1"
	u.mu.Lock()
	total, toolArgsSent := u.total.Load(), u.toolArgsSent.Load()
	if reset {
		total, toolArgsSent = u.total.Swap(0), u.toolArgsSent.Swap(0)
	}
	b, err := json.Marshal(struct {
		Total        int64            `json:"total"`
		Calls        map[string]int64 `json:"calls"`
		Tokens       map[string]int64 `json:"tokens"`
		ToolArgsSent int64            `json:"tool_args_sent"`
	}{total, u.calls, u.tokens, toolArgsSent})
	if reset {
		u.calls, u.tokens = map[string]int64{}, map[string]int64{}
	}
	u.mu.Unlock()
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}

// fail answers the status X-Bench-Fail asks for, after X-Bench-Fail-Delay.
func (u *upstream) fail(w http.ResponseWriter, r *http.Request, status string) {
	code, err := strconv.Atoi(status)
	if err != nil || code < 400 || code > 599 {
		http.Error(w, "bad X-Bench-Fail", http.StatusTeapot)
		return
	}
	if d, ok := headerDuration(r, "X-Bench-Fail-Delay"); ok && d > 0 {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
		case <-r.Context().Done():
			return
		}
	}
	h := w.Header()
	h["Content-Type"] = []string{"application/json"}
	h["Content-Length"] = []string{strconv.Itoa(len(u.errorBody))}
	w.WriteHeader(code)
	_, _ = w.Write(u.errorBody)
}

// headerDuration reads a request header holding a Go duration of at most a
// second; ok is false for anything else.
func headerDuration(r *http.Request, name string) (d time.Duration, ok bool) {
	d, err := time.ParseDuration(r.Header.Get(name))
	if err != nil || d < 0 || d > time.Second {
		return 0, false
	}
	return d, true
}

func (u *upstream) chat(w http.ResponseWriter, r *http.Request) {
	u.count(r)
	buf := u.bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer u.bodies.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 1<<20)); err != nil {
		return
	}
	// the rest of a larger body (the door's uploads of 40 MiB), unread:
	// answering before it is read resets the gateway's connection (a 502)
	io.Copy(io.Discard, r.Body)
	body := buf.Bytes()
	if status := r.Header.Get("X-Bench-Fail"); status != "" {
		u.fail(w, r, status)
		return
	}
	stream := bytes.Contains(body, []byte(`"stream":true`)) || bytes.Contains(body, []byte(`"stream": true`))
	if n := toolArgs(r); n > 0 && stream {
		u.toolStream(w, n)
		return
	}
	a := readAsk(r, body, stream)
	u.countTokens(r, a.tokens())
	if !stream {
		answer := u.completion
		if a.custom {
			answer = []byte(strings.Replace(completion, `"usage":{"prompt_tokens":9,"completion_tokens":24,"total_tokens":33}`, string(a.usage()), 1))
		}
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(answer))}
		_, _ = w.Write(answer)
		return
	}
	var usage []byte
	if a.includeUsage {
		usage = fmt.Appendf(nil, `data: {"id":"chatcmpl-bench-0001","object":"chat.completion.chunk","created":1700000000,`+
			`"model":"bench","choices":[],"usage":%s}`+"\n\n", a.usage())
	}
	u.stream(w, r, usage)
}

// promptTokens is what every answer reports for the prompt, as the fixed
// completion does.
const promptTokens = 9

// ask is what a chat request asks of its answer's length and usage.
type ask struct {
	completion   int  // completion tokens of the answer
	includeUsage bool // a stream ends with a usage chunk
	custom       bool // the fixed completion's usage does not say it
}

func (a ask) tokens() int64 { return int64(promptTokens + a.completion) }

func (a ask) usage() []byte {
	return fmt.Appendf(nil, `{"prompt_tokens":%d,"completion_tokens":%d,"total_tokens":%d}`, promptTokens, a.completion, a.tokens())
}

// readAsk reads the answer's length (X-Bench-Answer-Tokens, cut to the
// body's token limits, for each of its n or best_of choices) and
// stream_options.include_usage. Numbers are read as pydantic engines read
// them (5e3, 5000.0 and "5000" are 5000): the door's round 2
// spends what a lax engine would. The body is decoded only when it names
// one of them: the other phases pay a search.
func readAsk(r *http.Request, body []byte, stream bool) ask {
	a := ask{completion: 24}
	if stream {
		a.completion = 48
	}
	if n, err := strconv.Atoi(r.Header.Get("X-Bench-Answer-Tokens")); err == nil && n > 0 {
		a.completion, a.custom = n, true
	}
	if !bytes.Contains(body, []byte("max_")) && !bytes.Contains(body, []byte("include_usage")) &&
		!bytes.Contains(body, []byte(`"n"`)) && !bytes.Contains(body, []byte("best_of")) {
		return a
	}
	var b map[string]any
	if json.Unmarshal(body, &b) != nil {
		return a
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if limit, ok := laxengine.Int(b[k]); ok && limit > 0 && limit < int64(a.completion) {
			a.completion, a.custom = int(limit), true
		}
	}
	choices := 1
	for _, k := range []string{"n", "best_of"} {
		if n, ok := laxengine.Int(b[k]); ok && n > int64(choices) {
			choices = int(n)
		}
	}
	if choices > 1 {
		a.completion, a.custom = a.completion*choices, true
	}
	so, _ := b["stream_options"].(map[string]any)
	a.includeUsage = so != nil && so["include_usage"] == true
	return a
}

// countTokens notes the tokens of an answer under the request's id.
func (u *upstream) countTokens(r *http.Request, n int64) {
	if id := r.Header.Get("X-Bench-Req"); id != "" {
		u.mu.Lock()
		u.tokens[id] += n
		u.mu.Unlock()
	}
}

// stream sends the stream's chunks, and usage, when not nil, just before
// data: [DONE].
func (u *upstream) stream(w http.ResponseWriter, r *http.Request, usage []byte) {
	delay := u.delay
	if d, ok := headerDuration(r, "X-Bench-Chunk-Delay"); ok {
		delay = d
	}
	chunks := u.chunks
	if pad, err := strconv.Atoi(r.Header.Get("X-Bench-Chunk-Pad")); err == nil && pad > 0 && pad <= maxPad {
		chunks = u.padded(pad)
	}
	if usage != nil {
		last := len(chunks) - 1
		chunks = append(append(chunks[:last:last], usage), chunks[last])
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	var tick *time.Timer
	for i, c := range chunks {
		if i > 0 && delay > 0 {
			if tick == nil {
				tick = time.NewTimer(delay)
			} else {
				tick.Reset(delay)
			}
			select {
			case <-tick.C:
			case <-r.Context().Done():
				tick.Stop()
				return
			}
		}
		if _, err := w.Write(c); err != nil {
			return
		}
		flusher.Flush()
	}
}

// padded is the stream with pad bytes of text added to every content chunk,
// built per request: only the hostile mix's slow reader asks for it.
func (u *upstream) padded(pad int) [][]byte {
	out := make([][]byte, len(u.chunks))
	text := []byte(`"content":"` + strings.Repeat("x", pad))
	for i, c := range u.chunks {
		out[i] = bytes.Replace(c, []byte(`"content":"`), text, 1)
	}
	return out
}

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "loopback address to listen on")
	chunks := flag.Int("chunks", 50, "chat.completion.chunk events per stream (plus data: [DONE])")
	delay := flag.Duration("chunk-delay", 0, "pause between streamed chunks (X-Bench-Chunk-Delay overrides it per request)")
	flag.Parse()
	if *chunks < 2 {
		log.Fatal("fakeupstream: -chunks must be at least 2")
	}
	host, _, err := net.SplitHostPort(*addr)
	if err != nil || host != "127.0.0.1" {
		log.Fatalf("fakeupstream: -addr must be on 127.0.0.1, got %q", *addr)
	}
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("fakeupstream: %v", err)
	}
	srv := &http.Server{Handler: newUpstream(*chunks, *delay).routes(), ReadHeaderTimeout: 10 * time.Second}
	fmt.Printf("fakeupstream: listening on %s (pid %d)\n", ln.Addr(), os.Getpid())

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		if !errors.Is(err, http.ErrServerClosed) {
			log.Fatalf("fakeupstream: %v", err)
		}
	case <-ctx.Done():
		shutdown, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		if srv.Shutdown(shutdown) != nil {
			_ = srv.Close()
		}
	}
}
