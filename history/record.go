// Package history keeps the recent requests' stories, bounded by count and
// age: in the embedded bbolt file of the key counters (its own bucket), so
// they survive restarts, or in memory. Records are added off the request
// path: Add hands a record to one writer goroutine through a bounded
// channel and never waits; when the channel is full the record is dropped
// and counted. It knows nothing of HTTP: the caddy module fills the records.
package history

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// Defaults and caps.
const (
	DefaultKeep   = 100_000
	DefaultMaxAge = 7 * 24 * time.Hour
	// MaxKeep caps keep: the history is for recent requests, not an
	// archive (ship the access log for that).
	MaxKeep = 10_000_000

	// DefaultLimit and MaxLimit bound one page of a query.
	DefaultLimit = 100
	MaxLimit     = 1000

	// queueSize is how many records may wait for the writer; beyond it Add
	// drops. A burst of this many finished requests within one write is
	// far beyond what one gateway serves.
	queueSize = 4096
	// maxBatch bounds one write transaction.
	maxBatch = 1024
	// writeEvery paces the writer: at most one transaction per interval
	// while less than a batch is queued (queueSize holds 16,000 requests/s
	// of it)
	writeEvery = 250 * time.Millisecond
	// maxText cuts the caller's own texts (model, user agent, session):
	// they must not make a record large.
	maxText = 128
)

// Config is the `history` subdirective of llm_gateway.
type Config struct {
	// Off keeps no history. Default: on.
	Off bool `json:"off,omitempty"`
	// Keep is how many requests are kept, newest first. Default 100000.
	Keep int `json:"keep,omitempty"`
	// MaxAge is how long a request is kept. Default 7d.
	MaxAge caddy.Duration `json:"max_age,omitempty"`
	// Memory keeps the history in memory only (it is lost on restart),
	// with the same limits. Default: in the embedded file of the key
	// counters, under Caddy's data directory.
	Memory bool `json:"memory,omitempty"`
}

// Validate checks the limits.
func (c Config) Validate() error {
	if c.Keep < 0 || c.Keep > MaxKeep {
		return fmt.Errorf("history keep %d: want 1 to %d", c.Keep, MaxKeep)
	}
	if c.MaxAge < 0 {
		return fmt.Errorf("history max_age %s: want a positive duration", time.Duration(c.MaxAge))
	}
	return nil
}

// Limits are Keep and MaxAge with their defaults.
func (c Config) Limits() (keep int, maxAge time.Duration) {
	keep, maxAge = c.Keep, time.Duration(c.MaxAge)
	if keep == 0 {
		keep = DefaultKeep
	}
	if maxAge == 0 {
		maxAge = DefaultMaxAge
	}
	return keep, maxAge
}

// Record is one finished request. It names the caller's key by its
// configured name, never the key; it holds no prompt or answer text.
type Record struct {
	Seq        uint64  `json:"seq"`  // the store's number: increasing, the paging cursor
	Time       int64   `json:"time"` // when it arrived, Unix milliseconds
	Path       string  `json:"path"`
	Key        string  `json:"key,omitempty"`        // the key's name
	Client     string  `json:"client,omitempty"`     // the client's address
	UserAgent  string  `json:"user_agent,omitempty"` // cut to 128 bytes
	Session    string  `json:"session,omitempty"`    // X-Session-Id, cut to 128 bytes
	Model      string  `json:"model"`                // as the client asked, cut to 128 bytes
	Engine     string  `json:"engine,omitempty"`     // that answered
	Fallback   string  `json:"fallback,omitempty"`   // that answered instead of the engine asked for
	API        string  `json:"api,omitempty"`        // the client's: chat, messages, responses, …
	EngineAPI  string  `json:"engine_api,omitempty"` // the answering engine's, when translated another
	Status     int     `json:"status"`
	Reason     string  `json:"reason,omitempty"` // a failed request's last verdict, or the key rule that refused it
	TTFBMs     float64 `json:"ttfb_ms"`
	DurationMs float64 `json:"duration_ms"`
	TokensIn   int64   `json:"tokens_in"`  // -1: the answer reported no usage
	TokensOut  int64   `json:"tokens_out"` // -1: the answer reported no usage
	// CacheRead and CacheWrite are the prompt tokens (of TokensIn) read
	// from and written to the engine's prompt cache, when it said so
	CacheRead  int64 `json:"tokens_cache_read,omitempty"`
	CacheWrite int64 `json:"tokens_cache_write,omitempty"`
	// Cost is what the request cost, in US dollars at its model's price
	// (a JSON number of dollars, exact): its answer, cached tokens at their
	// price, and a hedge's losers
	Cost   price.Amount `json:"cost_usd,omitempty"`
	Stream bool         `json:"stream,omitempty"` // the answer was an event stream
	// Cut says why an answer that had begun did not end whole: "closed"
	// (the engine's connection broke), the time budget that ran out
	// (stream_idle_timeout, request_timeout), "client" (the client went
	// away), "going_away" (the server was exiting); RelayedBytes is how
	// much of it the client had been sent then
	Cut          string `json:"cut,omitempty"`
	RelayedBytes int64  `json:"relayed_bytes,omitempty"`
	Tries        []Try  `json:"tries,omitempty"`
	TraceID      string `json:"trace_id,omitempty"` // when Caddy's tracing traced it
}

