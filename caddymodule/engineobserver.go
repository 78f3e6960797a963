package caddymodule

import (
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

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

// Interface guards
var (
	_ engines.HealthObserver = engineObserver{}
	_ engines.QueueObserver  = engineObserver{}
)
