package caddymodule

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// The scheduler as Caddy shows it: the admin API's
// GET /llm_gateway/memory, its metrics, and the priority of each engine's
// last use, which the caddy module tells the engine when a request ends.

// noteServed tells the engine that answered the request the request's
// priority (its key's, lowered by an X-LLM-Priority header), so that the
// scheduler stops the engines of lower-priority use first.
func (g *Gateway) noteServed(res *handler.Result) {
	if res.Engine == "" {
		return
	}
	for _, e := range g.engines {
		if e.Name() == res.Engine {
			e.Served(res.Priority)
			return
		}
	}
}

// schedulerReport is what GET /llm_gateway/memory answers: the handler's
// memory budget (its fields at the top, as before device sets), each
// device set's and each exclusive group's, with the starts waiting in
// order and why, each engine's share, why it is kept and why it last
// started and stopped, and the swaps of the last hour.
func schedulerReport() engines.Scheduler { return engines.Boxes() }

// schedulerCollector reports the scheduler's boxes at scrape time.
type schedulerCollector struct{}

var (
	descMemory  = prometheus.NewDesc(metricsNS+"_memory_bytes", "A memory budget (what=budget) and what the engines that run or start hold of it (what=used), by device set (devices is empty for the handler's memory_budget).", []string{"what", "devices"}, nil)
	descWaiting = prometheus.NewDesc(metricsNS+"_starts_waiting", "Engine starts waiting for room in a memory budget now, by device set.", []string{"devices"}, nil)
	descSwaps   = prometheus.NewDesc(metricsNS+"_swaps_total", "Engine starts that stopped other engines to make room, by memory budget (devices) or exclusive group.", []string{"devices", "group"}, nil)
	descSched   = prometheus.NewDesc(metricsNS+"_scheduler_stops_total", "Engines the scheduler stopped, by reason: room (an idle engine stopped for a start), drained (a busy engine drained for a start that waited max_wait).", []string{"devices", "group", "reason"}, nil)
	descRefused = prometheus.NewDesc(metricsNS+"_scheduler_refusals_total", "Engine starts the scheduler refused: no room within max_wait (their requests got 503 engine_busy or their fallback).", []string{"devices", "group"}, nil)
	// Who causes the swaps. A key appears by its configured name
	// only, never its token; "" is a key without a name, a request without
	// a key or an admin start, as in llm_gateway_requests_total.
	descKeySwaps = prometheus.NewDesc(metricsNS+"_swaps_by_key_total", "Engine starts that stopped other engines to make room, by the name of the key whose request began the start (empty: a key without a name, no key, an admin start), memory budget (devices) or exclusive group.", []string{"devices", "group", "key"}, nil)
)

func (schedulerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descMemory, descWaiting, descSwaps, descKeySwaps, descSched, descRefused} {
		ch <- d
	}
}

func (schedulerCollector) Collect(ch chan<- prometheus.Metric) {
	s := engines.Boxes()
	var uses []engines.MemoryUse
	if s.Budget > 0 {
		uses = append(uses, s.MemoryUse)
	}
	uses = append(append(uses, s.Sets...), s.Groups...)
	for _, u := range uses {
		if u.Group == "" {
			ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(u.Budget), "budget", u.Devices)
			ch <- prometheus.MustNewConstMetric(descMemory, prometheus.GaugeValue, float64(u.Used), "used", u.Devices)
			ch <- prometheus.MustNewConstMetric(descWaiting, prometheus.GaugeValue, float64(len(u.Waiting)), u.Devices)
		}
		ch <- prometheus.MustNewConstMetric(descSwaps, prometheus.CounterValue, float64(u.Swaps), u.Devices, u.Group)
		for key, n := range u.SwapsByKey {
			ch <- prometheus.MustNewConstMetric(descKeySwaps, prometheus.CounterValue, float64(n), u.Devices, u.Group, key)
		}
		for _, reason := range []string{"room", "drained"} {
			ch <- prometheus.MustNewConstMetric(descSched, prometheus.CounterValue, float64(u.Stops[reason]), u.Devices, u.Group, reason)
		}
		ch <- prometheus.MustNewConstMetric(descRefused, prometheus.CounterValue, float64(u.Refused), u.Devices, u.Group)
	}
}
