//go:build unix

// Command failover times what a failover costs the client: per failure class
// of the first candidate, the gap from sending a streamed chat completion to
// its first content delta when a healthy second candidate (the engine's
// fallback) exists, under four configurations (defaults; header_timeout 30s
// and first_token_timeout 10s; those plus hedge_after auto; plus hedge_after
// 500ms). Then two pools of two demo engines with hedge_after auto: one whose
// first member holds its first token 5 s on every 10th completion, one
// healthy; it reports their time to first token, the share of hedged
// requests and how soon the losers were disconnected. It prints markdown
// tables. bench/run.sh runs it when PHASES names failover.
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
	"sync"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// class is one way the first candidate fails.
type class struct {
	name    string // the table's row
	mode    string // the fake's mode; "" for refused and slow start
	waits   bool   // its requests wait on a timer: they run at once, not one by one
	after   bool   // the failure comes after content: the longest gap is timed, resume on
	refused bool
	start   bool // a cmd demo engine with a long load time
}

var classes = []class{
	{name: "connection refused", refused: true},
	{name: "503 at once", mode: mode503},
	{name: "429, Retry-After: 1", mode: mode429Retry},
	{name: "429, no Retry-After", mode: mode429},
	{name: "reset before headers", mode: modeReset},
	{name: "silent (no headers)", mode: modeSilent, waits: true},
	{name: "slow first token (20 s)", mode: modeSlowFirst, waits: true},
	{name: "stall before content (20 s)", mode: modeStallBefore, waits: true},
	{name: "cut after content †", mode: modeCut, after: true},
	{name: "stall after content (20 s) †", mode: modeStallAfter, waits: true, after: true},
	{name: "slow engine start (20 s load)", start: true, waits: true},
}

// config is one column: engine lines added to every class engine.
type config struct {
	name  string
	lines []string
	hedge bool
}

var timeouts = []string{"header_timeout 30s", "first_token_timeout 10s"}

var configs = []config{
	{name: "defaults"},
	{name: "30 s / 10 s", lines: timeouts},
	{name: "+ hedge_after auto", lines: append(timeouts[:2:2], "hedge_after auto", "hedge_budget 100%"), hedge: true},
	{name: "+ hedge_after 500ms", lines: append(timeouts[:2:2], "hedge_after 500ms", "hedge_budget 100%"), hedge: true},
}

type options struct {
	caddyBin, outDir string
	n, warm          int
	limit, hold      time.Duration
	loadTime         time.Duration
	poolN, poolWarm  int
	skipPool         bool
	also             []string // lines added to every class engine
	columns          map[int]bool
}

func main() {
	var o options
	flag.StringVar(&o.caddyBin, "caddy", "bench/out/caddy", "Caddy binary built from ./bench/caddy (or ./cmd/caddy)")
	flag.StringVar(&o.outDir, "out", "bench/out", "directory for the Caddyfiles and logs")
	flag.IntVar(&o.n, "n", 5, "requests per cell")
	flag.IntVar(&o.warm, "warm", 30, "healthy answers per engine before a hedge_after auto column")
	flag.DurationVar(&o.limit, "limit", 35*time.Second, "a request still without content (or end) after this long is cut")
	flag.DurationVar(&o.hold, "hold", 20*time.Second, "how long the slow and stalling upstreams hold")
	flag.DurationVar(&o.loadTime, "load-time", 20*time.Second, "the slow-starting demo engine's load time")
	flag.IntVar(&o.poolN, "pool-requests", 200, "sequential requests per pool scenario")
	flag.IntVar(&o.poolWarm, "pool-warm", 60, "requests to each pool before its timed ones (hedge_after auto needs 20 answers per member)")
	also := flag.String("also", "", "engine lines added to every failing engine, separated by ';' (e.g. \"retries 0\")")
	columns := flag.String("columns", "1,2,3,4", "the configurations to run: 1 defaults, 2 header_timeout 30s and first_token_timeout 10s, 3 those and hedge_after auto, 4 those and hedge_after 500ms")
	flag.BoolVar(&o.skipPool, "skip-pool", false, "skip the pool scenarios")
	flag.Parse()
	o.columns = map[int]bool{}
	for f := range strings.SplitSeq(*columns, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 || n > len(configs) {
			fmt.Fprintln(os.Stderr, "failover: -columns takes numbers from 1 to", len(configs))
			os.Exit(2)
		}
		o.columns[n] = true
	}
	for l := range strings.SplitSeq(*also, ";") {
		if l = strings.TrimSpace(l); l != "" {
			o.also = append(o.also, l)
		}
	}
	if o.n < 1 || o.n > 100 || o.warm < 0 || o.poolWarm < 0 || o.limit <= 0 || o.poolN < 1 {
		fmt.Fprintln(os.Stderr, "failover: bad flags")
		os.Exit(2)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "failover: interrupted, Caddy stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "failover:", err)
		os.Exit(1)
	}
}

