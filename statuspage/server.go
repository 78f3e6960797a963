package statuspage

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

//go:embed assets
var assets embed.FS

// Stream limits: a page never costs the gateway more than one goroutine and
// one snapshot per stream, at most maxStreams streams run at once, a write
// that a stuck browser does not take within writeTimeout ends its stream,
// and a stream sends at most one batch per minGap however busy the gateway is.
// Of maxStreams, adminReserve are the admin endpoint's page's alone (issue
// 39): operators' pages on sites share the other 56, so that however many
// they open, the admin endpoint's page can still open its own (a page opens
// one stream for its events and one for the engine log it shows: the
// reserve is four pages' worth).
const (
	maxStreams   = 64
	adminReserve = 8
	writeTimeout = 10 * time.Second
	minGap       = 100 * time.Millisecond
	lookEvery    = time.Second // how often a stream looks at the engines
	heartbeat    = 15 * time.Second
)

// Server serves the page and its API under Prefix:
//
//	GET  <prefix>/                           the page (and its script and styles): no key needed, it holds no data
//	GET  <prefix>/api/state                  engines, pools and keys' usage, JSON
//	GET  <prefix>/api/events                 server-sent events: "state" (engines, pools and keys' usage, when they change), "requests" (new recent requests)
//	GET  <prefix>/api/logs/<engine>          server-sent events: "lines" (the engine's kept output, then each new line)
//	POST <prefix>/api/engines/<name>/start   the admin API's start
//	POST <prefix>/api/engines/<name>/stop    the admin API's stop (?drain=true)
//	POST <prefix>/api/stop-all               stop every running engine
//	GET  <prefix>/api/history, api/charts    the request history and its charts (history.go)
//	GET  <prefix>/api/spend?days=7|30        each key's and model's spend per day (spend.go)
//	     <prefix>/api/keys…                  a key's counters reset; keys issued, changed, rotated, revoked (issued.go)
//
// Every /api/ call needs one of Keys (none needed when Keys is nil).
type Server struct {
	Prefix string
	Keys   *Keys
	Board  *Board
	Source Source
	// Admin marks the admin endpoint's page: it may also take the
	// adminReserve streams that sites' pages may not. Default: false (a
	// site's page).
	Admin bool
	// Clock is the time the page's moments (idle stop, breaker retry) and
	// its probes of remote engines are counted on. Default: the wall
	// clock. The streams' write deadlines and pacing are the connection's
	// and stay on the wall clock.
	Clock clock.Clock

	reach reachability

	closeOnce sync.Once
	closedMu  sync.Mutex
	closed    chan struct{} // closed by Close: the streams end
}

func (s *Server) clock() clock.Clock {
	if s.Clock == nil {
		return clock.Real
	}
	return s.Clock
}

// Close ends the server's streams: a config that goes away (a reload, maybe
// with other keys) takes its pages' streams with it, and they reconnect to
// the new config's page, which checks their key again.
func (s *Server) Close() {
	s.closeOnce.Do(func() { close(s.done()) })
}

func (s *Server) done() chan struct{} {
	s.closedMu.Lock()
	defer s.closedMu.Unlock()
	if s.closed == nil {
		s.closed = make(chan struct{})
	}
	return s.closed
}

