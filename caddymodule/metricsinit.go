package caddymodule

import (
	"errors"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"
)

// initMetrics makes the gateway's metrics, once per process, and registers
// them with every feature's collector into a config's registry (see
// metrics: a reload neither panics on a duplicate nor resets a counter).
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
		metrics.cachedTokens = counter("cached_tokens_total", "Prompt tokens (of tokens_total's prompt) the engine read from its prompt cache (kind read) or wrote to it (kind write), as its answers reported them.", "engine", "model", "kind")
		metrics.starts = counter("engine_starts_total", "Engine starts by result (ok, failed).", "engine", "result")
		metrics.startDur = histogram("engine_start_duration_seconds", "Time from spawning an engine to its readiness.", []float64{.1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}, "engine")
		metrics.stops = counter("engine_stops_total", "Engine stops by reason (idle, group, room, admin, reload, crash).", "engine", "reason")
		metrics.resumes = counter("resumes_total", "Cut streams continued on the fallback, by outcome (ok, failed).", "engine", "fallback", "outcome")
		metrics.queueWait = histogram("queue_wait_seconds", "Time requests waited in an engine's queue (max_concurrent), by how the wait ended (served, timeout, canceled).", latency, "engine", "outcome")
		metrics.keyTokens = counter("key_tokens_total", "Tokens charged to keys, by the key's name and kind: prompt and completion (the answers' usage), hedge_prompt and hedge_completion (attempts that lost a hedge: their usage, else their prompts), estimate (the reservation charged for an answer that reported no usage); for a key with a token budget they add up to its used.", "key", "kind")
		metrics.refusals = counter("key_refusals_total", "Requests the key rules refused, by the key's name and reason (model, rate, tokens).", "key", "reason")
		metrics.quotaDegraded = prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNS, Name: "quota_store_degraded",
			Help: "1 while the key limits' counter store (embedded or redis) fails and the gateway counts locally."}, []string{"store"})
		metrics.translated = counter("translated_requests_total", "Requests answered through translation, by the engine, the API the client spoke and the one the engine was spoken to in (chat, messages, responses).", "engine", "client_api", "engine_api")
		metrics.untranslated = counter("translation_dropped_total", "Request members dropped on the way to an engine whose API cannot carry them (the documented rules), by engine and member (its path without indexes).", "engine", "member")
		metrics.faults = counter("request_faults_total", "Requests an engine refused for what they asked, not for its health, by engine and kind (tools, tool_schema, param, context_length, grammar): the client got a 400, the engine's breaker heard a success.", "engine", "kind")
		metrics.busy = counter("busy_total", "Requests an engine's max_concurrent refused, by reason (queue_full, queue_timeout); they went to a fallback or got 429 engine_busy.", "engine", "reason")
	})
	for _, c := range append([]prometheus.Collector{
		metrics.requests, metrics.ttfb, metrics.duration, metrics.fallbacks, metrics.replays, metrics.retries,
		metrics.dropped, metrics.tokens, metrics.cachedTokens, metrics.starts, metrics.startDur, metrics.stops, metrics.resumes,
		metrics.queueWait, metrics.busy, metrics.faults, metrics.translated, metrics.untranslated, metrics.keyTokens, metrics.refusals, metrics.quotaDegraded, metrics.live,
		schedulerCollector{}, engineSignalsCollector{}, poolChoices, warmSwapCollector{}, costCollector{},
	}, hedgeCollectors...) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if !errors.As(err, &are) {
				caddy.Log().Error("registering llm_gateway metrics", zap.Error(err))
			}
		}
	}
}
