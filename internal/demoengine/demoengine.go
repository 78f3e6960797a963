// Package demoengine is a tiny OpenAI-compatible model server, so that the
// gateway has something real to start and talk to on a machine without a GPU
// or a model: chat completions (JSON and SSE, a few words per chunk),
// completions, the Responses API and Anthropic's Messages API (JSON and
// their typed SSE events),
// embeddings (floats or base64, as the SDKs ask), /v1/models and a
// llama-server-like /health that answers 503 "Loading model" while it
// "loads". Every answer has the shape OpenAI's API gives it, so every SDK's
// defaults work against it (the Node SDK asks embeddings in base64
// and silently decoded floats as garbage).
//
// It runs as `caddy llm-demo-engine --port N` (the module registers the
// subcommand), which is what the quickstart's engine command does. Its extra
// flags (slow start, crash, ignore SIGTERM, …) let the tests play a
// misbehaving engine with a real process.
package demoengine

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"
)

// Options configure the demo engine; each has a flag of the same name.
type Options struct {
	Host          string
	Port          int
	Model         string
	Reply         string
	WordsPerChunk int
	ChunkDelay    time.Duration
	LoadTime      time.Duration
	APIKey        string

	// misbehaviours, for tests
	ExitDuringLoad    bool
	ExitAfterChunks   int
	IgnoreSIGTERM     bool
	StatusCode        int
	EchoRequest       bool
	ExitAfterRequests int
	// FirstTokenDelay holds a completion's first content (a stream's
	// first content chunk, a JSON answer) this long; SlowEvery, when not
	// 0, holds only every SlowEvery-th completion (failover timing)
	FirstTokenDelay time.Duration
	SlowEvery       int
	// PaceAnswers holds a JSON answer as long as its stream would take
	// (pace.go); tests that time other things turn it off
	PaceAnswers bool

	// warm swaps (warm.go)
	SleepTime       time.Duration
	WakeTime        time.Duration
	FailSleep       bool
	FailWake        bool
	Slots           int
	SlotSavePath    string
	PrefillPerToken time.Duration
}

// Run parses args as flags and serves until SIGTERM/SIGINT (or forever, with
// -ignore-sigterm, until SIGKILL).
func Run(args []string) error {
	var o Options
	fs := flag.NewFlagSet("llm-demo-engine", flag.ContinueOnError)
	fs.StringVar(&o.Host, "host", "127.0.0.1", "address to listen on")
	fs.IntVar(&o.Port, "port", 0, "port to listen on (required)")
	fs.StringVar(&o.Model, "model", "demo", "the model name this engine reports")
	fs.StringVar(&o.Reply, "reply", "", "fixed reply text (default: a greeting that quotes the last user message)")
	fs.IntVar(&o.WordsPerChunk, "words-per-chunk", 3, "words per streamed chunk")
	fs.DurationVar(&o.ChunkDelay, "chunk-delay", 20*time.Millisecond, "pause between streamed chunks")
	fs.DurationVar(&o.LoadTime, "load-time", 0, "how long /health answers 503 Loading model after start")
	fs.StringVar(&o.APIKey, "api-key", "", "require this bearer key")
	fs.BoolVar(&o.ExitDuringLoad, "exit-during-load", false, "print a line and exit 3 instead of finishing loading")
	fs.IntVar(&o.ExitAfterChunks, "exit-after-chunks", 0, "exit the process after streaming this many content chunks")
	fs.BoolVar(&o.IgnoreSIGTERM, "ignore-sigterm", false, "ignore SIGTERM (only SIGKILL stops it)")
	fs.IntVar(&o.StatusCode, "status", 0, "answer every completion with this error status")
	fs.BoolVar(&o.EchoRequest, "echo-request", false, "reply with the request's headers and body instead of text")
	fs.IntVar(&o.ExitAfterRequests, "exit-after-requests", 0, "exit after answering this many completions")
	fs.DurationVar(&o.FirstTokenDelay, "first-token-delay", 0, "hold each completion's first content this long")
	fs.IntVar(&o.SlowEvery, "slow-every", 0, "with -first-token-delay: hold only every n-th completion")
	fs.BoolVar(&o.PaceAnswers, "pace-answers", true, "a non-streamed answer takes as long as its stream would (chunk-delay per chunk)")
	fs.DurationVar(&o.SleepTime, "sleep-time", 0, "how long POST /sleep takes")
	fs.DurationVar(&o.WakeTime, "wake-time", 0, "how long POST /wake_up takes")
	fs.BoolVar(&o.FailSleep, "fail-sleep", false, "answer POST /sleep with 500")
	fs.BoolVar(&o.FailWake, "fail-wake", false, "answer POST /wake_up with 500")
	fs.IntVar(&o.Slots, "slots", 1, "how many slots (llama-server's --parallel)")
	fs.StringVar(&o.SlotSavePath, "slot-save-path", "", "directory for slot save and restore (llama-server's --slot-save-path)")
	fs.DurationVar(&o.PrefillPerToken, "prefill-per-token", 0, "time to process one prompt token not in the slot's cache")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if o.Port == 0 {
		return errors.New("-port is required")
	}
	return Serve(o)
}

