//go:build unix

// Command coldstart measures how soon after an engine turns ready its first
// request is answered: Caddy runs llm_gateway with the built-in demo engine
// (which "loads" for -load-time), and -n times the engine is stopped through
// the admin API and one request starts it again. For each cold start:
//
//	ready -> first byte   T1 - the ts of Caddy's "engine ready" log entry
//	                      (the gateway's own readiness decision)
//	health flip -> first byte
//	                      T1 - (ts of the engine's "listening" line + load time):
//	                      when the engine's /health really turned 200, so this
//	                      also counts the readiness probe's back-off
//	cold request          T1 - T0, the whole wait of the request that woke it
//
// where T0 is when the request was sent and T1 when its first response byte
// arrived. Caddy logs JSON with nanosecond timestamps to a file; the clocks
// are the same machine's wall clock.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
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

const caddyfileTemplate = `{
	admin 127.0.0.1:%d
	default_bind 127.0.0.1
	grace_period 1s
	log {
		output file %s
		format json {
			time_format unix_nano
		}
		level INFO
	}
}

http://127.0.0.1:%d {
	llm_gateway {
		engine demo {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model bench --load-time %s
			to http://127.0.0.1:{engine.port}
			models bench
			idle_timeout %s
		}
	}
}
`

const engineName = "demo"

type options struct {
	caddyBin, outDir string
	n                int
	loadTime         time.Duration
	idleTimeout      time.Duration
}

func main() {
	var o options
	flag.StringVar(&o.caddyBin, "caddy", "bench/out/caddy", "Caddy binary built from ./bench/caddy (or ./cmd/caddy)")
	flag.StringVar(&o.outDir, "out", "bench/out", "directory for the Caddyfile and logs")
	flag.IntVar(&o.n, "n", 20, "cold starts")
	flag.DurationVar(&o.loadTime, "load-time", 300*time.Millisecond, "the demo engine's simulated model load")
	flag.DurationVar(&o.idleTimeout, "idle-timeout", 2*time.Second, "the engine's idle_timeout")
	flag.Parse()
	if o.n < 1 || o.n > 1000 {
		fmt.Fprintln(os.Stderr, "coldstart: -n must be 1..1000")
		os.Exit(2)
	}

	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(o.n)*(o.loadTime+5*time.Second)+30*time.Second)
	defer cancel()
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, o); err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			fmt.Fprintln(os.Stderr, "coldstart: interrupted, Caddy stopped")
			os.Exit(130)
		}
		fmt.Fprintln(os.Stderr, "coldstart:", err)
		os.Exit(1)
	}
}

// coldStart is one measured cold start, times relative to the request's start.
type coldStart struct {
	readyToFirstByte time.Duration
	flipToFirstByte  time.Duration
	request          time.Duration
	spawnToReady     time.Duration
}

func run(ctx context.Context, o options) error {
	ports, err := harness.FreePorts(2)
	if err != nil {
		return err
	}
	adminPort, sitePort := ports[0], ports[1]
	logPath, _ := filepath.Abs(filepath.Join(o.outDir, "coldstart-caddy.log"))
	_ = os.Remove(logPath)
	caddyfile := filepath.Join(o.outDir, "coldstart.Caddyfile")
	cf := fmt.Sprintf(caddyfileTemplate, adminPort, logPath, sitePort, o.loadTime, o.idleTimeout)
	if err := os.WriteFile(caddyfile, []byte(cf), 0o644); err != nil {
		return err
	}
	caddy, err := harness.StartCaddy(o.caddyBin, caddyfile, o.outDir, filepath.Join(o.outDir, "coldstart-caddy.stderr"))
	if err != nil {
		return err
	}
	defer caddy.Stop(5 * time.Second) // stops the engine too: Caddy stops what it started

	admin := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	site := fmt.Sprintf("http://127.0.0.1:%d", sitePort)
	if err := harness.WaitHTTP(ctx, admin+"/llm_gateway/engines", caddy, 15*time.Second); err != nil {
		return err
	}
	if err := harness.WaitHTTP(ctx, site+"/health", caddy, 15*time.Second); err != nil {
		return err
	}

	client := &http.Client{Timeout: 30 * time.Second}
	var runs []coldStart
	for i := range o.n {
		if err := stopEngine(ctx, client, admin); err != nil {
			return fmt.Errorf("cold start %d: %v", i+1, err)
		}
		offset, err := fileSize(logPath)
		if err != nil {
			return err
		}
		t0, t1, err := request(ctx, client, site)
		if err != nil {
			return fmt.Errorf("cold start %d: %v", i+1, err)
		}
		ev, err := waitEngineEvents(ctx, logPath, offset)
		if err != nil {
			return fmt.Errorf("cold start %d: %v", i+1, err)
		}
		cs := coldStart{
			readyToFirstByte: t1.Sub(ev.ready),
			flipToFirstByte:  t1.Sub(ev.listening.Add(o.loadTime)),
			request:          t1.Sub(t0),
			spawnToReady:     ev.ready.Sub(ev.starting),
		}
		runs = append(runs, cs)
		fmt.Fprintf(os.Stderr, "cold start %2d/%d: ready->first byte %6.2f ms, health flip->first byte %6.2f ms, request %6.1f ms\n",
			i+1, o.n, ms(cs.readyToFirstByte), ms(cs.flipToFirstByte), ms(cs.request))
	}
	printSummary(os.Stdout, o, runs)
	return nil
}

