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
package main

import (
	"bytes"
	"context"
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
	"sync"
	"syscall"
	"time"
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
}

func newUpstream(n int, delay time.Duration) *upstream {
	u := &upstream{completion: []byte(completion), delay: delay}
	u.bodies.New = func() any { return new(bytes.Buffer) }
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
	return mux
}

func (u *upstream) chat(w http.ResponseWriter, r *http.Request) {
	buf := u.bodies.Get().(*bytes.Buffer)
	buf.Reset()
	defer u.bodies.Put(buf)
	if _, err := buf.ReadFrom(io.LimitReader(r.Body, 1<<20)); err != nil {
		return
	}
	body := buf.Bytes()
	if !bytes.Contains(body, []byte(`"stream":true`)) && !bytes.Contains(body, []byte(`"stream": true`)) {
		h := w.Header()
		h["Content-Type"] = []string{"application/json"}
		h["Content-Length"] = []string{strconv.Itoa(len(u.completion))}
		_, _ = w.Write(u.completion)
		return
	}
	u.stream(w, r)
}

func (u *upstream) stream(w http.ResponseWriter, r *http.Request) {
	delay := u.delay
	if v := r.Header.Get("X-Bench-Chunk-Delay"); v != "" {
		if d, err := time.ParseDuration(v); err == nil && d >= 0 && d <= time.Second {
			delay = d
		}
	}
	h := w.Header()
	h["Content-Type"] = []string{"text/event-stream"}
	h["Cache-Control"] = []string{"no-cache"}
	w.WriteHeader(http.StatusOK)
	flusher := w.(http.Flusher)
	var tick *time.Timer
	for i, c := range u.chunks {
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
