package caddymodule

import (
	"strings"

	"github.com/prometheus/client_golang/prometheus"
)

// engineSignalsCollector re-exposes what engines with `signals metrics`
// publish on their own /metrics, relabelled with the engine's
// name, so one scrape of the gateway sees the fleet: vllm:num_requests_waiting
// {model_name="qwen"} of engine gpu1 becomes
// llm_gateway_engine_vllm_num_requests_waiting{engine="gpu1",model_name="qwen"}.
// An engine's own "engine" label becomes "exported_engine", as Prometheus
// does. Only gauges and counters of the last fresh read are shown (at most
// 512 series an engine); histograms stay the engine's own scrape's. Beside
// them, llm_gateway_engine_load is the load a pool routes by,
// llm_gateway_engine_capacity and llm_gateway_engine_saturated what it
// knows of the engine's room.
//
// It is an unchecked collector: the series are the engines' to name, so
// it describes nothing up front.
type engineSignalsCollector struct{}

var descEngineLoad = prometheus.NewDesc(metricsNS+"_engine_load",
	"Requests an engine has as the pool sees them: the gateway's own in flight and queued, and the engine's own queue while its signals are fresh.",
	[]string{"engine"}, nil)

var descEngineCapacity = prometheus.NewDesc(metricsNS+"_engine_capacity",
	"Requests an engine serves at once as the pool knows it: its max_concurrent, else the slots its /slots lists (signals metrics); absent when unknown.",
	[]string{"engine"}, nil)

var descEngineSaturated = prometheus.NewDesc(metricsNS+"_engine_saturated",
	"1 when a request sent to the engine now would wait (its gateway queue is full, or its own metrics or slots say it is full of other front doors' requests): a pool tries it last.",
	[]string{"engine"}, nil)

func (engineSignalsCollector) Describe(chan<- *prometheus.Desc) {}

func (engineSignalsCollector) Collect(ch chan<- prometheus.Metric) {
	seen := map[string]bool{} // name and type: the first engine's type wins
	for _, s := range allStatuses() {
		e := lookupEngine(s.Name)
		if e == nil {
			continue
		}
		o := e.Occupancy()
		ch <- prometheus.MustNewConstMetric(descEngineLoad, prometheus.GaugeValue, float64(o.Load), s.Name)
		if o.Capacity > 0 {
			ch <- prometheus.MustNewConstMetric(descEngineCapacity, prometheus.GaugeValue, float64(o.Capacity), s.Name)
		}
		saturated := 0.0
		if o.Saturated {
			saturated = 1
		}
		ch <- prometheus.MustNewConstMetric(descEngineSaturated, prometheus.GaugeValue, saturated, s.Name)
		for _, series := range e.SignalSeries() {
			name := metricsNS + "_engine_" + strings.NewReplacer(":", "_", "-", "_", ".", "_").Replace(series.Name)
			typ := prometheus.GaugeValue
			if series.Counter {
				typ = prometheus.CounterValue
			}
			if counter, ok := seen[name]; ok && counter != series.Counter {
				continue
			}
			seen[name] = series.Counter
			labels := []string{"engine"}
			values := []string{s.Name}
			for _, l := range series.Labels {
				n := l[0]
				if n == "engine" {
					n = "exported_engine"
				}
				labels, values = append(labels, n), append(values, l[1])
			}
			desc := prometheus.NewDesc(name, "The engine's own "+series.Name+", read from its metrics (signals metrics).", labels, nil)
			m, err := prometheus.NewConstMetric(desc, typ, series.Value, values...)
			if err != nil {
				continue // a label name Prometheus refuses
			}
			ch <- m
		}
	}
}
