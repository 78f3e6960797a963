//go:build unix

package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"sync/atomic"
	"time"
)

// A fake upstream's modes: healthy answers at once; every other mode is one
// failure class, as the first candidate shows it.
const (
	modeHealthy     = "healthy"
	mode503         = "503"
	mode429Retry    = "429-retry-after"
	mode429         = "429"
	modeReset       = "reset"
	modeSilent      = "silent"
	modeSlowFirst   = "slow-first-token"
	modeStallBefore = "stall-before-content"
	modeCut         = "cut-after-content"
	modeStallAfter  = "stall-after-content"
)

// fake is one in-process upstream on its own loopback port; its mode can be
// switched (healthy for the warm-up of hedge_after auto, then its class).
type fake struct {
	mode  atomic.Value // string
	hold  time.Duration
	ln    net.Listener
	srv   *http.Server
	calls atomic.Int64
}

func startFake(mode string, hold time.Duration) (*fake, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	f := &fake{hold: hold, ln: ln}
	f.mode.Store(mode)
	f.srv = &http.Server{Handler: f}
	go func() { _ = f.srv.Serve(ln) }()
	return f, nil
}

func (f *fake) url() string     { return "http://" + f.ln.Addr().String() }
func (f *fake) set(mode string) { f.mode.Store(mode) }
func (f *fake) close()          { _ = f.srv.Close() }

func (f *fake) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		// readiness probes, /health, /v1/models
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"status":"ok","object":"list","data":[]}`))
		return
	}
	f.calls.Add(1)
	var body struct {
		Model string `json:"model"`
	}
	_ = json.NewDecoder(r.Body).Decode(&body)
	ctx := r.Context()
	wait := func(d time.Duration) bool {
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-t.C:
			return true
		case <-ctx.Done():
			return false
		}
	}
	switch mode := f.mode.Load().(string); mode {
	case mode503, mode429, mode429Retry:
		status := map[string]int{mode503: 503, mode429: 429, mode429Retry: 429}[mode]
		if mode == mode429Retry {
			w.Header().Set("Retry-After", "1")
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		_, _ = fmt.Fprintf(w, `{"error":{"message":"fake %s","type":"fake"}}`, mode)
		return
	case modeReset:
		if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // an RST, as a crashed upstream's
			}
			_ = c.Close()
		}
		return
	case modeSilent:
		<-ctx.Done() // accepts, reads, never answers headers
		return
	default:
		s := stream{w: w, model: body.Model}
		s.start()
		switch mode {
		case modeSlowFirst:
			if !wait(f.hold) {
				return
			}
		case modeStallBefore:
			s.raw(": keep-alive\n\n")
			if !wait(f.hold) {
				return
			}
		}
		for i := range 3 {
			s.content(fmt.Sprintf("word%d ", i))
		}
		switch mode {
		case modeCut:
			panic(http.ErrAbortHandler) // the connection closes mid-stream
		case modeStallAfter:
			if !wait(f.hold) {
				return
			}
		}
		for i := 3; i < 6; i++ {
			s.content(fmt.Sprintf("word%d ", i))
		}
		s.finish()
	}
}

// stream writes an OpenAI chat completion stream, one flushed event at a time.
type stream struct {
	w     http.ResponseWriter
	model string
}

func (s stream) raw(v string) {
	_, _ = s.w.Write([]byte(v))
	_ = http.NewResponseController(s.w).Flush()
}

func (s stream) event(delta, finish string) {
	f := "null"
	if finish != "" {
		f = `"` + finish + `"`
	}
	s.raw(fmt.Sprintf(`data: {"id":"chatcmpl-fake","object":"chat.completion.chunk","created":1,"model":%q,"choices":[{"index":0,"delta":%s,"finish_reason":%s}]}`+"\n\n",
		s.model, delta, f))
}

// start sends the headers and a role-only chunk: no content yet.
func (s stream) start() {
	s.w.Header().Set("Content-Type", "text/event-stream")
	s.w.Header().Set("Cache-Control", "no-cache")
	s.w.WriteHeader(http.StatusOK)
	s.event(`{"role":"assistant","content":""}`, "")
}

func (s stream) content(text string) {
	b, _ := json.Marshal(text)
	s.event(`{"content":`+string(b)+`}`, "")
}

func (s stream) finish() {
	s.event(`{}`, "stop")
	s.raw("data: [DONE]\n\n")
}
