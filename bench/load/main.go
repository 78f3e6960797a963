//go:build unix

// Command load benchmarks llm_gateway against Caddy's stock reverse_proxy: it
// starts the fake upstream and one Caddy serving both (two sites in front of
// that same upstream), runs every measurement on both targets in interleaved
// rounds whose order alternates (rp,gw then gw,rp, …: on a small machine the
// second of two back-to-back runs tends to be slower), and prints the medians
// and their ratios. The hostile phase then runs against llm_gateway alone and
// asserts issue 13's limits: the program exits 1 if one is exceeded.
// bench/run.sh builds the binaries and runs it.
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
	"path/filepath"
	"slices"
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
	cpuCompletions int
	openStreams    int
	openChunkDelay time.Duration
	// the translation phase: streams held open at once per target for RSS
	transOpenStreams int
	many             manyConfig
	profiles         bool // save Caddy's heap and goroutine profiles while streams are held
	phases           map[string]bool
	hostile          hostileConfig
	// beside: the throughput to syscalls phases run a second time with the
	// hostile mix against another gateway site in the same Caddy (beside.go)
	beside bool
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
	flag.IntVar(&c.cpuStreams, "cpu-streams", 4000, "streams per target per round for CPU per chunk (two slices, A B B A)")
	flag.IntVar(&c.cpuConcurrency, "cpu-concurrency", 8, "streams (completions) at a time for CPU per chunk (per completion)")
	flag.IntVar(&c.cpuCompletions, "cpu-completions", 20000, "non-streaming completions per target per round for CPU per completion (two slices, A B B A)")
	flag.IntVar(&c.openStreams, "open-streams", 1000, "streams held open at once for memory per stream")
	flag.DurationVar(&c.openChunkDelay, "open-chunk-delay", 60*time.Millisecond, "upstream pause between chunks while streams are held open (50 chunks: ~3s)")
	flag.IntVar(&c.transOpenStreams, "trans-open-streams", 500, "translation phase: streams held open at once per target for RSS per stream (at -open-chunk-delay)")
	flag.IntVar(&c.many.n, "many-streams", 10_000, "manystreams phase: streams held open at once")
	flag.DurationVar(&c.many.chunkDelay, "many-chunk-delay", time.Second, "manystreams phase: upstream pause between chunks (50 chunks: ~50 s)")
	flag.IntVar(&c.many.rate, "many-rate", 1000, "manystreams phase: streams opened per second (2000 takes this 2-core machine past what it can serve while the streams pile up: see bench/README.md)")
	flag.DurationVar(&c.many.hold, "many-hold", 5*time.Second, "manystreams phase: CPU is measured over this long once all are open")
	flag.StringVar(&c.many.proto, "many-proto", "auto", "manystreams phase: the client's protocol to Caddy, h1, h2c or auto (h1 when Caddy's file limit holds two connections per stream)")
	flag.BoolVar(&c.profiles, "profiles", false, "memory, manystreams and translation phases: save Caddy's heap and goroutine profiles while the streams are held (manystreams: also its CPU profile over a second hold), into -out as <phase>-<target>-{heap,goroutine,cpu}.pprof")
	flag.IntVar(&c.hostile.workers, "hostile-workers", 32, "hostile mix: clients at once")
	flag.Float64Var(&c.hostile.cancelShare, "hostile-cancel", 0.25, "hostile mix: share of requests cancelled at a random moment")
	flag.DurationVar(&c.hostile.cancelWithin, "hostile-cancel-within", 50*time.Millisecond, "hostile mix: a cancel comes this soon after sending, at most")
	flag.DurationVar(&c.hostile.failDelay, "hostile-fail-delay", 5*time.Millisecond, "hostile mix: the failing upstream's pause before each answer")
	flag.DurationVar(&c.hostile.idle, "hostile-idle", time.Second, "hostile mix: stream_idle_timeout of the healthy engine")
	flag.DurationVar(&c.hostile.slowPause, "slow-pause", 2500*time.Millisecond, "hostile mix: how long the slow reader stops reading")
	flag.IntVar(&c.hostile.slowPad, "slow-pad", 64<<10, "hostile mix: bytes added to each chunk of the slow reader's stream, at least (raised to twice what socket buffers hold)")
	flag.IntVar(&c.hostile.uploaders, "uploaders", 300, "slow uploaders held open at once")
	flag.Int64Var(&c.hostile.uploadClaim, "upload-claim", 1<<20, "the Content-Length each slow uploader announces (more than 100: 100 is the control)")
	flag.BoolVar(&c.beside, "beside", false, "run the throughput, latency, stream, cpu and syscalls phases again with the hostile mix running against another gateway site in the same Caddy, and print how far each figure moved")
	phases := flag.String("phases", "throughput,latency,stream,cpu,memory,hostile", "measurements to run (also: syscalls, manystreams, translation; door, transstreams: that part of the hostile phase alone)")
	maxTime := flag.Duration("max-time", 20*time.Minute, "give up after this long")
	flag.Parse()

	var err error
	c.hostile.slowPad, c.hostile.slowBound = slowStreamPad(c.hostile.slowPad)
	h := c.hostile
	if c.concurrency, err = parseInts(*conc); err != nil || c.rounds < 1 || c.rate < 1 || c.duration <= 0 ||
		h.workers < 1 || h.cancelShare < 0 || h.cancelShare > 1 || h.cancelWithin <= 0 || h.uploaders < 1 ||
		h.uploadClaim <= 100 || h.slowPad < 1 || h.slowPad > 1<<20 || h.slowPause <= h.idle ||
		c.many.n < 1 || c.transOpenStreams < 1 || c.many.chunkDelay <= 0 || c.many.rate < 0 || !slices.Contains([]string{"auto", "h1", "h2c"}, c.many.proto) {
		fmt.Fprintln(os.Stderr, "load: bad flags")
		return 2
	}
	e.mixSite, e.mixIdle = c.beside, c.hostile.idle
	c.phases = map[string]bool{}
	for p := range strings.SplitSeq(*phases, ",") {
		c.phases[strings.TrimSpace(p)] = true
	}
	e.chatEngine = c.phases["translation"]

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
	if failed := r.failedChecks(); len(failed) > 0 {
		fmt.Fprintf(os.Stderr, "\nload: FAIL: hostile mix: %s\n", strings.Join(failed, "; "))
		return 1
	}
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

	// the phases on the benchmark's one Caddy, run again with the hostile
	// mix beside them when -beside asks (beside.go)
	mainPhases := func(r *report) error {
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
			p99 := r.add(&metric{name: fmt.Sprintf("latency p99 @%d req/s (us)", c.rate), direct: []float64{},
				target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }})
			for round := range c.rounds {
				d := latency(ctx, []string{direct.url}, c.rate, c.duration)[0]
				r.failures(direct.name, "latency", int64(d.failed+d.dropped))
				p50.direct, p99.direct = append(p50.direct, us(d.p50)), append(p99.direct, us(d.p99))
				progress("latency round %d/%d %-13s p50 %6.0f us  p99 %6.0f us", round+1, c.rounds, direct.name, us(d.p50), us(d.p99))
				ts := order(round)
				res := latency(ctx, []string{ts[0].url, ts[1].url}, c.rate, c.duration)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				for i, t := range ts {
					l := res[i]
					r.failures(t.name, "latency", int64(l.failed+l.dropped))
					pair(p50, t, us(l.p50))
					pair(p99, t, us(l.p99))
					pair(added, t, us(l.p50-d.p50))
					progress("latency round %d/%d %-13s p50 %6.0f us  p99 %6.0f us", round+1, c.rounds, t.name, us(l.p50), us(l.p99))
				}
			}
		}

		if c.phases["stream"] {
			ttfb := r.add(&metric{name: "stream TTFB p50 (us)", direct: []float64{},
				target: "within 5%", pass: func(rp, gw float64) bool { return gw <= rp*1.05 }})
			ttfb99 := r.add(&metric{name: "stream TTFB p99 (us)", direct: []float64{},
				target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }})
			total := r.add(&metric{name: "stream 50 chunks total p50 (us)", direct: []float64{}})
			for round := range c.rounds {
				d := streamLatency(ctx, []string{direct.url}, c.ttfbStreams)[0]
				r.failures(direct.name, "stream", int64(d.failed))
				ttfb.direct, total.direct = append(ttfb.direct, us(d.ttfb)), append(total.direct, us(d.total))
				ttfb99.direct = append(ttfb99.direct, us(d.ttfb99))
				ts := order(round)
				res := streamLatency(ctx, []string{ts[0].url, ts[1].url}, c.ttfbStreams)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				for i, tg := range ts {
					s := res[i]
					r.failures(tg.name, "stream", int64(s.failed))
					pair(ttfb, tg, us(s.ttfb))
					pair(ttfb99, tg, us(s.ttfb99))
					pair(total, tg, us(s.total))
					progress("stream round %d/%d %-13s TTFB %6.0f us (p99 %6.0f us)  total %6.0f us", round+1, c.rounds, tg.name, us(s.ttfb), us(s.ttfb99), us(s.total))
				}
			}
		}

		if c.phases["cpu"] {
			cpu := r.add(&metric{name: "Caddy CPU per chunk (us)", prec: 2,
				target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }})
			for round := range c.rounds {
				ts := order(round)
				results, err := cpuRound(ctx, ts, pid, c.cpuStreams, c.cpuConcurrency)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return fmt.Errorf("cpu per chunk: %v", err)
				}
				for i, t := range ts {
					res := results[i]
					r.failures(t.name, "cpu", res.failed)
					pair(cpu, t, us(res.perChunk))
					progress("cpu round %d/%d %-13s %5.2f us/chunk (%v CPU over %d chunks)",
						round+1, c.rounds, t.name, us(res.perChunk), res.cpu, res.chunks)
				}
			}
		}

		if c.phases["cpu"] {
			cpu := r.add(&metric{name: "Caddy CPU per completion (us)", prec: 2,
				target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }})
			for round := range c.rounds {
				ts := order(round)
				results, err := completionCPURound(ctx, ts, pid, c.cpuCompletions, c.cpuConcurrency)
				if ctx.Err() != nil {
					return ctx.Err()
				}
				if err != nil {
					return fmt.Errorf("cpu per completion: %v", err)
				}
				for i, t := range ts {
					res := results[i]
					r.failures(t.name, "cpu", res.failed)
					pair(cpu, t, us(res.perChunk))
					progress("cpu round %d/%d %-13s %5.2f us/completion (%v CPU over %d completions)",
						round+1, c.rounds, t.name, us(res.perChunk), res.cpu, res.chunks)
				}
			}
		}

		if c.phases["syscalls"] {
			if err := syscallsPhase(ctx, e, c, r, order, pid); err != nil {
				return err
			}
		}
		return nil
	}
	if err := mainPhases(r); err != nil {
		return err
	}
	if c.beside {
		if err := besidePhases(ctx, e, c, r, mainPhases); err != nil {
			return err
		}
	}

	if c.phases["translation"] {
		if err := translationPhase(ctx, e, c, r, e.caddy.PID()); err != nil {
			return err
		}
	}

	if c.phases["memory"] {
		// each target in a Caddy of its own, started fresh: Go keeps freed
		// memory for reuse, so a process that already held 1000 streams of the
		// other target would show this one's cost too low
		e.stopCaddy()
		mem := r.add(&metric{name: fmt.Sprintf("RSS per open stream, %d open (KB)", c.openStreams), prec: 1,
			target: fmt.Sprintf("<= %d KB", rssPerStreamGoalKB), pass: func(rp, gw float64) bool { return gw <= rssPerStreamGoalKB }})
		r.memory = mem
		gor := r.add(&metric{name: "  goroutines per open stream", prec: 2})
		stack := r.add(&metric{name: "  Go stacks per open stream (KB)", prec: 1})
		heap := r.add(&metric{name: "  Go heap per open stream (KB)", prec: 1})
		// the floor, a handler that only relays, after the two targets in
		// every round: what any handler on Caddy and its transport costs
		mem.floor, gor.floor, stack.floor, heap.floor = []float64{}, []float64{}, []float64{}, []float64{}
		floor := e.floor()
		for round := range c.rounds {
			for _, t := range append(order(round), floor) {
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
				if t == floor {
					mem.floor, gor.floor = append(mem.floor, res.perStreamKB), append(gor.floor, res.goroutinesPerStream)
					stack.floor, heap.floor = append(stack.floor, res.stackPerStreamKB), append(heap.floor, res.heapPerStreamKB)
				} else {
					pair(mem, t, res.perStreamKB)
					pair(gor, t, res.goroutinesPerStream)
					pair(stack, t, res.stackPerStreamKB)
					pair(heap, t, res.heapPerStreamKB)
				}
				if res.firstErr != "" {
					r.note("memory %s: %d failed, the first: %s", t.name, res.failed, res.firstErr)
				}
				progress("memory round %d/%d %-13s %6.1f KB/stream, %.2f goroutines/stream (VmRSS %d KB idle, %d KB with %d open)",
					round+1, c.rounds, t.name, res.perStreamKB, res.goroutinesPerStream, res.baseKB, res.peakKB, c.openStreams)
			}
		}
	}

	if c.phases["manystreams"] {
		if err := manyStreamsPhase(ctx, e, c, r, order); err != nil {
			return err
		}
	}
	switch {
	case c.phases["hostile"]:
		return hostilePhase(ctx, e, c, r)
	case c.phases["door"]: // the door alone: part of the hostile phase
		e.stopCaddy()
		return doorPhase(ctx, e, r)
	case c.phases["transstreams"]: // the translated streams alone: part of the hostile phase
		e.stopCaddy()
		return transStreamsPhase(ctx, e, r)
	}
	return nil
}

