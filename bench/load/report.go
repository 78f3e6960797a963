//go:build unix

package main

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// metric is one row of the table: a value per round for each target.
type metric struct {
	name         string
	rp, gw       []float64
	direct       []float64 // the upstream measured without a proxy, when non-nil
	floor        []float64 // bench_floor (a handler that only relays), when non-nil
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

// spread is the lowest and highest per-round advantage, pairing the
// targets' rounds in order.
func (m *metric) spread() string {
	lo, hi := 0.0, 0.0
	for i := range min(len(m.rp), len(m.gw)) {
		if m.rp[i] <= 0 || m.gw[i] <= 0 {
			return "-"
		}
		a := m.advantage(m.rp[i], m.gw[i])
		if i == 0 || a < lo {
			lo = a
		}
		if i == 0 || a > hi {
			hi = a
		}
	}
	if hi == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f-%.2fx", lo, hi)
}

type report struct {
	cfg     config
	metrics []*metric
	memory  *metric // RSS per open stream, when the memory phase ran
	checks  []check // the hostile phase's rows
	door    []check // the door's rows (door.go)
	fails   map[string]int64
	notes   []string
	// with -beside: the same phases measured with the hostile mix beside,
	// and what the mix saw (beside.go)
	beside *report
	mix    *mixBeside
	// the translation phase's rows and its targets' names (translation.go)
	translation []*transMetric
	transNames  []string
}

// check is a row of the hostile phase: one figure of llm_gateway alone and
// its limit; limit "" is a figure shown for reading the others.
type check struct {
	name, value, limit string
	pass               bool
}

func (r *report) check(name, value, limit string, pass bool) {
	r.checks = append(r.checks, check{name, value, limit, pass})
}

func (r *report) info(name, value string) {
	r.checks = append(r.checks, check{name: name, value: value})
}

func (r *report) doorCheck(name, value, limit string, pass bool) {
	r.door = append(r.door, check{name, value, limit, pass})
}

func (r *report) doorInfo(name, value string) {
	r.door = append(r.door, check{name: name, value: value})
}

// failedChecks names the hostile and door rows whose limit was exceeded.
func (r *report) failedChecks() []string {
	var out []string
	for _, c := range append(r.checks, r.door...) {
		if c.limit != "" && !c.pass {
			out = append(out, fmt.Sprintf("%s = %s, limit %s", strings.TrimSpace(c.name), c.value, c.limit))
		}
	}
	return out
}

// addHostile turns the mix's counts into rows.
func (r *report) addHostile(h hostileResult) {
	capped := max(h.maxCalls[atCap], h.maxCalls[repeats], h.maxCalls[overCap])
	r.check("upstream calls per request, fallbacks at cap (max)", strconv.FormatInt(capped, 10),
		fmt.Sprintf("<= %d (1 + cap)", 1+fallbackCap), capped <= 1+fallbackCap)
	r.info("  mean, requests not cancelled", fmt.Sprintf("%.2f", h.meanCalls[atCap]))
	r.check("  requests not cancelled that tried 1 + cap engines", fmt.Sprintf("%d/%d", h.fullWalks, h.walks),
		"all", h.walks > 0 && h.fullWalks == h.walks)
	r.info(fmt.Sprintf("  %d items naming %d engines (max)", 2*fallbackCap, fallbackCap), strconv.FormatInt(h.maxCalls[repeats], 10))
	r.check(fmt.Sprintf("  %d engines, or 10,000 items: 400, no call (max calls)", fallbackCap+1), strconv.FormatInt(h.maxCalls[overCap], 10),
		"0", h.maxCalls[overCap] == 0 && h.badStatus[overCap] == 0 && h.requests[overCap] > h.cancelled[overCap])
	r.check("upstream calls per request, 503 and retries (max)", strconv.FormatInt(h.maxCalls[retried], 10),
		fmt.Sprintf("<= %d (max_attempts)", attemptsCap), h.maxCalls[retried] <= attemptsCap)
	unexpected := h.badStatus[atCap] + h.badStatus[repeats] + h.badStatus[retried]
	r.check("failing requests with another answer than an error", strconv.Itoa(unexpected), "0", unexpected == 0)
	r.check("healthy streams, not cancelled, not whole", fmt.Sprintf("%d/%d", h.badStatus[healthy], h.requests[healthy]-h.cancelled[healthy]),
		"0", h.badStatus[healthy] == 0 && h.requests[healthy] > h.cancelled[healthy])
	slow := "whole"
	if !h.slowWhole {
		slow = "cut"
		r.note("slow reader: %v", h.slowErr)
	}
	idle := r.cfg.hostile.idle
	r.check(fmt.Sprintf("slow reader paused %v (idle timeout %v)", r.cfg.hostile.slowPause, idle), slow, "whole", h.slowWhole)
	r.info("  its stream / what socket buffers can hold (MB)", fmt.Sprintf("%.1f / %.1f",
		float64(49*r.cfg.hostile.slowPad)/(1<<20), float64(r.cfg.hostile.slowBound)/(1<<20)))
	r.check("upstream calls without the request's id", strconv.FormatInt(h.untagged, 10), "0", h.untagged == 0)
	var sent, cancelled int
	for k := range kinds {
		sent, cancelled = sent+h.requests[k], cancelled+h.cancelled[k]
	}
	r.info("client requests / cancelled / upstream calls", fmt.Sprintf("%d / %d / %d", sent, cancelled, h.total))
	r.info("Caddy VmRSS growth during the mix (MB)", fmt.Sprintf("%.1f", float64(h.rssGrowthKB)/1024))
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
	if r.compared() {
		r.printComparison(w)
		r.printBeside(w)
	}
	r.printTranslation(w)
	if len(r.fails) == 0 {
		fmt.Fprintln(w, "failed requests: none")
	}
	for k, n := range r.fails {
		fmt.Fprintf(w, "failed requests: %s: %d\n", k, n)
	}
	for _, n := range r.notes {
		fmt.Fprintln(w, "note:", n)
	}
	r.printHostile(w)
	r.printDoor(w)
}

// compared says whether any measurement ran on both targets.
func (r *report) compared() bool {
	for _, m := range r.metrics {
		if len(m.rp) > 0 && len(m.gw) > 0 {
			return true
		}
	}
	return false
}

func (r *report) printComparison(w io.Writer) {
	c := r.cfg
	fmt.Fprintf(w, "\nllm_gateway vs stock reverse_proxy: same Caddy, same upstream, 127.0.0.1\n")
	fmt.Fprintf(w, "medians of %d interleaved rounds (order alternating), %v per timed run\n", c.rounds, c.duration)
	fmt.Fprintf(w, "\"gw adv.\" > 1.00 means the gateway is better: gw/rp for throughput, rp/gw for latency, CPU and memory\n\n")
	fmt.Fprintf(w, "\"rounds\" is the spread of the per-round gw adv. (round i of one target against round i of the other)\n\n")
	const row = "%-46s %14s %14s %8s %12s  %-16s %s\n"
	fmt.Fprintf(w, row, "metric", "reverse_proxy", "llm_gateway", "gw adv.", "rounds", "target", "")
	fmt.Fprintln(w, strings.Repeat("-", 120))
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
		fmt.Fprintf(w, row, m.name, num(rp, m.prec), num(gw, m.prec), adv, m.spread(), m.target, verdict)
	}
	fmt.Fprintln(w, strings.Repeat("-", 120))
	for _, m := range r.metrics {
		if len(m.direct) > 0 {
			fmt.Fprintf(w, "upstream direct, %s: %s\n", strings.TrimSpace(m.name), num(median(m.direct), m.prec))
		}
		if len(m.floor) > 0 {
			lo, hi := slices.Min(m.floor), slices.Max(m.floor)
			fmt.Fprintf(w, "bench_floor (relays, nothing else), %s: %s (%s-%s); llm_gateway adds %s\n", strings.TrimSpace(m.name),
				num(median(m.floor), m.prec), num(lo, m.prec), num(hi, m.prec), num(median(m.gw)-median(m.floor), m.prec))
		}
	}
	fmt.Fprintf(w, "setup: throughput c=%v closed loop; latency open loop at %d req/s; TTFB %d sequential streams/round;\n",
		c.concurrency, c.rate, c.ttfbStreams)
	fmt.Fprintf(w, "       CPU %d streams/round per target at %d concurrent (x50 chunks, slices A B B A), and %d completions/round;\n",
		c.cpuStreams, c.cpuConcurrency, c.cpuCompletions)
	fmt.Fprintf(w, "       memory %d streams open at once, fresh Caddy per run\n", c.openStreams)
}

