package caddymodule

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Warm swaps' metrics: sleeps and wakes by outcome and how long
// they took, and what slots save did for each engine. The state gauge
// (llm_gateway_engine_state) has "sleeping" beside the other states.

var warmSwapMetrics = struct {
	sleeps *prometheus.CounterVec
	wakes  *prometheus.CounterVec
	took   *prometheus.HistogramVec
}{
	sleeps: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "engine_sleeps_total",
		Help: "Engines put to sleep instead of stopped (swap sleep), by outcome (ok; failed: stopped instead)."}, []string{"engine", "outcome"}),
	wakes: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "engine_wakes_total",
		Help: "Sleeping engines woken by a request, by outcome (ok; failed: restarted instead)."}, []string{"engine", "outcome"}),
	took: prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNS, Name: "engine_sleep_duration_seconds",
		Help:    "Time a sleep or a wake took (op: sleep, wake), failed ones included.",
		Buckets: []float64{.05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}}, []string{"engine", "op"}),
}

var descSlots = prometheus.NewDesc(metricsNS+"_engine_slots_total",
	"What slots save did, by event: saves, restores, saved_tokens, restored_tokens (KV cache tokens written and read back instead of processed again), failures, removed (files beyond max_sessions).",
	[]string{"engine", "event"}, nil)

// warmSwapCollector is the sleep and wake counters and slots save's counts,
// read from the engines at scrape time.
type warmSwapCollector struct{}

func (warmSwapCollector) Describe(ch chan<- *prometheus.Desc) {
	warmSwapMetrics.sleeps.Describe(ch)
	warmSwapMetrics.wakes.Describe(ch)
	warmSwapMetrics.took.Describe(ch)
	ch <- descSlots
}

func (warmSwapCollector) Collect(ch chan<- prometheus.Metric) {
	warmSwapMetrics.sleeps.Collect(ch)
	warmSwapMetrics.wakes.Collect(ch)
	warmSwapMetrics.took.Collect(ch)
	for _, s := range allStatuses() {
		if s.Slots == nil {
			continue
		}
		c := s.Slots.SlotCounts
		for _, ev := range []struct {
			name string
			v    uint64
		}{{"saves", c.Saves}, {"restores", c.Restores}, {"saved_tokens", c.SavedTokens},
			{"restored_tokens", c.RestoredTokens}, {"failures", c.Failures}, {"removed", c.Removed}} {
			ch <- prometheus.MustNewConstMetric(descSlots, prometheus.CounterValue, float64(ev.v), s.Name, ev.name)
		}
	}
}

// EngineSlept counts a sleep and tells the page.
func (engineObserver) EngineSlept(name string, took time.Duration, outcome engines.SleepOutcome) {
	warmSwapMetrics.sleeps.WithLabelValues(name, string(outcome)).Inc()
	warmSwapMetrics.took.WithLabelValues(name, "sleep").Observe(took.Seconds())
	emit("llm_gateway.engine_slept", map[string]any{"engine": name, "outcome": string(outcome)})
	board.Nudge()
}

// EngineWoke counts a wake and tells the page.
func (engineObserver) EngineWoke(name string, took time.Duration, outcome engines.SleepOutcome) {
	warmSwapMetrics.wakes.WithLabelValues(name, string(outcome)).Inc()
	warmSwapMetrics.took.WithLabelValues(name, "wake").Observe(took.Seconds())
	emit("llm_gateway.engine_woke", map[string]any{"engine": name, "outcome": string(outcome)})
	board.Nudge()
}

// Interface guards
var _ engines.SleepObserver = engineObserver{}
