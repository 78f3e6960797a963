package statuspage

import (
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/history"
)

// The page's request history and its charts, read from the
// gateway's history store:
//
//	GET <prefix>/api/history?model=&key=&engine=&status=&api=&since=&before=&limit=   one page, newest first (history.ParseQuery); ?format=jsonl: every record, as JSON lines
//	GET <prefix>/api/charts?range=1h|1d   requests by status, time to first byte p50/p95 and tokens per second over time, and per engine

// HistorySource is a Source that keeps a request history; without one the
// page's history answers 404.
type HistorySource interface {
	// History is the live request history, nil when it is off.
	History() *history.Store
}

func (s *Server) historyStore() *history.Store {
	if hs, ok := s.Source.(HistorySource); ok {
		return hs.History()
	}
	return nil
}

func (s *Server) serveHistory(w http.ResponseWriter, r *http.Request, what string) {
	st := s.historyStore()
	if st == nil {
		writeError(w, http.StatusNotFound, "history_off", "the request history is off in the running config (history off)")
		return
	}
	now := s.clock().Now()
	if what == "charts" {
		span, ok := chartRanges[r.URL.Query().Get("range")]
		if !ok {
			writeError(w, http.StatusBadRequest, "bad_range", "range: want 1h or 1d")
			return
		}
		c, err := cachedCharts(st, span, now)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "history_failed", err.Error())
			return
		}
		writeJSON(w, http.StatusOK, c)
		return
	}
	f, err := history.ParseQuery(r.URL.Query(), now)
	if err != nil {
		writeError(w, http.StatusBadRequest, "bad_filter", err.Error())
		return
	}
	switch c := r.URL.Query().Get("config"); c {
	case "":
	case "current":
		// this config only: the data folder keeps the records of every
		// config that ran; these are its engines' (and those no engine
		// answered)
		f.Engines = map[string]bool{}
		for _, e := range s.Source.Engines() {
			f.Engines[e.Name()] = true
		}
	default:
		writeError(w, http.StatusBadRequest, "bad_filter", fmt.Sprintf("config %q: want current", c))
		return
	}
	securityHeaders(w.Header())
	if history.WantsLines(r) {
		w.Header().Set("Content-Disposition", `attachment; filename="llm_gateway-requests.jsonl"`)
		_ = st.WriteLines(w, f)
		return
	}
	page, err := st.QueryPage(f)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "history_failed", err.Error())
		return
	}
	writeJSON(w, http.StatusOK, page)
}

// chartSpan is a chart's range and its bucket width.
type chartSpan struct {
	name       string
	span, step time.Duration
}

var chartRanges = map[string]chartSpan{
	"1h": {"1h", time.Hour, time.Minute},
	"1d": {"1d", 24 * time.Hour, 15 * time.Minute},
}

// charts is what the page draws. Times are Unix ms; a bucket with no
// request has no percentile (0) and no speed (0).
type charts struct {
	Range   string        `json:"range"`
	From    int64         `json:"from"` // the first bucket's start
	StepMs  int64         `json:"step_ms"`
	Buckets []chartBucket `json:"buckets"`
	Engines []engineChart `json:"engines"` // by requests, most first
}

type chartBucket struct {
	OK        int     `json:"ok"`     // 1xx to 3xx
	Client    int     `json:"client"` // 4xx
	Server    int     `json:"server"` // 5xx
	TTFBP50   float64 `json:"ttfb_p50"`
	TTFBP95   float64 `json:"ttfb_p95"`
	TokensSec float64 `json:"tokens_per_s"` // completion tokens over the time spent producing them: a stream's after its first byte, a whole answer's all of it
}

type engineChart struct {
	Name      string  `json:"name"`
	Requests  int     `json:"requests"`
	Errors    int     `json:"errors"` // status 400 and up
	TTFBP50   float64 `json:"ttfb_p50"`
	TTFBP95   float64 `json:"ttfb_p95"`
	TokensSec float64 `json:"tokens_per_s"`
}

// tally gathers a bucket's or an engine's requests.
type tally struct {
	ttfb          []float64
	tokens        int64
	producingSecs float64
}

