//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"
)

// poolScenario is a pool of two demo engines with hedge_after auto.
type poolScenario struct {
	name, pool string
	members    [2]string
	flags      [2]string // demo engine flags of each member
}

var poolScenarios = []poolScenario{
	{name: "one member holds its first token 5 s on every 10th completion", pool: "slowpool",
		members: [2]string{"slowa", "slowb"}, flags: [2]string{"--first-token-delay 5s --slow-every 10", ""}},
	{name: "both members healthy", pool: "okpool", members: [2]string{"oka", "okb"}},
}

// poolResult is what one scenario measured over its timed requests.
type poolResult struct {
	sc                 poolScenario
	n, failed          int
	p50, p99, max      time.Duration
	hedges, hedgeWon   float64 // hedged requests, and those the hedge won
	replays, retries   float64
	loserSum, loserCnt float64
	slowAnswers        int // timed requests that took 4 s or more
}

type poolReport struct {
	warm    int
	results []poolResult
}

func runPools(ctx context.Context, o options) (*poolReport, error) {
	var body string
	for _, sc := range poolScenarios {
		for i, m := range sc.members {
			body += engineBlock(m, "http://127.0.0.1:{engine.port}",
				fmt.Sprintf("cmd {gateway.executable} llm-demo-engine --port {engine.port} --model %s %s", m, sc.flags[i]),
				"models "+m, "preload")
		}
		body += fmt.Sprintf("\t\tpool %s {\n\t\t\tmember %s\n\t\t\tmember %s\n\t\t\thedge_after auto\n\t\t}\n",
			sc.pool, sc.members[0], sc.members[1])
	}
	g, err := startGateway(ctx, o, "pools", body)
	if err != nil {
		return nil, err
	}
	defer g.proc.Stop(5 * time.Second)
	rep := &poolReport{warm: o.poolWarm}
	for _, sc := range poolScenarios {
		// the preloaded engines: wait until both answer through the gateway
		for _, m := range sc.members {
			deadline := time.Now().Add(30 * time.Second)
			for s := chat(ctx, g.site, m, "ready?", 10*time.Second); s.err != nil || s.cut; s = chat(ctx, g.site, m, "ready?", 10*time.Second) {
				if time.Now().After(deadline) || ctx.Err() != nil {
					return nil, fmt.Errorf("%s not answering: %v", m, s.err)
				}
				time.Sleep(200 * time.Millisecond)
			}
		}
		progress("pool %s: %s", sc.pool, sc.name)
		for i := range o.poolWarm {
			if s := chat(ctx, g.site, sc.pool, fmt.Sprintf("warm-up %d: hello", i), o.limit); s.err != nil {
				return nil, fmt.Errorf("warming %s: %v", sc.pool, s.err)
			}
		}
		engines := map[string]bool{sc.pool: true, sc.members[0]: true, sc.members[1]: true}
		before, err := scrape(ctx, g.admin, engines)
		if err != nil {
			return nil, err
		}
		r := poolResult{sc: sc, n: o.poolN}
		var ttft []time.Duration
		for i := range o.poolN {
			// a prompt of its own: the pool's prefix affinity does not pin one member
			s := chat(ctx, g.site, sc.pool, fmt.Sprintf("request %d: hello", i), o.limit)
			if s.err != nil || s.cut {
				r.failed++
				continue
			}
			ttft = append(ttft, s.firstContent)
			if s.firstContent >= 4*time.Second {
				r.slowAnswers++
			}
		}
		after, err := scrape(ctx, g.admin, engines)
		if err != nil {
			return nil, err
		}
		d := func(k string) float64 { return after[k] - before[k] }
		r.hedges, r.hedgeWon = d("llm_gateway_hedges_total"), d("llm_gateway_hedges_total/hedge")
		r.replays, r.retries = d("llm_gateway_replays_total"), d("llm_gateway_retries_total")
		r.loserSum, r.loserCnt = d("llm_gateway_hedge_loser_seconds_sum"), d("llm_gateway_hedge_loser_seconds_count")
		if len(ttft) > 0 {
			slices.Sort(ttft)
			q := func(p float64) time.Duration { return ttft[min(len(ttft)-1, int(p*float64(len(ttft))))] }
			r.p50, r.p99, r.max = q(0.5), q(0.99), ttft[len(ttft)-1]
		}
		progress("  p50 %s p99 %s max %s, %.0f hedged, %d failed", dur(r.p50), dur(r.p99), dur(r.max), r.hedges, r.failed)
		rep.results = append(rep.results, r)
	}
	return rep, nil
}

func (p *poolReport) print(w io.Writer) {
	fmt.Fprintf(w, "\n## Hedging in a pool of two demo engines (hedge_after auto, hedge_budget default), after %d warm-up requests\n\n", p.warm)
	fmt.Fprintln(w, "| pool | requests | TTFT p50 | TTFT p99 | TTFT max | answers ≥ 4 s | hedged (share) | won by the hedge | extra attempts (hedges + replays + retries) | loser disconnected after the win, mean | failed |")
	fmt.Fprintln(w, "|---|---|---|---|---|---|---|---|---|---|---|")
	for _, r := range p.results {
		loser := "none lost"
		if r.loserCnt > 0 {
			loser = fmt.Sprintf("%s (%.0f losers)", dur(time.Duration(r.loserSum/r.loserCnt*1e9)), r.loserCnt)
		}
		extra := r.hedges + r.replays + r.retries
		fmt.Fprintf(w, "| %s | %d | %s | %s | %s | %d | %.0f (%.1f %%) | %.0f | %.0f (%.1f %%) | %s | %d |\n",
			r.sc.name, r.n, dur(r.p50), dur(r.p99), dur(r.max), r.slowAnswers, r.hedges, 100*r.hedges/float64(r.n),
			r.hedgeWon, extra, 100*extra/float64(r.n), loser, r.failed)
	}
}
