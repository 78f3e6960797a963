package main

import (
	"container/list"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/prefix"
)

// engine is a fake inference engine with a prefix cache: it keeps
// an LRU of the block hashes of the prompts it processed, charges prompt
// time per block it does not hold and decode time per token, serves a
// bounded number of requests at once (its slots) and queues the rest, and
// publishes its load on /metrics in llama-server's and vLLM's names, and
// /slots.
type engine struct {
	name     string
	block    int
	perBlock time.Duration // prompt time of one uncached block
	perToken time.Duration // decode time of one token
	tokens   int           // tokens in an answer
	slots    chan struct{}

	processing, deferred atomic.Int64
	blocks, hits         atomic.Int64 // prompt blocks asked and found cached, this run

	mu    sync.Mutex
	lru   *list.List // of uint64, most recent first
	index map[uint64]*list.Element
	cap   int
	waits []time.Duration // each request's wait for a slot, this run

	srv *http.Server
	url string
}

func startEngine(name string, slots, cacheBlocks, block int, perBlock, perToken time.Duration, tokens int) (*engine, error) {
	e := &engine{name: name, block: block, perBlock: perBlock, perToken: perToken, tokens: tokens,
		slots: make(chan struct{}, slots), lru: list.New(), index: map[uint64]*list.Element{}, cap: cacheBlocks}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /health", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, `{"status":"ok"}`) })
	mux.HandleFunc("GET /metrics", e.metrics)
	mux.HandleFunc("GET /slots", e.slotsJSON)
	mux.HandleFunc("POST /v1/chat/completions", e.chat)
	e.srv = &http.Server{Handler: mux}
	e.url = "http://" + ln.Addr().String()
	go e.srv.Serve(ln)
	return e, nil
}

// reset empties the cache and the recorded waits between runs.
func (e *engine) reset() []time.Duration {
	e.blocks.Store(0)
	e.hits.Store(0)
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lru.Init()
	clear(e.index)
	w := e.waits
	e.waits = nil
	return w
}

// cached counts the leading blocks the cache holds, and makes every block
// of the prompt the most recent (it is in the KV cache once processed).
func (e *engine) cached(blocks []uint64) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	n := 0
	for _, b := range blocks {
		if _, ok := e.index[b]; !ok {
			break
		}
		n++
	}
	for _, b := range blocks {
		if el, ok := e.index[b]; ok {
			e.lru.MoveToFront(el)
			continue
		}
		e.index[b] = e.lru.PushFront(b)
		if e.lru.Len() > e.cap {
			old := e.lru.Back()
			e.lru.Remove(old)
			delete(e.index, old.Value.(uint64))
		}
	}
	return n
}

func (e *engine) chat(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Messages json.RawMessage `json:"messages"`
	}
	if err := json.NewDecoder(r.Body).Decode(&body); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	blocks := prefix.Blocks(nil, e.block, body.Messages)
	began := time.Now()
	e.deferred.Add(1)
	select {
	case e.slots <- struct{}{}:
	case <-r.Context().Done():
		e.deferred.Add(-1)
		return
	}
	e.deferred.Add(-1)
	e.processing.Add(1)
	defer func() { e.processing.Add(-1); <-e.slots }()
	e.mu.Lock()
	e.waits = append(e.waits, time.Since(began))
	e.mu.Unlock()

	hit := e.cached(blocks)
	e.blocks.Add(int64(len(blocks)))
	e.hits.Add(int64(hit))
	// prompt time by the bytes not cached, the tail shorter than a block too
	uncached := len(body.Messages) - hit*e.block
	time.Sleep(time.Duration(uncached) * e.perBlock / time.Duration(e.block))
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("X-Bench-Cached-Blocks", fmt.Sprint(hit))
	fl := w.(http.Flusher)
	for i := range e.tokens {
		if i > 0 {
			time.Sleep(e.perToken)
		}
		fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":\"tok \"}}]}\n\n", e.name)
		fl.Flush()
	}
	fmt.Fprintf(w, "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n", e.name)
	fl.Flush()
	// a real engine's KV cache holds the tokens it generated too: the next
	// turn, which sends the answer back, finds it (as the bench's client
	// sends it: the conversation's array, then the answer's message)
	if n := len(body.Messages); n > 2 {
		answer := fmt.Sprintf(`,{"role":"assistant","content":"%s"}`, strings.Repeat("tok ", e.tokens))
		e.cached(prefix.Blocks(nil, e.block, body.Messages[:n-1], []byte(answer)))
	}
}

func (e *engine) metrics(w http.ResponseWriter, r *http.Request) {
	p, d := e.processing.Load(), e.deferred.Load()
	e.mu.Lock()
	used := float64(e.lru.Len()) / float64(e.cap)
	e.mu.Unlock()
	fmt.Fprintf(w, "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing %d\n", p)
	fmt.Fprintf(w, "# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred %d\n", d)
	fmt.Fprintf(w, "# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{model_name=%q} %d\n", e.name, p)
	fmt.Fprintf(w, "# TYPE vllm:num_requests_waiting gauge\nvllm:num_requests_waiting{model_name=%q} %d\n", e.name, d)
	fmt.Fprintf(w, "# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{model_name=%q} %g\n", e.name, used)
}

func (e *engine) slotsJSON(w http.ResponseWriter, r *http.Request) {
	busy := int(e.processing.Load())
	var out []map[string]any
	for i := range cap(e.slots) {
		out = append(out, map[string]any{"id": i, "is_processing": i < busy})
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(out)
}

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}