func (t *tally) add(r *history.Record) {
	if r.TTFBMs > 0 {
		t.ttfb = append(t.ttfb, r.TTFBMs)
	}
	// a stream's tokens came after its first byte; a whole answer's first
	// byte is the answer, so its attempt's time made them, but for a wait
	// for the engine's start
	producing := r.DurationMs
	switch n := len(r.Tries); {
	case r.Stream:
		producing -= r.TTFBMs
	case n > 0 && r.Tries[n-1].Reason == "ok":
		producing = r.Tries[n-1].DurationMs - r.Tries[n-1].WaitedMs
	}
	if r.TokensOut > 0 && producing > 0 {
		t.tokens += r.TokensOut
		t.producingSecs += producing / 1000
	}
}

func (t *tally) p(q float64) float64 {
	if len(t.ttfb) == 0 {
		return 0
	}
	slices.Sort(t.ttfb)
	// nearest rank: the smallest value with at least q of them at or below it
	rank := int(math.Ceil(q * float64(len(t.ttfb))))
	return t.ttfb[max(0, min(len(t.ttfb), rank)-1)]
}

func (t *tally) speed() float64 {
	if t.producingSecs <= 0 {
		return 0
	}
	return float64(t.tokens) / t.producingSecs
}

// makeCharts reads the history of the span before now, one pass.
func makeCharts(st *history.Store, cs chartSpan, now time.Time) (charts, error) {
	n := int(cs.span / cs.step)
	end := now.Truncate(cs.step).Add(cs.step) // the current bucket is the last
	from := end.Add(-cs.span)
	c := charts{Range: cs.name, From: from.UnixMilli(), StepMs: cs.step.Milliseconds(), Buckets: make([]chartBucket, n), Engines: []engineChart{}}
	buckets := make([]tally, n)
	engines := map[string]*tally{}
	counts := map[string]*engineChart{}
	err := st.Scan(history.Filter{Since: from.UnixMilli()}, func(r *history.Record) bool {
		i := int((r.Time - c.From) / c.StepMs)
		if i < 0 || i >= n {
			return true
		}
		b := &c.Buckets[i]
		switch {
		case r.Status >= 500:
			b.Server++
		case r.Status >= 400:
			b.Client++
		default:
			b.OK++
		}
		buckets[i].add(r)
		// a failed request counts against the engine it tried last
		name := r.Engine
		if name == "" && len(r.Tries) > 0 {
			name = r.Tries[len(r.Tries)-1].Engine
		}
		if name == "" {
			name = "(none)"
		}
		if engines[name] == nil {
			engines[name], counts[name] = &tally{}, &engineChart{Name: name}
		}
		engines[name].add(r)
		counts[name].Requests++
		if r.Status >= 400 {
			counts[name].Errors++
		}
		return true
	})
	if err != nil {
		return c, fmt.Errorf("reading the request history: %v", err)
	}
	for i := range buckets {
		b := &c.Buckets[i]
		b.TTFBP50, b.TTFBP95, b.TokensSec = buckets[i].p(.5), buckets[i].p(.95), buckets[i].speed()
	}
	for name, ec := range counts {
		t := engines[name]
		ec.TTFBP50, ec.TTFBP95, ec.TokensSec = t.p(.5), t.p(.95), t.speed()
		c.Engines = append(c.Engines, *ec)
	}
	slices.SortFunc(c.Engines, func(a, b engineChart) int {
		if a.Requests != b.Requests {
			return b.Requests - a.Requests
		}
		return cmpString(a.Name, b.Name)
	})
	return c, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// chartsFresh is how long charts are reused: however many pages are open,
// the history is read at most once per range in that time.
const chartsFresh = 5 * time.Second

var chartCache struct {
	sync.Mutex
	st    *history.Store
	at    map[string]time.Time
	ready map[string]charts
}

func cachedCharts(st *history.Store, cs chartSpan, now time.Time) (charts, error) {
	chartCache.Lock()
	defer chartCache.Unlock()
	if chartCache.st != st {
		chartCache.st, chartCache.at, chartCache.ready = st, map[string]time.Time{}, map[string]charts{}
	}
	if at, ok := chartCache.at[cs.name]; ok && now.Sub(at) < chartsFresh && !now.Before(at) {
		return chartCache.ready[cs.name], nil
	}
	c, err := makeCharts(st, cs, now)
	if err != nil {
		return c, err
	}
	chartCache.at[cs.name], chartCache.ready[cs.name] = now, c
	return c, nil
}