func progress(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s  "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func run(ctx context.Context, o options) error {
	began := time.Now()
	healthy, err := startFake(modeHealthy, 0)
	if err != nil {
		return err
	}
	defer healthy.close()
	fakes := map[string]*fake{}
	for _, c := range classes {
		if c.mode != "" {
			f, err := startFake(c.mode, o.hold)
			if err != nil {
				return err
			}
			defer f.close()
			fakes[c.name] = f
		}
	}
	t := &table{cells: map[string]map[string]cell{}, errors: map[string]bool{}, limit: o.limit}
	for i, cfg := range configs {
		if !o.columns[i+1] {
			continue
		}
		if err := runConfig(ctx, o, i, cfg, healthy, fakes, t); err != nil {
			return fmt.Errorf("%s: %w", cfg.name, err)
		}
	}
	var pools *poolReport
	if !o.skipPool {
		if pools, err = runPools(ctx, o); err != nil {
			return fmt.Errorf("pools: %w", err)
		}
	}
	fmt.Println()
	t.print(os.Stdout, o)
	if pools != nil {
		pools.print(os.Stdout)
	}
	progress("done in %s", time.Since(began).Round(time.Second))
	return nil
}

// gateway is a running Caddy with its site and admin URLs.
type gateway struct {
	proc        *harness.Process
	site, admin string
}

func startGateway(ctx context.Context, o options, name, body string) (*gateway, error) {
	ports, err := harness.FreePorts(2)
	if err != nil {
		return nil, err
	}
	g := &gateway{site: fmt.Sprintf("http://127.0.0.1:%d", ports[0]), admin: fmt.Sprintf("http://127.0.0.1:%d", ports[1])}
	if err := harness.RequireLoopback(g.site); err != nil {
		return nil, err
	}
	cf := fmt.Sprintf("{\n\tadmin 127.0.0.1:%d\n\tdefault_bind 127.0.0.1\n\tgrace_period 1s\n\tmetrics\n}\n\n%s {\n\tllm_gateway {\n%s\t}\n}\n",
		ports[1], g.site, body)
	path := filepath.Join(o.outDir, "failover-"+name+".Caddyfile")
	if err := os.WriteFile(path, []byte(cf), 0o644); err != nil {
		return nil, err
	}
	logPath := filepath.Join(o.outDir, "failover-caddy.log")
	if g.proc, err = harness.StartCaddy(o.caddyBin, path, o.outDir, logPath); err != nil {
		return nil, err
	}
	if err := harness.WaitHTTP(ctx, g.admin+"/config/", g.proc, 30*time.Second); err != nil {
		g.proc.Stop(5 * time.Second)
		return nil, fmt.Errorf("%v (see %s)", err, logPath)
	}
	if err := harness.WaitHTTP(ctx, g.site+"/v1/models", g.proc, 30*time.Second); err != nil {
		g.proc.Stop(5 * time.Second)
		return nil, err
	}
	return g, nil
}

// engineBlock is one engine of the generated Caddyfile.
func engineBlock(name, to string, lines ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "\t\tengine %s {\n", name)
	if to != "" {
		fmt.Fprintf(&b, "\t\t\tto %s\n", to)
	}
	for _, l := range lines {
		fmt.Fprintf(&b, "\t\t\t%s\n", l)
	}
	b.WriteString("\t\t}\n")
	return b.String()
}

func engineName(c class) string {
	switch {
	case c.refused:
		return "up-refused"
	case c.start:
		return "up-slow-start"
	}
	return "up-" + c.mode
}

// applies says whether a class is measured under a configuration: after
// content nothing hedges, so a hedging column would repeat the timeouts'.
func applies(c class, cfg config) bool { return !(c.after && cfg.hedge) }

