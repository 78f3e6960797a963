//go:build unix

package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"
)

func printTrace(w io.Writer, o options, tr trace, rows []traceResult) {
	fmt.Fprintf(w, "\ntrace: %q x %d = %d requests, one every %v; engines %s, each loads %v, one at a time;\n",
		o.order, o.repeat, len(tr.models), o.interval, strings.Join(tr.engineNames(), " "), o.loadTime)
	fmt.Fprintf(w, "each a non-streaming chat completion in its own goroutine, waited for (client timeout %v)\n\n", o.clientTimeout)
	const row = "%-58s %7s %12s %12s %12s  %s\n"
	fmt.Fprintf(w, row, "target", "starts", "last answer", "p50 latency", "p95 latency", "failed")
	fmt.Fprintln(w, strings.Repeat("-", 118))
	for _, r := range rows {
		if r.unavailable != "" {
			fmt.Fprintf(w, "%-58s not available: %s\n", r.target, r.unavailable)
			continue
		}
		fmt.Fprintf(w, row, r.target, fmt.Sprint(r.starts), secs(r.lastAnswer), secs(r.p50), secs(r.p95),
			fmt.Sprintf("%d of %d", r.failed, r.requests))
	}
	fmt.Fprintln(w)
	for _, r := range rows {
		if r.unavailable != "" {
			continue
		}
		detail := []string{"starts " + counts(r.startsBy)}
		if r.crossCheck != "" {
			detail = append(detail, r.crossCheck)
		}
		if r.failed > 0 {
			detail = append(detail, "failed: "+counts(r.failures))
		}
		fmt.Fprintf(w, "  %s: %s\n", r.target, strings.Join(detail, "; "))
	}
	printGoals(w, rows)
}

// printGoals holds the scheduler's row to issue 29's goals against
// llama-swap's row of the same run.
func printGoals(w io.Writer, rows []traceResult) {
	var sched, ls *traceResult
	for i := range rows {
		switch {
		case rows[i].target == variantMemory.label:
			sched = &rows[i]
		case strings.HasPrefix(rows[i].target, "llama-swap"):
			ls = &rows[i]
		}
	}
	fmt.Fprintln(w)
	switch {
	case sched == nil || ls == nil:
		fmt.Fprintln(w, "goals of issue 29: not judged (needs the gw-memory and llama-swap targets)")
		return
	case sched.unavailable != "" || ls.unavailable != "":
		fmt.Fprintln(w, "goals of issue 29: pending (a target is not available)")
		return
	}
	fmt.Fprintln(w, "goals of issue 29, the scheduler against llama-swap on this run:")
	judge := func(name string, got, ref, limit float64, unit string) {
		verdict := "FAIL"
		if got <= limit*ref {
			verdict = "PASS"
		}
		fmt.Fprintf(w, "  %-24s %8.1f%s vs %8.1f%s  <= %.1fx: %s\n", name, got, unit, ref, unit, limit, verdict)
	}
	judge("engine starts", float64(sched.starts), float64(ls.starts), 0.8, "")
	judge("p95 latency", sched.p95.Seconds(), ls.p95.Seconds(), 0.8, " s")
	judge("time to the last answer", sched.lastAnswer.Seconds(), ls.lastAnswer.Seconds(), 1.0, " s")
	verdict := "FAIL"
	if sched.failed == 0 {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "  %-24s %d of %d: %s\n", "failed (goal 0)", sched.failed, sched.requests, verdict)
}

func printPriority(w io.Writer, o options, rows []priorityResult) {
	fmt.Fprintf(w, "\npriorities: engine A (max_concurrent 1, queue 64), %d batch streams back to back for %v,\n", o.batchClients, o.priorityFor)
	fmt.Fprintln(w, "an interactive stream once a second; queue wait = sent -> first data event")
	fmt.Fprintln(w)
	const row = "%-48s %10s %10s %10s %10s %8s  %s\n"
	fmt.Fprintf(w, row, "variant", "alone", "int. p50", "int. p95", "int. max", "batch", "failed")
	fmt.Fprintln(w, strings.Repeat("-", 110))
	for _, r := range rows {
		if r.unavailable != "" {
			fmt.Fprintf(w, "%-48s not available: %s\n", r.label, r.unavailable)
			continue
		}
		var p50, p95, worst time.Duration
		if n := len(r.waits); n > 0 {
			p50, p95, worst = percentile(r.waits, 50), percentile(r.waits, 95), r.waits[n-1]
		}
		failed := fmt.Sprint(r.failed)
		if r.failed > 0 {
			failed += " (" + counts(r.failures) + ")"
		}
		fmt.Fprintf(w, row, r.label, secs(r.alone), secs(p50), secs(p95), secs(worst), fmt.Sprint(r.batchDone), failed)
	}
	for _, r := range rows {
		if r.unavailable == "" {
			fmt.Fprintf(w, "\n%s: %d interactive streams; one stream holds A for %s (alone, sent -> [DONE]);\n", r.label, len(r.waits), secs(r.service))
			fmt.Fprintf(w, "  issue 29's goal for the priority variant: interactive p95 queue wait <= one swap (%v)\n", o.loadTime)
			break
		}
	}
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2f s", d.Seconds()) }

// counts writes a tally as "a 3, b 1", largest first.
func counts(m map[string]int) string {
	keys := slices.Sorted(maps.Keys(m))
	slices.SortStableFunc(keys, func(a, b string) int { return m[b] - m[a] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, m[k])
	}
	return strings.Join(parts, ", ")
}
