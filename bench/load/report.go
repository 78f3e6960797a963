//go:build unix

package main

import (
	"fmt"
	"io"
	"strings"
)

// metric is one row of the table: a value per round for each target.
type metric struct {
	name         string
	rp, gw       []float64
	direct       []float64 // the upstream measured without a proxy, when non-nil
	higherBetter bool
	prec         int // decimals shown
	target       string
	pass         func(rp, gw float64) bool // nil: no target
}

// advantage is the ratio oriented so that > 1 means the gateway is better:
// gw/rp for a rate, rp/gw for a cost.
func (m *metric) advantage(rp, gw float64) float64 {
	if m.higherBetter {
		return gw / rp
	}
	return rp / gw
}

type report struct {
	cfg     config
	metrics []*metric
	fails   map[string]int64
	notes   []string
}

func (r *report) add(m *metric) *metric {
	r.metrics = append(r.metrics, m)
	return m
}

func (r *report) failures(targetName, phase string, n int64) {
	if n == 0 {
		return
	}
	if r.fails == nil {
		r.fails = map[string]int64{}
	}
	r.fails[targetName+" "+phase] += n
}

func (r *report) note(format string, args ...any) {
	r.notes = append(r.notes, fmt.Sprintf(format, args...))
}

func (r *report) print(w io.Writer) {
	c := r.cfg
	fmt.Fprintf(w, "\nllm_gateway vs stock reverse_proxy: same Caddy, same upstream, 127.0.0.1\n")
	fmt.Fprintf(w, "medians of %d interleaved rounds (order alternating), %v per timed run\n", c.rounds, c.duration)
	fmt.Fprintf(w, "\"gw adv.\" > 1.00 means the gateway is better: gw/rp for throughput, rp/gw for latency, CPU and memory\n\n")
	const row = "%-38s %14s %14s %8s  %-16s %s\n"
	fmt.Fprintf(w, row, "metric", "reverse_proxy", "llm_gateway", "gw adv.", "target", "")
	fmt.Fprintln(w, strings.Repeat("-", 100))
	for _, m := range r.metrics {
		if len(m.rp) == 0 || len(m.gw) == 0 {
			continue
		}
		rp, gw := median(m.rp), median(m.gw)
		verdict := ""
		if m.pass != nil {
			verdict = "FAIL"
			if m.pass(rp, gw) {
				verdict = "PASS"
			}
		}
		adv := "-"
		if rp > 0 && gw > 0 {
			adv = fmt.Sprintf("%.2fx", m.advantage(rp, gw))
		}
		fmt.Fprintf(w, row, m.name, num(rp, m.prec), num(gw, m.prec), adv, m.target, verdict)
	}
	fmt.Fprintln(w, strings.Repeat("-", 100))
	for _, m := range r.metrics {
		if len(m.direct) > 0 {
			fmt.Fprintf(w, "upstream direct, %s: %s\n", strings.TrimSpace(m.name), num(median(m.direct), m.prec))
		}
	}
	fmt.Fprintf(w, "setup: throughput c=%v closed loop; latency open loop at %d req/s; TTFB %d sequential streams/round;\n",
		c.concurrency, c.rate, c.ttfbStreams)
	fmt.Fprintf(w, "       CPU %d streams/round at %d concurrent (x50 chunks); memory %d streams open at once, fresh Caddy per run\n",
		c.cpuStreams, c.cpuConcurrency, c.openStreams)
	if len(r.fails) == 0 {
		fmt.Fprintln(w, "failed requests: none")
	}
	for k, n := range r.fails {
		fmt.Fprintf(w, "failed requests: %s: %d\n", k, n)
	}
	for _, n := range r.notes {
		fmt.Fprintln(w, "note:", n)
	}
}

func num(v float64, prec int) string {
	return fmt.Sprintf("%.*f", prec, v)
}
