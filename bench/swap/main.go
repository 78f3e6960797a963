//go:build unix

// Command swap measures how well a gateway shares one GPU between models that
// do not fit together: engines that take a scripted time to load
// (the gateway binary's demo engine, --load-time), only one running at a time,
// and a request trace in which the models alternate. It plays the same trace
// against each target and prints, per target, the engine starts, the time
// from the first request to the last answer, p50/p95 latency and the failed
// requests. Targets:
//
//	gw-group    this gateway, the engines in one exclusive `group` (today's way)
//	gw-memory   this gateway, `memory 1` per engine and `memory_budget 1` (the
//	            scheduler of issue 29); "not available" while the config does
//	            not adapt
//	gw-sleep    gw-memory with `swap sleep`: an evicted engine sleeps
//	            (the demo engine's -wake-time, -sleep-time) instead of stopping
//	llama-swap  llama-swap (-llama-swap names its binary), the engines in one
//	            group with swap: true, exclusive: true
//
// Every engine is started through `sh -c 'echo <model> $$ >> starts.log; exec
// …'`, so every target's starts are counted the same way (and no engine can
// outlive the run unnoticed: the pids are in the same file).
//
// A second scenario, priorities, runs against this gateway only: a batch key
// saturating model A while an interactive key asks A once a second, with and
// without the scheduler's `priority` per key.
//
// A third, warm (warm.go): the time of a swap between two
// sleep-capable engines against their cold start, and the prompt tokens an
// engine processes for a conversation resumed after it was swapped out,
// with and without `slots save`.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"
)

type options struct {
	caddyBin, llamaSwap, outDir string
	llamaSwapLimit              int
	targets, phases             []string

	order         string
	repeat        int
	interval      time.Duration
	loadTime      time.Duration
	clientTimeout time.Duration

	batchClients int
	priorityFor  time.Duration
	chunkDelay   time.Duration

	wakeTime, sleepTime time.Duration // the demo engine's scripted sleep mode (warm.go)
	swaps, turns        int
	prefillPerToken     time.Duration
}

var allTargets = []string{"gw-group", "gw-memory", "gw-sleep", "llama-swap"}

func main() {
	var o options
	var targets, phases string
	flag.StringVar(&o.caddyBin, "caddy", "bench/out/caddy", "Caddy binary built from ./cmd/caddy (also the demo engine)")
	flag.StringVar(&o.llamaSwap, "llama-swap", "", "llama-swap binary; empty skips that target")
	flag.IntVar(&o.llamaSwapLimit, "llama-swap-limit", 0, "llama-swap's concurrencyLimit per model; 0 leaves its default (10, waiting requests included: the 11th gets 429)")
	flag.StringVar(&o.outDir, "out", "bench/out", "directory for configs, logs and starts.log (one subdirectory per target)")
	flag.StringVar(&targets, "targets", strings.Join(allTargets, ","), "targets of the trace")
	flag.StringVar(&phases, "phases", "trace,priority,warm", "trace, priority, warm (issue 26), comma-separated")
	flag.DurationVar(&o.wakeTime, "wake-time", 100*time.Millisecond, "warm, gw-sleep: the demo engine's scripted wake (vLLM level 1: 0.1-0.4 s against 30-100+ s cold)")
	flag.DurationVar(&o.sleepTime, "sleep-time", 50*time.Millisecond, "warm, gw-sleep: the demo engine's scripted sleep")
	flag.IntVar(&o.swaps, "swaps", 10, "warm: swaps measured per mode")
	flag.IntVar(&o.turns, "turns", 8, "warm: turns of the resumed conversation")
	flag.DurationVar(&o.prefillPerToken, "prefill-per-token", 500*time.Microsecond, "warm: the demo engine's time per prompt token it processes")
	flag.StringVar(&o.order, "order", "A B A A C A B C", "one round of the trace: the model of each request")
	flag.IntVar(&o.repeat, "repeat", 8, "rounds of -order (50 for the long trace)")
	flag.DurationVar(&o.interval, "interval", 250*time.Millisecond, "time between two arrivals")
	flag.DurationVar(&o.loadTime, "load-time", 2*time.Second, "each engine's scripted load time")
	flag.DurationVar(&o.clientTimeout, "client-timeout", 5*time.Minute, "how long a client waits for one answer")
	flag.IntVar(&o.batchClients, "batch-clients", 8, "priorities: concurrent batch streams")
	flag.DurationVar(&o.priorityFor, "priority-duration", 20*time.Second, "priorities: how long the batch runs")
	flag.DurationVar(&o.chunkDelay, "chunk-delay", 40*time.Millisecond, "priorities: the engine's pause between chunks (sets how long one stream holds A)")
	flag.Parse()
	o.targets, o.phases = splitList(targets), splitList(phases)
	if err := check(o); err != nil {
		fmt.Fprintln(os.Stderr, "swap:", err)
		os.Exit(2)
	}

	tr := newTrace(o.order, o.repeat, o.interval)
	budget := time.Duration(len(o.targets))*(time.Duration(len(tr.models))*o.interval+o.clientTimeout+time.Minute) +
		2*(o.priorityFor+o.clientTimeout) + 4*o.clientTimeout // warm: four gateways
	ctx, cancel := context.WithTimeout(context.Background(), budget)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o, tr); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "swap: interrupted, everything stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "swap:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