// Try is one upstream attempt of a request, as the history keeps it.
type Try struct {
	Engine     string  `json:"engine"`
	Model      string  `json:"model,omitempty"`
	Address    string  `json:"address,omitempty"`
	StartMs    float64 `json:"start_ms"` // after the request's arrival
	DurationMs float64 `json:"duration_ms"`
	WaitedMs   float64 `json:"waited_ms,omitempty"` // for a start or a queue place
	Status     int     `json:"status,omitempty"`
	Reason     string  `json:"reason"`
	Scope      string  `json:"scope,omitempty"`
	Resume     bool    `json:"resume,omitempty"`
	// Hedge is an attempt started beside an older one that had no content
	// yet; LostForMs, for one that lost the race (reason "lost"), how long
	// it ran after the win.
	Hedge     bool    `json:"hedge,omitempty"`
	LostForMs float64 `json:"lost_for_ms,omitempty"`
}

// Cut shortens a caller's text for a record.
func Cut(s string) string {
	if len(s) <= maxText {
		return s
	}
	return s[:maxText] + "…"
}

// Filter selects records. Zero fields select everything.
type Filter struct {
	Model  string // as the client asked
	Key    string // the key's name
	Engine string // that answered
	Status string // a status (503), a class (5xx) or "error" (400 and up)
	// API is an API the request spoke, the client's or the engine's
	// (chat, messages, responses, …), or "translated": the engine was
	// spoken to in another API than the client's
	API    string
	Since  int64  // arrived at or after, Unix milliseconds
	Before uint64 // numbered below (the next page's cursor)
	Limit  int    // at most; default DefaultLimit, at most MaxLimit
	// Engines, when not nil, keeps the records of these engines (the
	// running config's): answered or tried by one of them, or refused
	// before any attempt
	Engines map[string]bool
}

// ParseStatus checks a Filter's Status.
func ParseStatus(s string) error {
	if s == "" || s == "error" {
		return nil
	}
	if len(s) == 3 && strings.HasSuffix(s, "xx") && s[0] >= '1' && s[0] <= '5' {
		return nil
	}
	if n, err := strconv.Atoi(s); err == nil && n >= 100 && n <= 599 {
		return nil
	}
	return fmt.Errorf("status %q: want a status (503), a class (5xx) or error", s)
}

func (f Filter) match(r *Record) bool {
	switch {
	case f.Before != 0 && r.Seq >= f.Before,
		f.Model != "" && r.Model != f.Model,
		f.Key != "" && r.Key != f.Key,
		f.Engine != "" && r.Engine != f.Engine,
		f.API != "" && !f.apiMatches(r),
		f.Engines != nil && !f.ofEngines(r),
		r.Time < f.Since:
		return false
	}
	return statusMatches(f.Status, r.Status)
}

// ofEngines reports whether r is of f.Engines: answered by one, tried on
// one, or tried on none.
func (f Filter) ofEngines(r *Record) bool {
	if r.Engine != "" {
		return f.Engines[r.Engine]
	}
	for _, t := range r.Tries {
		if f.Engines[t.Engine] {
			return true
		}
	}
	return len(r.Tries) == 0
}

// apiMatches reports whether r spoke f.API, on either side, or was
// translated when f.API is "translated".
func (f Filter) apiMatches(r *Record) bool {
	translated := r.EngineAPI != "" && r.EngineAPI != r.API
	if f.API == "translated" {
		return translated
	}
	return r.API == f.API || translated && r.EngineAPI == f.API
}

func statusMatches(want string, status int) bool {
	switch {
	case want == "":
		return true
	case want == "error":
		return status >= 400
	case strings.HasSuffix(want, "xx"):
		return status/100 == int(want[0]-'0')
	}
	return strconv.Itoa(status) == want
}

func (f Filter) limit() int {
	switch {
	case f.Limit <= 0:
		return DefaultLimit
	case f.Limit > MaxLimit:
		return MaxLimit
	}
	return f.Limit
}