func (r *report) printHostile(w io.Writer) {
	if len(r.checks) == 0 {
		return
	}
	h := r.cfg.hostile
	fmt.Fprintf(w, "\nhostile mix, llm_gateway alone: max_fallbacks %d, max_attempts %d, 127.0.0.1\n", fallbackCap, attemptsCap)
	fmt.Fprintf(w, "%v of %d clients: body fallbacks at the cap to a failing upstream (401/403/404, or 503), %d+1 and\n",
		r.cfg.duration, h.workers, fallbackCap)
	fmt.Fprintf(w, "repeated lists, healthy streams, %.0f%% cancelled within %v, one slow reader; then %d open streams and\n",
		100*h.cancelShare, h.cancelWithin, r.cfg.openStreams)
	fmt.Fprintf(w, "%d slow uploaders (Content-Length %d, 17 bytes sent), fresh Caddy per round, medians of %d rounds\n\n",
		h.uploaders, h.uploadClaim, r.cfg.rounds)
	printChecks(w, r.checks)
}

func (r *report) printDoor(w io.Writer) {
	if len(r.door) == 0 {
		return
	}
	fmt.Fprintf(w, "\nthe door, llm_gateway alone: keys with rules on every route (issue 24), fresh counters, 127.0.0.1\n")
	fmt.Fprintf(w, "%d requests at once over /v1/, /v1/models, /upstream/ and the page's API; bursts of %d streams of %d-token\n",
		doorBurst, doorBurst, doorAnswer)
	fmt.Fprintf(w, "answers; case-variant streams; every operator action and forbidden /upstream/ request of every key with rules\n\n")
	printChecks(w, r.door)
}

func printChecks(w io.Writer, checks []check) {
	const row = "%-62s %14s  %-20s %s\n"
	fmt.Fprintf(w, row, "metric", "llm_gateway", "limit", "")
	fmt.Fprintln(w, strings.Repeat("-", 108))
	for _, c := range checks {
		verdict := ""
		if c.limit != "" {
			verdict = "FAIL"
			if c.pass {
				verdict = "PASS"
			}
		}
		fmt.Fprintf(w, row, c.name, c.value, c.limit, verdict)
	}
	fmt.Fprintln(w, strings.Repeat("-", 108))
}

func num(v float64, prec int) string {
	return fmt.Sprintf("%.*f", prec, v)
}
