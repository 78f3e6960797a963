//go:build unix

// Command load benchmarks llm_gateway against Caddy's stock reverse_proxy: it
// starts the fake upstream and one Caddy serving both (two sites in front of
// that same upstream), runs every measurement on both targets in interleaved
// rounds whose order alternates (rp,gw then gw,rp, …: on a small machine the
// second of two back-to-back runs tends to be slower), and prints the medians
// and their ratios. bench/run.sh builds the binaries and runs it.
//
// Everything it starts it stops, on success, failure or Ctrl-C; a child also
// dies with it if it is killed. It sends traffic to 127.0.0.1 only.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

type config struct {
	rounds         int
	duration       time.Duration
	concurrency    []int
	rate           int
	ttfbStreams    int
	cpuStreams     int
	cpuConcurrency int
	openStreams    int
	openChunkDelay time.Duration
	phases         map[string]bool
}

func main() {
	os.Exit(run())
}

func run() int {
	var c config
	e := &env{}
	flag.StringVar(&e.caddyBin, "caddy", "bench/out/caddy", "Caddy binary built from ./cmd/caddy")
	flag.StringVar(&e.upstreamBin, "upstream", "bench/out/fakeupstream", "fake upstream binary")
	flag.StringVar(&e.outDir, "out", "bench/out", "directory for the Caddyfile and logs")
	flag.IntVar(&c.rounds, "rounds", 5, "rounds per measurement; medians are reported")
	flag.DurationVar(&c.duration, "duration", 3*time.Second, "length of each timed run (throughput, latency)")
	conc := flag.String("concurrency", "16,64", "closed-loop concurrencies for throughput")
	flag.IntVar(&c.rate, "rate", 500, "open-loop request rate (req/s) for latency")
	flag.IntVar(&c.ttfbStreams, "ttfb-streams", 1000, "sequential streams per target per round for TTFB")
	flag.IntVar(&c.cpuStreams, "cpu-streams", 2000, "streams per target per round for CPU per chunk")
	flag.IntVar(&c.cpuConcurrency, "cpu-concurrency", 8, "streams at a time for CPU per chunk")
	flag.IntVar(&c.openStreams, "open-streams", 1000, "streams held open at once for memory per stream")
	flag.DurationVar(&c.openChunkDelay, "open-chunk-delay", 60*time.Millisecond, "upstream pause between chunks while streams are held open (50 chunks: ~3s)")
	phases := flag.String("phases", "throughput,latency,stream,cpu,memory", "measurements to run")
	maxTime := flag.Duration("max-time", 20*time.Minute, "give up after this long")
	flag.Parse()

	var err error
	if c.concurrency, err = parseInts(*conc); err != nil || c.rounds < 1 || c.rate < 1 || c.duration <= 0 {
		fmt.Fprintln(os.Stderr, "load: bad flags")
		return 2
	}
	c.phases = map[string]bool{}
	for p := range strings.SplitSeq(*phases, ",") {
		c.phases[strings.TrimSpace(p)] = true
	}

	ctx, cancel := context.WithTimeout(context.Background(), *maxTime)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()

	defer e.stop()
	r := &report{cfg: c}
	if err := benchmark(ctx, e, c, r); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "load: interrupted, stopping Caddy and the upstream")
			return 130
		}
		fmt.Fprintln(os.Stderr, "load:", err)
		return 1
	}
	r.print(os.Stdout)
	return 0
}

// target is one thing under load: a Caddy site or the upstream itself.
type target struct {
	name string
	url  string
}