// stopEngine stops the engine through the admin API and checks it is stopped.
func stopEngine(ctx context.Context, client *http.Client, admin string) error {
	url := admin + "/llm_gateway/engines/" + engineName
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url+"/stop", nil)
	var st struct {
		State string `json:"state"`
	}
	if err := doJSON(client, req, &st); err != nil {
		return fmt.Errorf("stopping the engine: %v", err)
	}
	if st.State != "stopped" {
		return fmt.Errorf("engine is %q after stop", st.State)
	}
	return nil
}

// request sends one completion and returns when it was sent and when its
// first response byte arrived.
func request(ctx context.Context, client *http.Client, site string) (t0, t1 time.Time, err error) {
	body := strings.NewReader(`{"model":"bench","messages":[{"role":"user","content":"hi"}]}`)
	trace := &httptrace.ClientTrace{GotFirstResponseByte: func() { t1 = time.Now() }}
	req, _ := http.NewRequestWithContext(httptrace.WithClientTrace(ctx, trace), http.MethodPost, site+"/v1/chat/completions", body)
	req.Header.Set("Content-Type", "application/json")
	t0 = time.Now()
	resp, err := client.Do(req)
	if err != nil {
		return t0, t1, err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return t0, t1, fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return t0, t1, nil
}

// engineEvents are the log entries of one engine start.
type engineEvents struct {
	starting, listening, ready time.Time
}

// waitEngineEvents reads Caddy's JSON log from offset until it holds the
// engine's "engine ready" entry (written just after the gateway lets waiting
// requests through, so it may trail the answer by a moment).
func waitEngineEvents(ctx context.Context, logPath string, offset int64) (engineEvents, error) {
	for range 100 {
		ev, err := readEngineEvents(logPath, offset)
		if err != nil {
			return ev, err
		}
		if !ev.ready.IsZero() {
			if ev.listening.IsZero() || ev.starting.IsZero() {
				return ev, errors.New("log has \"engine ready\" but not the engine's start")
			}
			return ev, nil
		}
		select {
		case <-ctx.Done():
			return ev, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
	return engineEvents{}, fmt.Errorf("no \"engine ready\" entry in %s", logPath)
}

func readEngineEvents(logPath string, offset int64) (engineEvents, error) {
	var ev engineEvents
	f, err := os.Open(logPath)
	if err != nil {
		return ev, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return ev, err
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var entry struct {
			TS     json.Number `json:"ts"`
			Logger string      `json:"logger"`
			Msg    string      `json:"msg"`
		}
		if json.Unmarshal(sc.Bytes(), &entry) != nil || !strings.HasSuffix(entry.Logger, "llm_gateway.engine."+engineName) {
			continue
		}
		ns, err := strconv.ParseInt(entry.TS.String(), 10, 64)
		if err != nil {
			return ev, fmt.Errorf("log ts %q is not unix_nano", entry.TS)
		}
		ts := time.Unix(0, ns)
		switch {
		case entry.Msg == "starting engine":
			ev.starting = ts
		case strings.HasPrefix(entry.Msg, "demo engine: model ") && strings.Contains(entry.Msg, " listening on "):
			ev.listening = ts
		case entry.Msg == "engine ready":
			ev.ready = ts
		}
	}
	return ev, sc.Err()
}

func printSummary(w io.Writer, o options, runs []coldStart) {
	pick := func(f func(coldStart) time.Duration) []time.Duration {
		ds := make([]time.Duration, len(runs))
		for i, r := range runs {
			ds[i] = f(r)
		}
		slices.Sort(ds)
		return ds
	}
	fmt.Fprintf(w, "\ncold start: %d starts of the demo engine (--load-time %v), stopped through the admin API each time\n", len(runs), o.loadTime)
	const row = "%-44s %9s %9s %9s  %s\n"
	fmt.Fprintf(w, row, "metric (ms)", "median", "p90", "max", "target")
	fmt.Fprintln(w, strings.Repeat("-", 90))
	for _, m := range []struct {
		name   string
		f      func(coldStart) time.Duration
		target time.Duration
	}{
		{"\"engine ready\" log -> first byte", func(c coldStart) time.Duration { return c.readyToFirstByte }, 50 * time.Millisecond},
		{"/health turned 200 -> first byte (est.)", func(c coldStart) time.Duration { return c.flipToFirstByte }, 0},
		{"spawn -> \"engine ready\"", func(c coldStart) time.Duration { return c.spawnToReady }, 0},
		{"cold request: sent -> first byte", func(c coldStart) time.Duration { return c.request }, 0},
	} {
		ds := pick(m.f)
		verdict := ""
		if m.target > 0 {
			verdict = fmt.Sprintf("<= %v: FAIL", m.target)
			if ds[(len(ds)-1)/2] <= m.target {
				verdict = fmt.Sprintf("<= %v: PASS", m.target)
			}
		}
		p90 := ds[min(len(ds)-1, (len(ds)*90+99)/100-1)]
		fmt.Fprintf(w, row, m.name, fmtMS(median(ds)), fmtMS(p90), fmtMS(ds[len(ds)-1]), verdict)
	}
}

func median(sorted []time.Duration) time.Duration {
	n := len(sorted)
	if n%2 == 1 {
		return sorted[n/2]
	}
	return (sorted[n/2-1] + sorted[n/2]) / 2
}

func doJSON(client *http.Client, req *http.Request, v any) error {
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s %s: status %d: %s", req.Method, req.URL.Path, resp.StatusCode, b)
	}
	return json.Unmarshal(b, v)
}

func fileSize(path string) (int64, error) {
	fi, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	return fi.Size(), nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func fmtMS(d time.Duration) string { return strconv.FormatFloat(ms(d), 'f', 2, 64) }
