//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
)

// besideGoal is issue 30's: the hostile mix running beside moves none of
// the stream figures by more than 10 %. Every figure moves far more than
// that for both targets (the mix takes most of the machine), so it is read
// as a ratio, as the other goals are: beside the mix, the gateway's
// figure is within 10 % of reverse_proxy's (their goal, <= stock, moved by
// no more than 10 %). How far the gw adv. itself moved is shown beside it.
const besideGoal = 0.10

// besideFigures are the rows the goal is held to: the prefixes of their
// names. The CPU and system calls per chunk are the Caddy process's, and
// beside they include the mix's own, which the process serves at the same
// time: shown, not held to it.
var besideFigures = []string{"latency p99", "stream TTFB p99"}

// mixBeside is what the mix's clients saw while the phases ran beside it.
type mixBeside struct {
	requests, cancelled, unexpected int64
	slowReads, slowCut              int64 // the slow reader's streams, and those not whole
}

// besidePhases runs the benchmark Caddy's phases (mainPhases) a second time,
// into a report of their own, while h.workers clients send the hostile mix
// (hostile.go) to the gateway site on e.mixPort in the same Caddy and a slow
// reader reads a padded stream from it, over and over. r keeps that report
// and what the mix saw, for printBeside.
func besidePhases(ctx context.Context, e *env, c config, r *report, mainPhases func(*report) error) error {
	url, h := e.url(e.mixPort), c.hostile
	client, tr := newClient(h.workers + 1)
	defer tr.CloseIdleConnections()
	if err := completeOnce(ctx, client, url); err != nil {
		return fmt.Errorf("the mix's site: %v", err)
	}
	mix, stop := context.WithCancel(ctx)
	defer stop()
	var m mixBeside
	var wg sync.WaitGroup
	wg.Go(func() {
		mixClients(mix, mix, client, url, h, 30, "beside", func(res mixResult) {
			if mix.Err() != nil {
				return // stopped: this one's answer is cut by us
			}
			atomic.AddInt64(&m.requests, 1)
			switch {
			case res.cancelled:
				atomic.AddInt64(&m.cancelled, 1)
			case !res.expected():
				atomic.AddInt64(&m.unexpected, 1)
			}
		})
	})
	wg.Go(func() {
		for mix.Err() == nil {
			err := slowReader(mix, url, h)
			if mix.Err() != nil {
				return
			}
			m.slowReads++
			if err != nil {
				m.slowCut++
			}
		}
	})
	progress("beside: %d clients send the hostile mix to %s while the phases run again", h.workers, url)
	rb := &report{cfg: c}
	err := mainPhases(rb)
	stop()
	wg.Wait()
	if err != nil {
		return err
	}
	r.beside, r.mix = rb, &m
	for k, n := range rb.fails {
		r.failures(k, "(beside)", n)
	}
	for _, n := range rb.notes {
		r.note("beside: %s", n)
	}
	progress("beside: the mix sent %d requests (%d cancelled by their clients, %d with another answer than their kind must get); the slow reader read %d streams, %d cut",
		m.requests, m.cancelled, m.unexpected, m.slowReads, m.slowCut)
	return nil
}

// printBeside compares each figure measured both quietly and with the mix
// beside, and holds besideFigures to besideGoal.
func (r *report) printBeside(w io.Writer) {
	if r.beside == nil {
		return
	}
	fmt.Fprintf(w, "\nwith the hostile mix beside (%d clients against another gateway site in the same Caddy, as in the hostile phase):\n", r.cfg.hostile.workers)
	fmt.Fprintf(w, "medians of %d rounds each; \"moved\" is gw adv. beside / gw adv. quiet - 1 (below 0: the mix costs the gateway more than reverse_proxy);\n", r.cfg.rounds)
	fmt.Fprintf(w, "\"rounds\" is the spread of the per-round gw adv. beside; the target: beside the mix, the gateway within %.0f%% of reverse_proxy\n\n", 100*besideGoal)
	const row = "%-42s %9s %9s %9s %9s %7s %7s %7s %12s  %-15s %s\n"
	fmt.Fprintf(w, row, "metric", "rp quiet", "gw quiet", "rp beside", "gw beside", "quiet", "beside", "moved", "rounds", "target", "")
	fmt.Fprintln(w, strings.Repeat("-", 146))
	for _, q := range r.metrics {
		b := r.beside.metric(q.name)
		if b == nil || len(q.rp) == 0 || len(q.gw) == 0 || len(b.rp) == 0 || len(b.gw) == 0 {
			continue
		}
		qrp, qgw, brp, bgw := median(q.rp), median(q.gw), median(b.rp), median(b.gw)
		qa, ba := q.advantage(qrp, qgw), b.advantage(brp, bgw)
		moved := ba/qa - 1
		target, verdict := "", ""
		for _, p := range besideFigures {
			if strings.HasPrefix(q.name, p) {
				target, verdict = fmt.Sprintf("gw <= %.2fx rp", 1+besideGoal), "FAIL"
				if bgw <= (1+besideGoal)*brp {
					verdict = "PASS"
				}
			}
		}
		fmt.Fprintf(w, row, q.name, num(qrp, q.prec), num(qgw, q.prec), num(brp, q.prec), num(bgw, q.prec),
			fmt.Sprintf("%.2fx", qa), fmt.Sprintf("%.2fx", ba), fmt.Sprintf("%+.0f%%", 100*moved), b.spread(), target, verdict)
	}
	fmt.Fprintln(w, strings.Repeat("-", 146))
	fmt.Fprintln(w, "CPU and system calls per chunk are the Caddy process's: beside, they include what the mix costs it")
	m := r.mix
	fmt.Fprintf(w, "the mix: %d requests, %d cancelled by their clients, %d with another answer than their kind must get; slow reader: %d streams, %d cut\n",
		m.requests, m.cancelled, m.unexpected, m.slowReads, m.slowCut)
}

// metric is the row named name, or nil.
func (r *report) metric(name string) *metric {
	for _, m := range r.metrics {
		if m.name == name {
			return m
		}
	}
	return nil
}