func check(o options) error {
	for _, t := range o.targets {
		if !slices.Contains(allTargets, t) {
			return fmt.Errorf("unknown target %q (have %s)", t, strings.Join(allTargets, ", "))
		}
	}
	for _, p := range o.phases {
		if p != "trace" && p != "priority" && p != "warm" {
			return fmt.Errorf("unknown phase %q (have trace, priority, warm)", p)
		}
	}
	if len(strings.Fields(o.order)) == 0 || o.repeat < 1 || o.interval <= 0 {
		return errors.New("the trace is empty: check -order, -repeat and -interval")
	}
	if _, err := os.Stat(o.caddyBin); err != nil {
		return fmt.Errorf("-caddy: %v", err)
	}
	return nil
}

func run(ctx context.Context, o options, tr trace) error {
	if slices.Contains(o.phases, "trace") {
		var rows []traceResult
		for _, t := range o.targets {
			fmt.Fprintf(os.Stderr, "swap: trace against %s ...\n", t)
			r, err := runTarget(ctx, o, t, tr)
			if err != nil {
				return fmt.Errorf("%s: %v", t, err)
			}
			rows = append(rows, r)
		}
		printTrace(os.Stdout, o, tr, rows)
	}
	if slices.Contains(o.phases, "priority") {
		var rows []priorityResult
		for _, v := range []priorityVariant{priorityFIFO, priorityKeys} {
			fmt.Fprintf(os.Stderr, "swap: priorities, %s ...\n", v.label)
			r, err := runPriority(ctx, o, v)
			if err != nil {
				return fmt.Errorf("priorities, %s: %v", v.name, err)
			}
			rows = append(rows, r)
		}
		printPriority(os.Stdout, o, rows)
	}
	if slices.Contains(o.phases, "warm") {
		if err := runWarm(ctx, o); err != nil {
			return fmt.Errorf("warm: %v", err)
		}
	}
	return nil
}

func runTarget(ctx context.Context, o options, name string, tr trace) (traceResult, error) {
	switch name {
	case "gw-group":
		return runGateway(ctx, o, variantGroup, tr)
	case "gw-memory":
		return runGateway(ctx, o, variantMemory, tr)
	case "gw-sleep":
		return runGateway(ctx, o, sleepVariant(o), tr)
	}
	if o.llamaSwap == "" {
		return traceResult{target: "llama-swap", unavailable: "no binary: set LLAMA_SWAP (or -llama-swap)"}, nil
	}
	return runLlamaSwap(ctx, o, tr)
}

func writeFile(path, content string) error { return os.WriteFile(path, []byte(content), 0o644) }