// Serve runs the demo engine with o.
func Serve(o Options) error {
	if o.WordsPerChunk <= 0 {
		o.WordsPerChunk = 3
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(o.Host, strconv.Itoa(o.Port)))
	if err != nil {
		return err
	}
	fmt.Printf("demo engine: model %s listening on %s (pid %d)\n", o.Model, ln.Addr(), os.Getpid())
	s := &server{o: o, loadedAt: time.Now().Add(o.LoadTime)}
	srv := &http.Server{Handler: s.routes(), ReadHeaderTimeout: 10 * time.Second}

	sigs := make(chan os.Signal, 1)
	if o.IgnoreSIGTERM {
		signal.Ignore(syscall.SIGTERM)
		signal.Notify(sigs, os.Interrupt)
	} else {
		signal.Notify(sigs, syscall.SIGTERM, os.Interrupt)
	}
	if o.ExitDuringLoad {
		go func() {
			time.Sleep(o.LoadTime / 2)
			fmt.Println("demo engine: error: failed to load model (simulated)")
			os.Exit(3)
		}()
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case sig := <-sigs:
		fmt.Printf("demo engine: %v, shutting down\n", sig)
		// net/http counts a connection that never sent a request as busy
		// for 5 s; a model server that is being stopped should not wait
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			return srv.Close()
		}
		return nil
	}
}

type server struct {
	o          Options
	loadedAt   time.Time
	served     atomic.Int64
	seq        atomic.Int64
	processing atomic.Int64 // requests in flight, for /metrics (metrics.go)
	// completions counts the first-token waits, for SlowEvery
	completions atomic.Int64
	warm        warmState // sleep and slots (warm.go)
}

func (s *server) routes() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", s.health)
	mux.HandleFunc("GET /v1/health", s.health)
	mux.HandleFunc("GET /v1/models", s.models)
	mux.HandleFunc("POST /v1/chat/completions", s.chat)
	mux.HandleFunc("POST /v1/completions", s.chat)
	mux.HandleFunc("POST /v1/embeddings", s.embeddings)
	mux.HandleFunc("POST /v1/responses", s.responses)
	mux.HandleFunc("POST /v1/messages", s.messages)
	mux.HandleFunc("POST /v1/messages/count_tokens", s.countTokens)
	s.nativeRoutes(mux)
	s.warmRoutes(mux)
	return s.withMetrics(mux)
}

func (s *server) loading() bool { return time.Now().Before(s.loadedAt) }

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func apiError(w http.ResponseWriter, status int, typ, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]any{"code": status, "message": msg, "type": typ}})
}

func (s *server) health(w http.ResponseWriter, r *http.Request) {
	if s.loading() {
		apiError(w, http.StatusServiceUnavailable, "unavailable_error", "Loading model")
		return
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *server) models(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{
		map[string]any{"id": s.o.Model, "object": "model", "created": 0, "owned_by": "demo-engine"},
	}})
}

