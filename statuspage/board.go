package statuspage

import (
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// maxModelLen cuts the model a client asked for: it is the client's text,
// shown to operators, and must not hold memory.
const maxModelLen = 128

// Request is one finished request as the page lists it. It names the
// caller's key by its configured name, never the key.
type Request struct {
	Seq        uint64  `json:"seq"`
	Time       int64   `json:"time"` // when it arrived, Unix milliseconds
	Path       string  `json:"path"`
	API        string  `json:"api,omitempty"`        // the client's: chat, messages, responses, …
	EngineAPI  string  `json:"engine_api,omitempty"` // the answering engine's: another when translated
	UserAgent  string  `json:"user_agent,omitempty"` // masked as engine output is, cut
	Model      string  `json:"model"`                // as the client asked
	Engine     string  `json:"engine,omitempty"`     // that answered
	Fallback   string  `json:"fallback,omitempty"`   // that answered instead of the engine asked for
	Attempts   int     `json:"attempts"`             // upstream attempts: more than one is a retry or replay
	Status     int     `json:"status"`
	TTFBMs     float64 `json:"ttfb_ms"`
	DurationMs float64 `json:"duration_ms"`
	TokensIn   int64   `json:"tokens_in"`  // -1: the answer reported no usage
	TokensOut  int64   `json:"tokens_out"` // -1: the answer reported no usage
	KeyName    string  `json:"key,omitempty"`
	Reason     string  `json:"reason,omitempty"` // why it failed: the last attempt's verdict, or the key rule that refused it
}

// Board is what the pages show beyond the engines' own state: the recent
// requests and each engine's last start. It is process-wide: engines and
// the admin endpoint outlive configs.
type Board struct {
	requests *ring[Request]
	clock    clock.Clock

	mu     sync.Mutex
	starts map[string]Start
	nudge  chan struct{} // closed and replaced when an engine starts or stops
}

// Start is an engine's last successful start.
type Start struct {
	At       time.Time
	Duration time.Duration
}

// NewBoard keeps the last recent requests.
func NewBoard(recent int) *Board {
	if recent <= 0 {
		recent = DefaultRecent
	}
	return &Board{requests: newRing[Request](recent), clock: clock.Real, starts: map[string]Start{}, nudge: make(chan struct{})}
}

// SetClock sets the clock that stamps what the board records (a clock.Fake
// in tests). Call it before the board is used.
func (b *Board) SetClock(c clock.Clock) { b.clock = c }

// Clock is the board's clock: the caddy module stamps a request's arrival
// with it.
func (b *Board) Clock() clock.Clock { return b.clock }

// SetRecent changes how many requests are kept (the newest config's `recent`).
func (b *Board) SetRecent(n int) {
	if n <= 0 {
		n = DefaultRecent
	}
	b.requests.resize(n)
}

// Record adds a finished request. It runs on the request's goroutine: it
// takes one short lock and never waits for a page.
func (b *Board) Record(r Request) {
	if len(r.Model) > maxModelLen {
		r.Model = r.Model[:maxModelLen] + "…"
	}
	b.requests.add(r)
}

// Requests returns the requests recorded after seq (oldest first), how many
// of them are no longer kept, the newest's number, and a channel closed at
// the next record.
func (b *Board) Requests(seq uint64) (reqs []Request, missed, last uint64, wake <-chan struct{}) {
	reqs, missed, last, wake = b.requests.since(seq)
	for i := range reqs {
		reqs[i].Seq = seq + missed + uint64(i) + 1
	}
	return reqs, missed, last, wake
}

// EngineStarted records a start, for the page's start duration.
func (b *Board) EngineStarted(name string, took time.Duration) {
	b.mu.Lock()
	b.starts[name] = Start{At: b.clock.Now(), Duration: took}
	b.mu.Unlock()
	b.Nudge()
}

// LastStart is the engine's last successful start, if any.
func (b *Board) LastStart(name string) (Start, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.starts[name]
	return s, ok
}

// Nudge tells connected pages that an engine or a key's counters changed,
// so they do not wait for their next look.
func (b *Board) Nudge() {
	b.mu.Lock()
	close(b.nudge)
	b.nudge = make(chan struct{})
	b.mu.Unlock()
}

func (b *Board) nudged() <-chan struct{} {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.nudge
}