func benchmark(ctx context.Context, e *env, c config, r *report) error {
	if err := e.start(ctx); err != nil {
		return err
	}
	if err := e.startCaddy(ctx); err != nil {
		return err
	}
	direct := target{"upstream", e.url(e.upPort)}
	rp := target{"reverse_proxy", e.url(e.rpPort)}
	gw := target{"llm_gateway", e.url(e.gwPort)}
	for _, t := range []target{direct, rp, gw} {
		if err := sanityCheck(ctx, t); err != nil {
			return err
		}
	}
	pid := e.caddy.PID()
	progress("caddy pid %d; upstream %s, reverse_proxy %s, llm_gateway %s", pid, direct.url, rp.url, gw.url)

	// order gives the round's two targets: rp first in even rounds, gw first in odd ones
	order := func(round int) []target {
		if round%2 == 0 {
			return []target{rp, gw}
		}
		return []target{gw, rp}
	}
	pair := func(m *metric, t target, v float64) {
		if t.name == rp.name {
			m.rp = append(m.rp, v)
		} else {
			m.gw = append(m.gw, v)
		}
	}

	if c.phases["throughput"] {
		for _, conc := range c.concurrency {
			m := r.add(&metric{name: fmt.Sprintf("throughput c=%d (req/s)", conc), higherBetter: true,
				target: ">= 1.00x stock", pass: func(rp, gw float64) bool { return gw >= rp }})
			for round := range c.rounds {
				for _, t := range order(round) {
					rps, failed := throughput(ctx, t.url, conc, c.duration)
					if ctx.Err() != nil {
						return ctx.Err()
					}
					r.failures(t.name, "throughput", failed)
					pair(m, t, rps)
					progress("throughput c=%d round %d/%d %-13s %8.0f req/s", conc, round+1, c.rounds, t.name, rps)
				}
			}
		}
	}

	if c.phases["latency"] {
		p50 := r.add(&metric{name: fmt.Sprintf("latency p50 @%d req/s (us)", c.rate), direct: []float64{}})
		added := r.add(&metric{name: "  added p50 vs upstream direct (us)"})
		p99 := r.add(&metric{name: fmt.Sprintf("latency p99 @%d req/s (us)", c.rate), direct: []float64{}})
		for round := range c.rounds {
			d50, d99, failed, dropped := latency(ctx, direct.url, c.rate, c.duration)
			r.failures(direct.name, "latency", int64(failed+dropped))
			p50.direct, p99.direct = append(p50.direct, us(d50)), append(p99.direct, us(d99))
			progress("latency round %d/%d %-13s p50 %6.0f us  p99 %6.0f us", round+1, c.rounds, direct.name, us(d50), us(d99))
			for _, t := range order(round) {
				l50, l99, failed, dropped := latency(ctx, t.url, c.rate, c.duration)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.failures(t.name, "latency", int64(failed+dropped))
				pair(p50, t, us(l50))
				pair(p99, t, us(l99))
				pair(added, t, us(l50-d50))
				progress("latency round %d/%d %-13s p50 %6.0f us  p99 %6.0f us", round+1, c.rounds, t.name, us(l50), us(l99))
			}
		}
	}

	if c.phases["stream"] {
		ttfb := r.add(&metric{name: "stream TTFB p50 (us)", direct: []float64{},
			target: "within 5%", pass: func(rp, gw float64) bool { return gw <= rp*1.05 }})
		total := r.add(&metric{name: "stream 50 chunks total p50 (us)", direct: []float64{}})
		for round := range c.rounds {
			f, t, failed := streamLatency(ctx, direct.url, c.ttfbStreams)
			r.failures(direct.name, "stream", int64(failed))
			ttfb.direct, total.direct = append(ttfb.direct, us(f)), append(total.direct, us(t))
			for _, tg := range order(round) {
				f, t, failed := streamLatency(ctx, tg.url, c.ttfbStreams)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r.failures(tg.name, "stream", int64(failed))
				pair(ttfb, tg, us(f))
				pair(total, tg, us(t))
				progress("stream round %d/%d %-13s TTFB %6.0f us  total %6.0f us", round+1, c.rounds, tg.name, us(f), us(t))
			}
		}
	}

	if c.phases["cpu"] {
		cpu := r.add(&metric{name: "Caddy CPU per chunk (us)", prec: 2,
			target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }})
		for round := range c.rounds {
			for _, t := range order(round) {
				res, err := streamCPU(ctx, t.url, pid, c.cpuStreams, c.cpuConcurrency)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return fmt.Errorf("cpu per chunk, %s: %v", t.name, err)
				}
				r.failures(t.name, "cpu", res.failed)
				pair(cpu, t, us(res.perChunk))
				progress("cpu round %d/%d %-13s %5.2f us/chunk (%v CPU over %d chunks)",
					round+1, c.rounds, t.name, us(res.perChunk), res.cpu, res.chunks)
			}
		}
	}

	if c.phases["memory"] {
		// each target in a Caddy of its own, started fresh: Go keeps freed
		// memory for reuse, so a process that already held 1000 streams of the
		// other target would show this one's cost too low
		e.stopCaddy()
		mem := r.add(&metric{name: fmt.Sprintf("RSS per open stream, %d open (KB)", c.openStreams), prec: 1,
			target: "<= 100 KB", pass: func(rp, gw float64) bool { return gw <= 100 }})
		for round := range c.rounds {
			for _, t := range order(round) {
				res, err := openStreamsInFreshCaddy(ctx, e, t, c)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return fmt.Errorf("open streams, %s: %v", t.name, err)
				}
				r.failures(t.name, "memory", int64(res.failed))
				if res.endedEarly > 0 {
					r.note("%s: %d streams ended before memory was sampled; raise -open-chunk-delay", t.name, res.endedEarly)
				}
				pair(mem, t, res.perStreamKB)
				progress("memory round %d/%d %-13s %6.1f KB/stream (VmRSS %d KB idle, %d KB with %d open)",
					round+1, c.rounds, t.name, res.perStreamKB, res.baseKB, res.peakKB, c.openStreams)
			}
		}
	}
	return nil
}

func openStreamsInFreshCaddy(ctx context.Context, e *env, t target, c config) (openResult, error) {
	if err := e.startCaddy(ctx); err != nil {
		return openResult{}, err
	}
	defer e.stopCaddy()
	return openStreams(ctx, t.url, e.caddy.PID(), c.openStreams, c.openChunkDelay)
}

// sanityCheck makes sure t answers a completion and a full 50-chunk stream
// before anything is timed.
func sanityCheck(ctx context.Context, t target) error {
	client, tr := newClient(1)
	defer tr.CloseIdleConnections()
	if err := harness.RequireLoopback(t.url); err != nil {
		return err
	}
	if err := completeOnce(ctx, client, t.url); err != nil {
		return fmt.Errorf("%s: completion: %v", t.name, err)
	}
	res := streamOnce(ctx, client, t.url, 0, nil)
	if res.err != nil {
		return fmt.Errorf("%s: stream: %v", t.name, res.err)
	}
	if res.chunks != 50 {
		return fmt.Errorf("%s: stream delivered %d chunks, want 50", t.name, res.chunks)
	}
	return nil
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func parseInts(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("bad number %q", f)
		}
		out = append(out, n)
	}
	return out, nil
}
