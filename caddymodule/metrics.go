package caddymodule

import (
	"errors"
	"strconv"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// Metrics live in Caddy's Prometheus registry (served wherever Caddy serves
// metrics). The collectors are made once per process and registered into
// each config's registry, so a reload neither panics on a duplicate nor
// resets a counter. No label ever holds a key or prompt text: keys appear
// only by their configured name, models only when they are the gateway's.
var metrics struct {
	once sync.Once

	requests      *prometheus.CounterVec
	ttfb          *prometheus.HistogramVec
	duration      *prometheus.HistogramVec
	fallbacks     *prometheus.CounterVec
	replays       *prometheus.CounterVec
	retries       *prometheus.CounterVec
	dropped       *prometheus.CounterVec
	tokens        *prometheus.CounterVec
	starts        *prometheus.CounterVec
	startDur      *prometheus.HistogramVec
	stops         *prometheus.CounterVec
	resumes       *prometheus.CounterVec
	queueWait     *prometheus.HistogramVec
	busy          *prometheus.CounterVec
	keyTokens     *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	quotaDegraded *prometheus.GaugeVec
	live          liveCollector
}

const metricsNS = "llm_gateway"

func initMetrics(reg *prometheus.Registry) {
	metrics.once.Do(func() {
		counter := func(name, help string, labels ...string) *prometheus.CounterVec {
			return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: name, Help: help}, labels)
		}
		histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
			return prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNS, Name: name, Help: help, Buckets: buckets}, labels)
		}
		latency := []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}
		metrics.requests = counter("requests_total", "Requests by the engine that answered, the model asked for, the status and the key's name.", "engine", "model", "status", "key")
		metrics.ttfb = histogram("time_to_first_byte_seconds", "Time from the request to the first byte the client got.", latency, "engine")
		metrics.duration = histogram("request_duration_seconds", "Time from the request to its end.", latency, "engine")
		metrics.fallbacks = counter("fallbacks_total", "Requests served by another engine than the one asked for, by reason (slow_start, breaker, failure, context, body, busy, over_budget).", "engine", "fallback", "reason")
		metrics.replays = counter("replays_total", "Pool requests replayed on the next member.", "pool")
		metrics.retries = counter("retries_total", "Retries on the same engine after a transient failure.", "engine")
		metrics.dropped = counter("dropped_events_total", "Stream events dropped because their data was not JSON.", "engine")
		metrics.tokens = counter("tokens_total", "Tokens reported in answers' usage, by kind (prompt, completion).", "engine", "model", "kind")
		metrics.starts = counter("engine_starts_total", "Engine starts by result (ok, failed).", "engine", "result")
		metrics.startDur = histogram("engine_start_duration_seconds", "Time from spawning an engine to its readiness.", []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, "engine")
		metrics.stops = counter("engine_stops_total", "Engine stops by reason (idle, group, room, admin, reload, crash).", "engine", "reason")
		metrics.resumes = counter("resumes_total", "Cut streams continued on the fallback, by outcome (ok, failed).", "engine", "fallback", "outcome")
		metrics.queueWait = histogram("queue_wait_seconds", "Time requests waited in an engine's queue (max_concurrent), by how the wait ended (served, timeout, canceled).", latency, "engine", "outcome")
		metrics.keyTokens = counter("key_tokens_total", "Tokens reported in answers' usage, by the key's name and kind (prompt, completion).", "key", "kind")
		metrics.refusals = counter("key_refusals_total", "Requests the key rules refused, by the key's name and reason (model, rate, tokens).", "key", "reason")
		metrics.quotaDegraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNS, Name: "quota_store_degraded",
			Help: "1 while the key limits' counter store (embedded or redis) fails and the gateway counts locally."}, []string{"store"})
		metrics.busy = counter("busy_total", "Requests an engine's max_concurrent refused, by reason (queue_full, queue_timeout); they went to a fallback or got 429 engine_busy.", "engine", "reason")
	})
	for _, c := range []prometheus.Collector{
		metrics.requests, metrics.ttfb, metrics.duration, metrics.fallbacks, metrics.replays, metrics.retries,
		metrics.dropped, metrics.tokens, metrics.starts, metrics.startDur, metrics.stops, metrics.resumes,
		metrics.queueWait, metrics.busy, metrics.keyTokens, metrics.refusals, metrics.quotaDegraded, metrics.live,
		schedulerCollector{}, engineSignalsCollector{}, poolChoices, warmSwapCollector{},
	} {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				caddy.Log().Error("registering llm_gateway metrics", zap.Error(err))
			}
		}
	}
}

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
	if res.HasUsage {
		metrics.tokens.WithLabelValues(res.Engine, model, "prompt").Add(float64(res.Usage.Prompt))
		metrics.tokens.WithLabelValues(res.Engine, model, "completion").Add(float64(res.Usage.Completion))
		if res.KeyName != "" {
			metrics.keyTokens.WithLabelValues(res.KeyName, "prompt").Add(float64(res.Usage.Prompt))
			metrics.keyTokens.WithLabelValues(res.KeyName, "completion").Add(float64(res.Usage.Completion))
		}
	}
	if res.Refused != "" {
		metrics.refusals.WithLabelValues(res.KeyName, res.Refused).Inc()
	}
	observePoolChoice(res)
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
// (issue 30: what a request costs beyond reverse_proxy). The vectors live as
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

// engineObserver counts engine starts and stops and emits Caddy events for
// them, so other modules (or an exec handler) can react.
type engineObserver struct{}

