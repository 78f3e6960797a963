package caddymodule

import (
	"sync"

	"github.com/prometheus/client_golang/prometheus"
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
	cachedTokens  *prometheus.CounterVec
	starts        *prometheus.CounterVec
	startDur      *prometheus.HistogramVec
	stops         *prometheus.CounterVec
	resumes       *prometheus.CounterVec
	queueWait     *prometheus.HistogramVec
	busy          *prometheus.CounterVec
	faults        *prometheus.CounterVec
	keyTokens     *prometheus.CounterVec
	refusals      *prometheus.CounterVec
	translated    *prometheus.CounterVec
	untranslated  *prometheus.CounterVec
	quotaDegraded *prometheus.GaugeVec
	live          liveCollector
}

const metricsNS = "llm_gateway"

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
		for _, state := range []string{"stopped", "starting", "ready", "draining", "sleeping", "failing", "down", "unknown"} {
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
