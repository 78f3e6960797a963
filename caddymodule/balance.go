package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// poolChoices counts why pools chose the member they tried first:
// session, affinity, load or rotation. A pool whose share of affinity is low
// with multi-turn traffic has a cache_threshold too high, or clients that
// do not resend the conversation byte for byte.
var poolChoices = prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNS, Name: "pool_choices_total",
	Help: "Pool requests by why the pool chose the member it tried first: session (the session key), affinity (the member that was sent the longest prefix of the prompt), load (the least loaded), rotation (round_robin), cheap (prefer cheap, or a key past its cheap_at)."},
	[]string{"pool", "reason"})

// observePoolChoice counts a pool request's choice; the caddy module calls
// it for every finished request.
func observePoolChoice(res *handler.Result) {
	if res.Pool != "" && res.PoolChoice != "" {
		poolChoices.WithLabelValues(res.Pool, res.PoolChoice).Inc()
	}
}