// doorPhase runs the door's parts (door.go) in a fresh Caddy and adds their
// figures to the report.
func doorPhase(ctx context.Context, e *env, r *report) error {
	d, err := runDoor(ctx, e)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("door: %v", err)
	}
	progress("door: rate key %d of %d admitted; bursts used %v; %d/%d case variants refused; %d/%d operator actions performed",
		d.rateAdmitted, d.rateSent, burstsUsed(d.bursts), d.spellRefused, d.spellSent, d.operatorPerformed, d.operatorTried)
	r.addDoor(d)
	return nil
}

func burstsUsed(bs []burstResult) []int64 {
	var out []int64
	for _, b := range bs {
		out = append(out, b.used)
	}
	return out
}

// hostilePhase runs the hostile mix, then the door (keys with rules on every
// route), then translated streams of huge answers, then measures RSS per open stream and the memory slow uploaders
// hold, each in a fresh Caddy, and adds the figures with their limits to the
// report.
func hostilePhase(ctx context.Context, e *env, c config, r *report) error {
	e.stopCaddy()
	if err := e.writeHostileCaddyfile(fallbackCap+2, c.hostile.idle); err != nil {
		return err
	}
	res, err := runHostile(ctx, e, c)
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if err != nil {
		return fmt.Errorf("hostile mix: %v", err)
	}
	for k := range kinds {
		progress("hostile mix %-11s %5d requests (%4d cancelled): upstream calls max %d, mean %.2f when not cancelled; %d unexpected answers",
			kindNames[k], res.requests[k], res.cancelled[k], res.maxCalls[k], res.meanCalls[k], res.badStatus[k])
	}
	progress("hostile mix: %d upstream calls, %d without a request id; slow reader whole: %v (%v); Caddy VmRSS +%d KB",
		res.total, res.untagged, res.slowWhole, res.slowErr, res.rssGrowthKB)
	r.addHostile(res)
	if err := doorPhase(ctx, e, r); err != nil {
		return err
	}
	if err := transStreamsPhase(ctx, e, r); err != nil { // hostilestreams.go
		return err
	}

	gw := target{"llm_gateway", e.url(e.gwPort)}
	var perStream []float64
	if r.memory != nil { // measured already, the same way
		perStream = r.memory.gw
		progress("hostile: RSS per open stream from the memory phase's %d rounds", len(perStream))
	}
	for round := 0; round < c.rounds && len(perStream) < c.rounds; round++ {
		o, err := openStreamsInFreshCaddy(ctx, e, gw, c)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("hostile, open streams: %v", err)
		}
		r.failures(gw.name, "hostile open streams", int64(o.failed))
		if o.endedEarly > 0 {
			r.note("hostile open streams: %d streams ended before memory was sampled; raise -open-chunk-delay", o.endedEarly)
		}
		perStream = append(perStream, o.perStreamKB)
		progress("hostile open streams round %d/%d %6.1f KB/stream (VmRSS %d KB idle, %d KB with %d open)",
			round+1, c.rounds, o.perStreamKB, o.baseKB, o.peakKB, c.openStreams)
	}
	kb := median(perStream)
	r.check(fmt.Sprintf("RSS per open stream, %d open (KB)", c.openStreams), fmt.Sprintf("%.1f", kb),
		fmt.Sprintf("<= %d KB", rssPerStreamLimitKB), kb <= rssPerStreamLimitKB)

	// each round twice: uploaders announcing the claim, and the same
	// connections announcing a 100-byte body (what a connection and a
	// request cost any handler), so that what the claim adds shows in Go's
	// account, which sees a whole allocation even where VmRSS does not
	var held, heldControl, goHeld, goControl, goAdded []float64
	for round := range c.rounds {
		u, err := uploadersInFreshCaddy(ctx, e, c, c.hostile.uploadClaim)
		var control uploadResult
		if err == nil {
			control, err = uploadersInFreshCaddy(ctx, e, c, 100)
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("slow uploaders: %v", err)
		}
		held, goHeld = append(held, float64(u.heldKB)/1024), append(goHeld, float64(u.goHeldKB)/1024)
		heldControl, goControl = append(heldControl, float64(control.heldKB)/1024), append(goControl, float64(control.goHeldKB)/1024)
		goAdded = append(goAdded, float64(u.goHeldKB-control.goHeldKB)/1024)
		progress("slow uploaders round %d/%d, %d-byte claims: VmRSS +%.2f MB (%d -> %d KB), Go heap+stacks +%.2f MB (%d -> %d KB)",
			round+1, c.rounds, c.hostile.uploadClaim, float64(u.heldKB)/1024, u.baseKB, u.peakKB,
			float64(u.goHeldKB)/1024, u.goBaseKB, u.goPeakKB)
		progress("slow uploaders round %d/%d, 100-byte bodies: VmRSS +%.2f MB, Go heap+stacks +%.2f MB",
			round+1, c.rounds, float64(control.heldKB)/1024, float64(control.goHeldKB)/1024)
	}
	mb := median(held)
	r.check(fmt.Sprintf("memory held by %d slow uploaders, VmRSS (MB)", c.hostile.uploaders), fmt.Sprintf("%.2f", mb),
		fmt.Sprintf("<= %d MB", uploadersLimitMB), mb <= uploadersLimitMB)
	r.info("  the same with 100-byte bodies announced (MB)", fmt.Sprintf("%.2f", median(heldControl)))
	r.info("  Go heap and stacks in use (MB)", fmt.Sprintf("%.2f", median(goHeld)))
	r.info("  the same with 100-byte bodies announced (MB)", fmt.Sprintf("%.2f", median(goControl)))
	mb = median(goAdded)
	r.check(fmt.Sprintf("  what the %d-byte claims add, Go's account (MB)", c.hostile.uploadClaim), fmt.Sprintf("%.2f", mb),
		fmt.Sprintf("<= %d MB", uploadersLimitMB), mb <= uploadersLimitMB)
	return nil
}