func runConfig(ctx context.Context, o options, idx int, cfg config, healthy *fake, fakes map[string]*fake, t *table) error {
	closed, err := harness.FreePorts(1) // nothing listens here
	if err != nil {
		return err
	}
	var body strings.Builder
	// breaker 1000: every request meets its class, not an open breaker's shortcut
	body.WriteString(engineBlock("healthy", healthy.url(), "models healthy", "prefill on", "breaker 1000"))
	for _, c := range classes {
		lines := []string{"models " + engineName(c), "fallback healthy", "breaker 1000"}
		for _, l := range cfg.lines {
			// a line of -also replaces the column's line of the same directive
			if !slices.ContainsFunc(o.also, func(a string) bool { return strings.Fields(a)[0] == strings.Fields(l)[0] }) {
				lines = append(lines, l)
			}
		}
		lines = append(lines, o.also...)
		to := ""
		switch {
		case c.refused:
			to = fmt.Sprintf("http://127.0.0.1:%d", closed[0])
		case c.start:
			to = "http://127.0.0.1:{engine.port}"
			lines = append([]string{fmt.Sprintf("cmd {gateway.executable} llm-demo-engine --port {engine.port} --model %s --load-time %s",
				engineName(c), o.loadTime)}, lines...)
		default:
			to = fakes[c.name].url()
		}
		if c.after {
			lines = append(lines, "resume on")
		}
		body.WriteString(engineBlock(engineName(c), to, lines...))
	}
	g, err := startGateway(ctx, o, fmt.Sprintf("config%d", idx+1), body.String())
	if err != nil {
		return err
	}
	defer g.proc.Stop(5 * time.Second)
	progress("config %q: gateway %s", cfg.name, g.site)

	// the healthy candidate's own time to first content: the baseline
	var base []shot
	for i := range o.n + 2 {
		s := chat(ctx, g.site, "healthy", fmt.Sprintf("baseline %d", i), o.limit)
		if s.err != nil {
			return fmt.Errorf("healthy engine: %v", s.err)
		}
		if i >= 2 { // the first two open connections
			base = append(base, s)
		}
	}
	t.set(baselineRow, cfg.name, summarize(base, false))

	if cfg.hedge && o.warm > 0 {
		// hedge_after auto goes by each engine's own first-token times:
		// give it samples with its fake healthy, then switch it back
		for _, c := range classes {
			f := fakes[c.name]
			if f == nil || !applies(c, cfg) {
				continue
			}
			f.set(modeHealthy)
			for i := range o.warm {
				if s := chat(ctx, g.site, engineName(c), fmt.Sprintf("warm %d", i), o.limit); s.err != nil {
					f.set(c.mode)
					return fmt.Errorf("warming %s: %v", c.name, s.err)
				}
			}
			f.set(c.mode)
		}
		progress("warmed every fake engine with %d healthy answers", o.warm)
	}

	// the classes that fail at once, one request after another; then those
	// that wait on a timer, all their requests at once, so the column
	// takes one wait (35 s at most) rather than forty
	var wg sync.WaitGroup
	var mu sync.Mutex
	record := func(c class, shots []shot) {
		mu.Lock()
		defer mu.Unlock()
		t.set(c.name, cfg.name, summarize(shots, c.after))
		for _, s := range shots {
			if s.err != nil {
				t.errors[fmt.Sprintf("%s / %s: %v", c.name, cfg.name, s.err)] = true
			}
		}
		progress("  %-32s %s", c.name, t.cells[c.name][cfg.name].text())
	}
	var waiting []class
	for _, c := range classes {
		switch {
		case !applies(c, cfg):
			t.set(c.name, cfg.name, cell{na: true})
		case c.waits:
			waiting = append(waiting, c)
		default:
			var shots []shot
			for i := range o.n {
				shots = append(shots, chat(ctx, g.site, engineName(c), fmt.Sprintf("%s %d", c.name, i), o.limit))
			}
			record(c, shots)
		}
	}
	for _, c := range waiting {
		wg.Go(func() {
			shots := make([]shot, o.n)
			var each sync.WaitGroup
			for i := range o.n {
				each.Go(func() { shots[i] = chat(ctx, g.site, engineName(c), fmt.Sprintf("%s %d", c.name, i), o.limit) })
			}
			each.Wait()
			record(c, shots)
		})
	}
	wg.Wait()
	return ctx.Err()
}