func (engineObserver) EngineStarted(name string, pid int, took time.Duration) {
	metrics.starts.WithLabelValues(name, "ok").Inc()
	metrics.startDur.WithLabelValues(name).Observe(took.Seconds())
	emit("llm_gateway.engine_started", map[string]any{"engine": name, "pid": pid, "start_duration": took.Seconds()})
	board.EngineStarted(name, took)
}

func (engineObserver) EngineStartFailed(name, reason string) {
	metrics.starts.WithLabelValues(name, "failed").Inc()
	emit("llm_gateway.engine_failed", map[string]any{"engine": name, "reason": reason})
	board.Nudge()
}

func (engineObserver) EngineStopped(name string, pid int, reason engines.StopReason) {
	metrics.stops.WithLabelValues(name, string(reason)).Inc()
	emit("llm_gateway.engine_stopped", map[string]any{"engine": name, "pid": pid, "reason": string(reason)})
	board.Nudge()
}

// EngineHealth emits an event when a checked remote engine goes down or
// comes back, and shows it on the status page at once.
func (engineObserver) EngineHealth(name string, down bool) {
	event := "llm_gateway.engine_up"
	if down {
		event = "llm_gateway.engine_down"
	}
	emit(event, map[string]any{"engine": name})
	board.Nudge()
}

// EngineQueueWait counts a request's wait in an engine's queue.
func (engineObserver) EngineQueueWait(name string, waited time.Duration, outcome engines.QueueOutcome) {
	metrics.queueWait.WithLabelValues(name, string(outcome)).Observe(waited.Seconds())
}

// EngineBusy counts a request refused by an engine's max_concurrent.
func (engineObserver) EngineBusy(name string, reason engines.BusyReason) {
	metrics.busy.WithLabelValues(name, string(reason)).Inc()
}

// The events app of the newest config: engines outlive configs, so their
// events go through whichever config is current.
var events struct {
	mu  sync.Mutex
	app *caddyevents.App
	ctx caddy.Context
}

func setEvents(ctx caddy.Context) {
	appIface, err := ctx.App("events")
	if err != nil {
		return
	}
	app, ok := appIface.(*caddyevents.App)
	if !ok {
		return
	}
	events.mu.Lock()
	events.app, events.ctx = app, ctx
	events.mu.Unlock()
}

func emit(name string, data map[string]any) {
	events.mu.Lock()
	app, ctx := events.app, events.ctx
	events.mu.Unlock()
	if app != nil {
		app.Emit(ctx, name, data)
	}
}

// liveCollector reports the state of the engines and pools of the running
// configs at scrape time: engine state, leases in flight, breakers.
type liveCollector struct{}

var (
	descState   = prometheus.NewDesc(metricsNS+"_engine_state", "1 for the engine's current state (stopped, starting, ready, draining, sleeping; a remote engine: ready, down when its health checks fail, its breaker is open or it does not answer, unknown before anyone heard from it).", []string{"engine", "state"}, nil)
	descLeases  = prometheus.NewDesc(metricsNS+"_leases_in_flight", "Requests holding a lease on the engine.", []string{"engine"}, nil)
	descBreaker = prometheus.NewDesc(metricsNS+"_breaker_state", "Breaker state: 0 closed, 1 open, 2 half-open; member is empty for an engine's own breaker (the host: transport failures).", []string{"engine", "pool", "member"}, nil)
	descModelBr = prometheus.NewDesc(metricsNS+"_model_breaker_state", "State of an (engine, model) breaker that is not closed (status failures and answer timeouts): 1 open, 2 half-open.", []string{"engine", "model"}, nil)
	descQueue   = prometheus.NewDesc(metricsNS+"_queue_length", "Requests waiting in the engine's queue now (engines with max_concurrent).", []string{"engine"}, nil)
	descPlaces  = prometheus.NewDesc(metricsNS+"_concurrent_in_flight", "Places of the engine's max_concurrent taken now: requests in flight or waiting for its start.", []string{"engine"}, nil)
)

func (liveCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descState
	ch <- descLeases
	ch <- descBreaker
	ch <- descModelBr
	ch <- descQueue
	ch <- descPlaces
}

func (liveCollector) Collect(ch chan<- prometheus.Metric) {
	for _, s := range allStatuses() {
		for _, state := range []string{"stopped", "starting", "ready", "draining", "sleeping", "down", "unknown"} {
			v := 0.0
			if s.State == state {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(descState, prometheus.GaugeValue, v, s.Name, state)
		}
		ch <- prometheus.MustNewConstMetric(descLeases, prometheus.GaugeValue, float64(s.Leases), s.Name)
		ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, breakerValue(s.EngineBreaker), s.Name, "", "")
		for model, st := range s.ModelBreakers {
			ch <- prometheus.MustNewConstMetric(descModelBr, prometheus.GaugeValue, breakerValue(st), s.Name, model)
		}
		if s.Limit != nil {
			ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(s.Limit.Queued), s.Name)
			ch <- prometheus.MustNewConstMetric(descPlaces, prometheus.GaugeValue, float64(s.Limit.InFlight), s.Name)
		}
	}
	seen := map[string]bool{}
	for _, g := range newestGateways() {
		for _, p := range g.Pools() {
			for _, m := range p.Members {
				key := p.Name + "\x00" + m.Member
				if seen[key] {
					continue
				}
				seen[key] = true
				ch <- prometheus.MustNewConstMetric(descBreaker, prometheus.GaugeValue, breakerValue(m.Breaker), m.Engine, p.Name, m.Member)
			}
		}
	}
}

func breakerValue(state string) float64 {
	switch state {
	case "open":
		return 1
	case "half-open":
		return 2
	}
	return 0
}

// Interface guards
var (
	_ engines.HealthObserver = engineObserver{}
	_ engines.QueueObserver  = engineObserver{}
)