func uploadersInFreshCaddy(ctx context.Context, e *env, c config, claim int64) (uploadResult, error) {
	if err := e.startUploadsCaddy(ctx); err != nil {
		return uploadResult{}, err
	}
	defer e.stopCaddy()
	res, err := slowUploaders(ctx, e.url(e.gwPort), e.url(e.adminPort), e.gwPort, e.caddy.PID(), c.hostile.uploaders, claim)
	if err == nil && res.closedEarly > 0 {
		err = fmt.Errorf("the server answered or closed %d of %d before memory was sampled", res.closedEarly, c.hostile.uploaders)
	}
	return res, err
}

// openStreamsInFreshCaddy holds c.openStreams streams in a fresh Caddy
// whose admin endpoint is on, for its goroutine count.
func openStreamsInFreshCaddy(ctx context.Context, e *env, t target, c config) (openResult, error) {
	if err := e.startAdminCaddy(ctx, false); err != nil {
		return openResult{}, err
	}
	defer e.stopCaddy()
	o := openOptions{n: c.openStreams, chunkDelay: c.openChunkDelay, admin: e.url(e.adminPort)}
	if c.profiles {
		o.profiles = filepath.Join(e.outDir, "memory-"+t.name)
	}
	return openStreams(ctx, t.url, e.caddy.PID(), o)
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
