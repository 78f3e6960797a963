package statuspage

import (
	"time"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Warm swaps on the page: a sleeping engine shows as "sleeping"
// with its pid (its process and weights stay in host memory), the moment
// its idle_timeout will stop it; a ready idle engine with sleep_after
// shows when it will sleep. The memory card lists the sleeping engines and
// the host memory they hold.

// sleepView adds swap sleep's moments to an engine's view.
func sleepView(v *engineView, st engines.Status, cfg engines.Config, now time.Time) {
	if !cfg.Sleeps() || st.Leases > 0 || st.IdleSecs <= 0 {
		return
	}
	idle := time.Duration(st.IdleSecs * float64(time.Second))
	switch st.State {
	case "ready":
		if d := time.Duration(cfg.SleepAfter); d > 0 {
			v.SleepAt = roundMs(now.Add(max(d-idle, 0)))
			v.IdleStopAt = 0 // it sleeps first: idle_timeout runs on while it sleeps
		}
	case "sleeping":
		if d := time.Duration(cfg.IdleTimeout); d > 0 {
			v.IdleStopAt = roundMs(now.Add(max(d-idle, 0)))
		}
	}
}