// streamContext is the request's context, also ended by Close.
func (s *Server) streamContext(r *http.Request) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(r.Context())
	// owned by the request: it returns when the stream ends, whichever way
	go func() {
		select {
		case <-s.done():
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}

// openStreams counts the open streams process-wide: pages on sites and on
// the admin endpoint share maxStreams, sites' pages all but adminReserve.
var openStreams atomic.Int64

// streamLimit is how many streams may be open when a page of the admin
// endpoint (admin) or of a site opens one more.
func streamLimit(admin bool) int64 {
	if admin {
		return maxStreams
	}
	return maxStreams - adminReserve
}

// takeStreamSlot counts one more open stream unless streamLimit(admin) are
// open already.
func takeStreamSlot(admin bool) bool {
	for {
		n := openStreams.Load()
		if n >= streamLimit(admin) {
			return false
		}
		if openStreams.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

func giveStreamSlot() { openStreams.Add(-1) }

// Owns reports whether the request's path is the page's.
func (s *Server) Owns(path string) bool {
	return path == s.Prefix || strings.HasPrefix(path, s.Prefix+"/")
}

// ServeHTTP implements http.Handler for paths under Prefix.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rest := strings.TrimPrefix(r.URL.Path, s.Prefix)
	switch {
	case rest == "":
		http.Redirect(w, r, s.Prefix+"/", http.StatusMovedPermanently)
	case strings.HasPrefix(rest, "/api/"):
		if !s.Keys.allow(r) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="llm_gateway status page"`)
			writeError(w, http.StatusUnauthorized, "invalid_api_key", "the status page's API needs an operator key (a key with rules is never one)")
			return
		}
		s.serveAPI(w, r, strings.TrimPrefix(rest, "/api/"))
	default:
		s.serveAsset(w, r, strings.TrimPrefix(rest, "/"))
	}
}

// securityHeaders keep the page to its own origin: nothing is loaded from
// elsewhere, and no other site may frame it.
func securityHeaders(h http.Header) {
	h.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "same-origin") // the admin endpoint wants an Origin or Referer on every browser call
}

func (s *Server) serveAsset(w http.ResponseWriter, r *http.Request, name string) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		writeError(w, http.StatusMethodNotAllowed, "method_not_allowed", "the page is read with GET")
		return
	}
	if name == "" {
		name = "index.html"
	}
	b, err := fs.ReadFile(assets, "assets/"+name)
	if err != nil || strings.Contains(name, "/") {
		writeError(w, http.StatusNotFound, "not_found", "no such file of the status page")
		return
	}
	types := map[string]string{".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	for ext, ct := range types {
		if strings.HasSuffix(name, ext) {
			w.Header().Set("Content-Type", ct)
		}
	}
	securityHeaders(w.Header())
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(b)
}

func (s *Server) serveAPI(w http.ResponseWriter, r *http.Request, rest string) {
	parts := strings.Split(strings.Trim(rest, "/"), "/")
	switch {
	case r.Method == http.MethodGet && rest == "state":
		writeJSON(w, http.StatusOK, s.takeSnapshot(r.Context()))
	case r.Method == http.MethodGet && rest == "events":
		s.serveEvents(w, r)
	case r.Method == http.MethodGet && (rest == "history" || rest == "charts"):
		s.serveHistory(w, r, rest) // history.go
	case r.Method == http.MethodGet && rest == "spend":
		s.serveSpend(w, r) // spend.go
	case r.Method == http.MethodGet && len(parts) == 2 && parts[0] == "logs":
		s.serveLogs(w, r, parts[1])
	case r.Method == http.MethodPost && len(parts) == 3 && parts[0] == "engines":
		err := s.Source.Act(r.Context(), parts[1], parts[2], r.URL.Query().Get("drain") == "true")
		s.Board.Nudge()
		if err != nil {
			writeError(w, statusOf(err), "action_failed", engines.Mask(err.Error(), nil))
			return
		}
		writeJSON(w, http.StatusOK, map[string]string{"engine": parts[1], "done": parts[2]})
	case r.Method == http.MethodPost && rest == "stop-all":
		s.stopAll(w, r)
	case r.Method != http.MethodGet && parts[0] == "keys":
		s.serveKeyAction(w, r, parts[1:]) // issued.go
	default:
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("%s %s is not part of the status page's API", r.Method, r.URL.Path))
	}
}

// StatusError lets Source.Act and Source.ResetKey say which status its error deserves.
type StatusError interface {
	error
	StatusCode() int
}

func statusOf(err error) int {
	var se StatusError
	if errors.As(err, &se) {
		return se.StatusCode()
	}
	return http.StatusInternalServerError
}

// stopAll stops every running engine at once (no drain: unload everything).
func (s *Server) stopAll(w http.ResponseWriter, r *http.Request) {
	res := StopAll(r.Context(), s.Source, false)
	s.Board.Nudge()
	writeJSON(w, res.StatusCode(), res)
}

// StopAllResult is what StopAll did: the engines it stopped, by name, and
// why each engine that would not stop did not (its error, masked).
type StopAllResult struct {
	Stopped []string          `json:"stopped"`
	Failed  map[string]string `json:"failed"`
}

// StatusCode is the answer's status: 409, as the per-engine stop's, when an
// engine would not stop; 200 otherwise.
func (r StopAllResult) StatusCode() int {
	if len(r.Failed) > 0 {
		return http.StatusConflict
	}
	return http.StatusOK
}

// StopAll stops, at once, every engine of src that the gateway runs (a cmd)
// and that is not stopped, each with src.Act's "stop" (drain: let its
// requests in flight finish first). The page's stop-all and the admin API's
// POST /llm_gateway/engines/stop share it, so that stopping every engine is
// the per-engine stop, run on each. A remote engine or provider has no
// process to stop and is left alone. Stopped is sorted, for a stable answer.
func StopAll(ctx context.Context, src Source, drain bool) StopAllResult {
	var (
		wg  sync.WaitGroup
		mu  sync.Mutex
		res = StopAllResult{Stopped: []string{}, Failed: map[string]string{}}
	)
	for _, e := range src.Engines() {
		if cfg := e.Config(); !cfg.Managed() || e.State() == engines.Stopped {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			err := src.Act(ctx, e.Name(), "stop", drain)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				res.Failed[e.Name()] = engines.Mask(err.Error(), nil)
			} else {
				res.Stopped = append(res.Stopped, e.Name())
			}
		}()
	}
	wg.Wait()
	slices.Sort(res.Stopped)
	return res
}

// serveEvents streams the engines' and pools' state when it changes and the
// recent requests as they finish. It sends the whole recent list first, so
// a page that reconnects starts over from the server's list.
func (s *Server) serveEvents(w http.ResponseWriter, r *http.Request) {
	st, ctx, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer st.close()
	look := time.NewTicker(lookEvery)
	defer look.Stop()
	var lastState []byte
	var seq uint64
	for {
		state, _ := json.Marshal(s.takeSnapshot(ctx))
		if !bytes.Equal(state, lastState) {
			if st.send("state", state) != nil {
				return
			}
			lastState = state
		}
		reqs, missed, last, wake := s.Board.Requests(seq)
		if len(reqs) > 0 {
			b, _ := json.Marshal(map[string]any{"requests": reqs, "missed": missed, "reset": seq == 0, "keep": s.Board.requests.size()})
			if st.send("requests", b) != nil {
				return
			}
		} else if seq == 0 {
			if st.send("requests", fmt.Appendf(nil, `{"requests":[],"missed":0,"reset":true,"keep":%d}`, s.Board.requests.size())) != nil {
				return
			}
		}
		seq = last
		watch := []<-chan struct{}{wake, s.Board.nudged()}
		for _, e := range s.Source.Engines() {
			watch = append(watch, e.Changed())
		}
		if st.wait(ctx, watch, look.C) != nil {
			return
		}
	}
}

// serveLogs streams one engine's output: the kept lines first, then each
// new line as it is printed, masked as in the admin API.
func (s *Server) serveLogs(w http.ResponseWriter, r *http.Request, name string) {
	var eng *engines.Engine
	for _, e := range s.Source.Engines() {
		if e.Name() == name {
			eng = e
		}
	}
	if eng == nil {
		writeError(w, http.StatusNotFound, "not_found", fmt.Sprintf("no engine named %q in the running config", name))
		return
	}
	st, ctx, ok := s.openStream(w, r)
	if !ok {
		return
	}
	defer st.close()
	var seq uint64
	first := true
	for {
		lines, last, wake := eng.TimedLines(seq)
		if len(lines) > 0 || first {
			b, _ := json.Marshal(timedLines(lines, first))
			if st.send("lines", b) != nil {
				return
			}
		}
		seq, first = last, false
		if st.wait(ctx, []<-chan struct{}{wake}, nil) != nil {
			return
		}
	}
}

// stream is one server-sent-event response.
type stream struct {
	w      http.ResponseWriter
	rc     *http.ResponseController
	cancel context.CancelFunc // ends the stream's context
}

// openStream takes a stream slot, writes the event-stream headers and
// returns the stream with its context: the request's, also ended by Close.
// The caller closes the stream. It answers 503 when every slot is taken.
func (s *Server) openStream(w http.ResponseWriter, r *http.Request) (*stream, context.Context, bool) {
	if !takeStreamSlot(s.Admin) {
		writeError(w, http.StatusServiceUnavailable, "too_many_streams", fmt.Sprintf("more than %d status page streams are open", streamLimit(s.Admin)))
		return nil, nil, false
	}
	rc := http.NewResponseController(w)
	// the admin endpoint's server has a read timeout for whole requests;
	// a stream is one long response, and the browser sends nothing more
	_ = rc.SetReadDeadline(time.Time{})
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	securityHeaders(h)
	w.WriteHeader(http.StatusOK)
	st := &stream{w: w, rc: rc}
	if err := st.flush(); err != nil {
		giveStreamSlot()
		return nil, nil, false
	}
	ctx, cancel := s.streamContext(r)
	st.cancel = cancel
	return st, ctx, true
}

// close ends the stream's context and gives its slot back.
func (st *stream) close() {
	st.cancel()
	giveStreamSlot()
}

// send writes one event; a browser that does not take it within
// writeTimeout ends the stream.
func (st *stream) send(event string, data []byte) error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	var buf bytes.Buffer
	buf.Grow(len(event) + len(data) + 16)
	buf.WriteString("event: ")
	buf.WriteString(event)
	buf.WriteString("\ndata: ")
	buf.Write(data) // JSON: no newlines
	buf.WriteString("\n\n")
	if _, err := st.w.Write(buf.Bytes()); err != nil {
		return err
	}
	return st.flush()
}

func (st *stream) flush() error {
	_ = st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	return st.rc.Flush()
}

// wait returns after minGap once one of the channels fires or tick ticks,
// sending a comment as heartbeat while none does, or with ctx's error.
func (st *stream) wait(ctx context.Context, chans []<-chan struct{}, tick <-chan time.Time) error {
	beat := time.NewTimer(heartbeat)
	defer beat.Stop()
	// the engines' change channels are as many as the engines: a select
	// built at run time (a few per second at most, bounded by minGap)
	cases := make([]reflect.SelectCase, 0, len(chans)+3)
	cases = append(cases,
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(beat.C)},
		reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(tick)})
	for _, c := range chans {
		cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(c)})
	}
	for {
		chosen, _, _ := reflect.Select(cases)
		if chosen == 0 {
			return ctx.Err()
		}
		if chosen != 1 {
			break
		}
		_ = st.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
		if _, err := st.w.Write([]byte(": heartbeat\n\n")); err != nil {
			return err
		}
		if err := st.flush(); err != nil {
			return err
		}
		beat.Reset(heartbeat)
	}
	// however busy the gateway, a stream sends at most one batch per
	// minGap: what arrives meanwhile is read from the ring in one go
	gap := time.NewTimer(minGap)
	defer gap.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-gap.C:
		return nil
	}
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func writeError(w http.ResponseWriter, status int, code, msg string) {
	writeJSON(w, status, map[string]any{"error": map[string]string{"message": msg, "type": "status_page_error", "code": code}})
}
