package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// Hedged requests' metrics: how many hedges started and who won, and how
// long a losing attempt went on after the win (its connection closed and
// lease released): the cost a hedge leaves behind.
var (
	hedgesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "hedges_total",
		Help: "Requests that started a hedge (the next candidate beside an attempt with no content yet), by the engine hedged and who won: first (the attempt hedged), hedge, or none (both failed)."},
		[]string{"engine", "winner"})
	hedgeLosers = prometheus.NewHistogramVec(prometheus.HistogramOpts{Namespace: metricsNS, Name: "hedge_loser_seconds",
		Help:    "How long an attempt that lost a hedge ran after the win, until its connection was closed and its lease released.",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1}},
		[]string{"engine"})
)

// hedgeCollectors are registered with the gateway's metrics.
var hedgeCollectors = []prometheus.Collector{hedgesTotal, hedgeLosers}

// countHedge is the handler's Hedge hook.
func countHedge(engine, winner string) { hedgesTotal.WithLabelValues(engine, winner).Inc() }

// observeHedgeLosers takes the losers of a finished request's story.
func observeHedgeLosers(res *handler.Result) {
	for _, t := range res.Tries {
		if t.Reason == "lost" {
			hedgeLosers.WithLabelValues(t.Engine).Observe(t.LostFor.Seconds())
		}
	}
}