// gate answers what every completion endpoint answers before doing work:
// loading, auth, a forced status. It reports whether to go on.
func (s *server) gate(w http.ResponseWriter, r *http.Request) bool {
	status, typ, msg := s.refusal(r, false)
	if status != 0 {
		apiError(w, status, typ, msg)
	}
	return status == 0
}

// refusal is the error every completion endpoint answers before doing work
// (loading, auth, a forced status), or status 0. Anthropic's clients send
// their key as x-api-key, which only the Messages API accepts.
func (s *server) refusal(r *http.Request, anthropic bool) (status int, typ, msg string) {
	switch {
	case s.loading():
		return http.StatusServiceUnavailable, "unavailable_error", "Loading model"
	case s.o.APIKey != "" && r.Header.Get("Authorization") != "Bearer "+s.o.APIKey &&
		!(anthropic && r.Header.Get("X-Api-Key") == s.o.APIKey):
		return http.StatusUnauthorized, "authentication_error", "invalid api key"
	case s.o.StatusCode != 0:
		return s.o.StatusCode, "server_error", fmt.Sprintf("demo engine forced status %d", s.o.StatusCode)
	}
	return 0, "", ""
}

type chatRequest struct {
	Model         string `json:"model"`
	Stream        bool   `json:"stream"`
	Prompt        any    `json:"prompt"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	Messages []struct {
		Role    string `json:"role"`
		Content any    `json:"content"`
	} `json:"messages"`
	IDSlot *int `json:"id_slot"` // llama-server's: the slot to use (warm.go)
}

func (s *server) chat(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return
	}
	if !s.gate(w, r) {
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	if s.sleeping() {
		apiError(w, http.StatusServiceUnavailable, "unavailable_error", "the engine is sleeping")
		return
	}
	s.prefill(&req)
	defer func() {
		if n := s.served.Add(1); s.o.ExitAfterRequests > 0 && n >= int64(s.o.ExitAfterRequests) {
			go func() { time.Sleep(10 * time.Millisecond); os.Exit(0) }()
		}
	}()
	text := s.reply(r, body, &req)
	isChat := strings.HasSuffix(r.URL.Path, "/chat/completions")
	id := fmt.Sprintf("chatcmpl-demo-%d", s.seq.Add(1))
	created := time.Now().Unix()
	model := req.Model
	if model == "" {
		model = s.o.Model
	}
	words := strings.Fields(text)
	usage := map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": len(words), "total_tokens": len(body)/4 + len(words)}
	if !req.Stream {
		if !s.answerWait(r, words) {
			return
		}
		obj, choice := "chat.completion", map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": text}}
		if !isChat {
			obj, choice = "text_completion", map[string]any{"index": 0, "finish_reason": "stop", "text": text}
		}
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": obj, "created": created, "model": model,
			"choices": []any{choice}, "usage": usage})
		return
	}

	flusher := startEvents(w)
	send := func(v any) bool {
		b, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		obj, choice := "chat.completion.chunk", map[string]any{"index": 0, "delta": delta, "finish_reason": finish}
		if !isChat {
			obj, choice = "text_completion", map[string]any{"index": 0, "text": delta["content"], "finish_reason": finish}
		}
		return map[string]any{"id": id, "object": obj, "created": created, "model": model, "choices": []any{choice}}
	}
	if isChat && !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	sent := 0
	if !s.streamWords(r, words, func(piece string) bool {
		if !send(chunk(map[string]any{"content": piece}, nil)) {
			return false
		}
		sent++
		if s.o.ExitAfterChunks > 0 && sent >= s.o.ExitAfterChunks {
			fmt.Println("demo engine: exiting mid-stream (simulated crash)")
			os.Exit(4)
		}
		return true
	}) {
		return
	}
	send(chunk(map[string]any{}, "stop"))
	if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
		send(map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": model,
			"choices": []any{}, "usage": usage})
	}
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// reply is the text the demo engine answers a completion with.
func (s *server) reply(r *http.Request, body []byte, req *chatRequest) string {
	last := ""
	for _, m := range req.Messages {
		if m.Role == "user" {
			if str, ok := m.Content.(string); ok {
				last = str
			}
		}
	}
	if p, ok := req.Prompt.(string); ok {
		last = p
	}
	return s.replyTo(r, body, last)
}

// replyTo is the text the demo engine answers a user's text with.
func (s *server) replyTo(r *http.Request, body []byte, last string) string {
	if s.o.EchoRequest {
		h := map[string]string{}
		for k := range r.Header {
			h[k] = r.Header.Get(k)
		}
		b, _ := json.Marshal(map[string]any{"headers": h, "body": string(body)})
		return string(b)
	}
	if s.o.Reply != "" {
		return s.o.Reply
	}
	if len(last) > 200 {
		last = last[:200] + "…"
	}
	return fmt.Sprintf("Hello from the demo engine (model %s). You said: %q. This reply is streamed a few words at a time, as a real model server would.", s.o.Model, last)
}

func (s *server) embeddings(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil || !s.gate(w, r) {
		return
	}
	var req struct {
		Model          string `json:"model"`
		Input          any    `json:"input"`
		EncodingFormat string `json:"encoding_format"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		apiError(w, http.StatusBadRequest, "invalid_request_error", "bad JSON: "+err.Error())
		return
	}
	if req.EncodingFormat != "" && req.EncodingFormat != "float" && req.EncodingFormat != "base64" {
		apiError(w, http.StatusBadRequest, "invalid_request_error",
			fmt.Sprintf("encoding_format must be float or base64, not %q", req.EncodingFormat))
		return
	}
	var inputs []string
	switch v := req.Input.(type) {
	case string:
		inputs = []string{v}
	case []any:
		for _, x := range v {
			if str, ok := x.(string); ok {
				inputs = append(inputs, str)
			}
		}
	}
	data := make([]any, len(inputs))
	for i, in := range inputs {
		var vec any = Embed(in)
		if req.EncodingFormat == "base64" {
			vec = base64Floats(Embed(in))
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": vec}
	}
	writeJSON(w, http.StatusOK, map[string]any{"object": "list", "model": req.Model, "data": data,
		"usage": map[string]any{"prompt_tokens": len(body) / 4, "total_tokens": len(body) / 4}})
}

