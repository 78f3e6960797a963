package caddymodule

import (
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// hooks are the handler's counters.
var hooks = handler.Hooks{
	Fallback: func(engine, fallback, reason string) {
		metrics.fallbacks.WithLabelValues(engine, fallback, reason).Inc()
		emit("llm_gateway.fallback_used", map[string]any{"engine": engine, "fallback": fallback, "reason": reason})
	},
	Retry:   func(engine string) { metrics.retries.WithLabelValues(engine).Inc() },
	Replay:  func(pool string) { metrics.replays.WithLabelValues(pool).Inc() },
	Dropped: func(engine string) { metrics.dropped.WithLabelValues(engine).Inc() },
	Resume: func(engine, fallback, outcome string) {
		metrics.resumes.WithLabelValues(engine, fallback, outcome).Inc()
	},
	Untranslated: func(engine, member string) { metrics.untranslated.WithLabelValues(engine, member).Inc() },
	Hedge:        countHedge,
	RequestFault: func(engine, kind string) { metrics.faults.WithLabelValues(engine, kind).Inc() },
}

// observeRequest counts one finished request.
func observeRequest(res *handler.Result) {
	model := res.ModelAsked
	if !res.Known {
		model = "" // a name the client made up is no label value
	}
	s := seriesOf(requestLabels{engine: res.Engine, model: model, status: res.Status, key: res.KeyName})
	s.requests.Inc()
	if res.TTFB > 0 {
		s.ttfb.Observe(res.TTFB.Seconds())
	}
	s.duration.Observe(res.Duration.Seconds())
	observeHedgeLosers(res)
	observeCost(res, model) // spend.go
	if res.HasUsage {
		metrics.tokens.WithLabelValues(res.Engine, model, "prompt").Add(float64(res.Usage.Input))
		metrics.tokens.WithLabelValues(res.Engine, model, "completion").Add(float64(res.Usage.Output))
		if u := res.Usage; u.CacheRead > 0 || u.CacheWrite > 0 {
			metrics.cachedTokens.WithLabelValues(res.Engine, model, "read").Add(float64(u.CacheRead))
			metrics.cachedTokens.WithLabelValues(res.Engine, model, "write").Add(float64(u.CacheWrite))
		}
	}
	if res.KeyName != "" {
		observeKeyTokens(res)
	}
	if res.EngineAPI != res.API && res.Engine != "" {
		metrics.translated.WithLabelValues(res.Engine, res.API, res.EngineAPI).Inc()
	}
	if res.Refused != "" {
		metrics.refusals.WithLabelValues(res.KeyName, res.Refused).Inc()
	}
	observePoolChoice(res)
}

// observeKeyTokens counts what a request's key was charged, by kind: the
// answer's usage (prompt, completion), the attempts that lost a hedge
// (hedge_prompt, hedge_completion) and the reservation charged for an
// answer that reported no usage (estimate). For a key with a token budget
// the kinds add up to what its budget was charged (the admin API's used).
func observeKeyTokens(res *handler.Result) {
	add := func(kind string, n int) {
		if n > 0 {
			metrics.keyTokens.WithLabelValues(res.KeyName, kind).Add(float64(n))
		}
	}
	if res.HasUsage {
		metrics.keyTokens.WithLabelValues(res.KeyName, "prompt").Add(float64(res.Usage.Input))
		metrics.keyTokens.WithLabelValues(res.KeyName, "completion").Add(float64(res.Usage.Output))
	}
	add("hedge_prompt", res.HedgeUsage.Input)
	add("hedge_completion", res.HedgeUsage.Output)
	add("estimate", int(res.Estimated))
}

// requestLabels are the labels of the series every request is counted in.
type requestLabels struct {
	engine, model, key string
	status             int
}

// requestSeries are a label set's series: the request counter, and the
// engine's time to first byte and duration.
type requestSeries struct {
	requests       prometheus.Counter
	ttfb, duration prometheus.Observer
}

// series holds a requestSeries per label set seen. The same few label sets
// come back request after request; WithLabelValues would format the status
// and hash and look up each series under the vector's lock every time
// (what a request costs beyond reverse_proxy). The vectors live as
// long as the process and no series is ever deleted, so a series once found
// stays valid; label sets are bounded by the config's engines, models and
// keys, as the vectors' own series are.
var series sync.Map // requestLabels → *requestSeries

func seriesOf(l requestLabels) *requestSeries {
	if s, ok := series.Load(l); ok {
		return s.(*requestSeries)
	}
	s := &requestSeries{
		requests: metrics.requests.WithLabelValues(l.engine, l.model, strconv.Itoa(l.status), l.key),
		ttfb:     metrics.ttfb.WithLabelValues(l.engine),
		duration: metrics.duration.WithLabelValues(l.engine),
	}
	got, _ := series.LoadOrStore(l, s)
	return got.(*requestSeries)
}