// Embed is the demo engine's embedding of a text: a deterministic
// 8-dimensional unit vector, in float32 as real servers compute it.
func Embed(s string) []float32 {
	v := make([]float64, 8)
	for i, c := range s {
		v[i%8] += float64(c%97) / 97
	}
	var n float64
	for _, x := range v {
		n += x * x
	}
	out := make([]float32, len(v))
	if n = math.Sqrt(n); n > 0 {
		for i := range v {
			out[i] = float32(v[i] / n)
		}
	}
	return out
}

// base64Floats is OpenAI's encoding_format "base64": the vector's float32
// values, little-endian, base64-encoded.
func base64Floats(v []float32) string {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return base64.StdEncoding.EncodeToString(b)
}

// streamWords hands emit the words a few at a time (WordsPerChunk, each
// piece but the last with its trailing space), ChunkDelay apart. It
// reports false when the client went away or emit failed.
func (s *server) streamWords(r *http.Request, words []string, emit func(piece string) bool) bool {
	if !s.firstTokenWait(r) {
		return false
	}
	for i := 0; i < len(words); i += s.o.WordsPerChunk {
		end := min(i+s.o.WordsPerChunk, len(words))
		piece := strings.Join(words[i:end], " ")
		if end < len(words) {
			piece += " "
		}
		select {
		case <-r.Context().Done():
			fmt.Println("demo engine: client went away mid-stream")
			return false
		case <-time.After(s.o.ChunkDelay):
		}
		if !emit(piece) {
			return false
		}
	}
	return true
}

// startEvents answers 200 with an event stream and returns its flusher (nil
// for a writer that cannot flush).
func startEvents(w http.ResponseWriter) http.Flusher {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	return flusher
}
