//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// globalOptions are every benchmark Caddy's. Arguments: the admin option,
// the log file.
const globalOptions = `{
	%s
	default_bind 127.0.0.1
	grace_period 1s
	log {
		output file %s
		level ERROR
	}
}
`

// caddyfileTemplate has three sites in one Caddy in front of one upstream:
// stock reverse_proxy with its defaults (it flushes text/event-stream on its
// own, so no flush_interval), llm_gateway, and bench_floor (bench/floor: a
// handler that only relays, which the memory phase measures beside them).
// Arguments: the admin option (off, but for the slow uploaders, whose
// Caddy's Go memory statistics are read from the admin endpoint's
// /metrics), log file, rp port, upstream port, gw port, upstream port, the
// gateway's other engines (chatEngineTemplate, or none), floor port,
// upstream port.
const caddyfileTemplate = globalOptions + `
http://127.0.0.1:%d {
	reverse_proxy 127.0.0.1:%d
}

http://127.0.0.1:%d {
	llm_gateway {
		engine up {
			to http://127.0.0.1:%d
			models bench
		}
%s	}
}

http://127.0.0.1:%d {
	bench_floor 127.0.0.1:%d
}
`

// chatEngineTemplate is the translation phase's engine in the gateway's
// site: the same upstream, declared to speak Chat Completions only, so that
// a Messages or Responses request for bench-chat reaches it through
// translation. Only a run with that phase has it: the other phases measure
// the gateway as they always have. Argument: upstream port.
const chatEngineTemplate = `		engine upchat {
			to http://127.0.0.1:%d
			models bench-chat
			api chat
		}
`

// hostileSiteTemplate is the hostile mix's site: the gateway alone,
// its engine up serving the model bench, and engines f0 … f<cap+1> that the
// mix names as primary (model fail0) and as body fallbacks. Every engine is
// the same fake upstream, which fails a request that asks it to
// (X-Bench-Fail). The fail engines' breakers never open, so the walk of
// every request is as long as the gateway lets it be. up's breaker opens
// at the first failure and its stream_idle_timeout is short: a slow reader
// blamed on the engine would fail the healthy requests after it. The caps
// are the gateway's defaults, written out so that the bench and the
// gateway agree on them. Arguments: the site's port, the two caps, upstream
// port, up's stream_idle_timeout, the fail engines. The hostile phase runs
// it in a Caddy of its own (writeHostileCaddyfile); with -beside it is
// the benchmark Caddy's fourth site.
const hostileSiteTemplate = `
http://127.0.0.1:%d {
	llm_gateway {
		max_fallbacks %d
		max_attempts %d
		engine up {
			to http://127.0.0.1:%d
			models bench
			stream_idle_timeout %v
			breaker 1 1m
		}
%s	}
}
`

const failEngineTemplate = `		engine f%d {
			to http://127.0.0.1:%d
			models fail%d
			breaker 1000000 1s
		}
`

// env is what the benchmark runs: the fake upstream and Caddy, on loopback
// ports picked at start.
type env struct {
	caddyBin, upstreamBin, outDir string
	upPort, rpPort, gwPort        int
	floorPort                     int // bench_floor's site
	// the gateway's site also has chatEngineTemplate's engine (the
	// translation phase)
	chatEngine bool
	// -beside: the benchmark Caddy also has the hostile mix's site, on
	// mixPort, its engine up with stream_idle_timeout mixIdle
	mixSite          bool
	mixPort          int
	mixIdle          time.Duration
	adminPort        int // the uploads Caddy's admin endpoint
	caddyfile        string
	uploadsCaddyfile string // caddyfile with the admin endpoint on
	h2cCaddyfile     string // the same, and h2c beside HTTP/1.1 (manystreams)
	hostileCaddyfile string

	upstream *harness.Process
	caddy    *harness.Process
}

func (e *env) url(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// gatewayData is the gateway's data directory in the benchmark's Caddy
// storage (harness.StartCaddy): its key counters and request history.
func (e *env) gatewayData() string {
	return filepath.Join(e.outDir, "xdg", "data", "caddy", "llm_gateway")
}

// floor is bench_floor's site: the memory phases measure it after the two
// targets in every round.
func (e *env) floor() target { return target{"bench_floor", e.url(e.floorPort)} }

// start picks ports, starts the upstream and writes the Caddyfile.
func (e *env) start(ctx context.Context) error {
	ports, err := harness.FreePorts(6)
	if err != nil {
		return fmt.Errorf("picking ports: %v", err)
	}
	e.upPort, e.rpPort, e.gwPort, e.adminPort, e.floorPort = ports[0], ports[1], ports[2], ports[3], ports[4]
	if e.mixSite {
		e.mixPort = ports[5]
	}
	// every run starts from the same state: without the request history
	// and key counters earlier runs left (quota.db), which this run would
	// otherwise prune record by record, reading pages of a file last
	// touched before the machine restarted back from disk (4 % of the
	// gateway's CPU in one profile, all of it page faults)
	if err := os.RemoveAll(e.gatewayData()); err != nil {
		return err
	}
	e.upstream, err = harness.Start("fakeupstream",
		[]string{e.upstreamBin, "-addr", fmt.Sprintf("127.0.0.1:%d", e.upPort)}, nil,
		filepath.Join(e.outDir, "fakeupstream.log"))
	if err != nil {
		return err
	}
	if err := harness.WaitHTTP(ctx, e.url(e.upPort)+"/health", e.upstream, 10*time.Second); err != nil {
		return err
	}
	e.caddyfile = filepath.Join(e.outDir, "bench.Caddyfile")
	logFile, _ := filepath.Abs(filepath.Join(e.outDir, "caddy-bench.log"))
	var more string
	if e.chatEngine {
		more = fmt.Sprintf(chatEngineTemplate, e.upPort)
	}
	cf := fmt.Sprintf(caddyfileTemplate, "admin off", logFile, e.rpPort, e.upPort, e.gwPort, e.upPort, more, e.floorPort, e.upPort)
	if e.mixSite {
		cf += e.hostileSite(e.mixPort, fallbackCap+2, e.mixIdle)
	}
	if err := os.WriteFile(e.caddyfile, []byte(cf), 0o644); err != nil {
		return err
	}
	e.uploadsCaddyfile = filepath.Join(e.outDir, "uploads.Caddyfile")
	admin := fmt.Sprintf("admin 127.0.0.1:%d", e.adminPort)
	cf = fmt.Sprintf(caddyfileTemplate, admin, logFile, e.rpPort, e.upPort, e.gwPort, e.upPort, more, e.floorPort, e.upPort)
	if err := os.WriteFile(e.uploadsCaddyfile, []byte(cf), 0o644); err != nil {
		return err
	}
	e.h2cCaddyfile = filepath.Join(e.outDir, "h2c.Caddyfile")
	cf = fmt.Sprintf(caddyfileTemplate, admin+"\n\tservers {\n\t\tprotocols h1 h2c\n\t}", logFile, e.rpPort, e.upPort, e.gwPort, e.upPort, more, e.floorPort, e.upPort)
	return os.WriteFile(e.h2cCaddyfile, []byte(cf), 0o644)
}

// writeHostileCaddyfile writes the hostile mix's Caddyfile with fails
// engines f0, f1, … and up's stream_idle_timeout.
func (e *env) writeHostileCaddyfile(fails int, idle time.Duration) error {
	e.hostileCaddyfile = filepath.Join(e.outDir, "hostile.Caddyfile")
	logFile, _ := filepath.Abs(filepath.Join(e.outDir, "caddy-hostile.log"))
	cf := fmt.Sprintf(globalOptions, "admin off", logFile) + e.hostileSite(e.gwPort, fails, idle)
	return os.WriteFile(e.hostileCaddyfile, []byte(cf), 0o644)
}

// hostileSite is the hostile mix's site on port, with fails engines f0,
// f1, … and up's stream_idle_timeout.
func (e *env) hostileSite(port, fails int, idle time.Duration) string {
	var engines strings.Builder
	for i := range fails {
		fmt.Fprintf(&engines, failEngineTemplate, i, e.upPort, i)
	}
	return fmt.Sprintf(hostileSiteTemplate, port, fallbackCap, attemptsCap, e.upPort, idle, engines.String())
}

// startCaddy starts a Caddy with the benchmark's Caddyfile and waits until
// both sites answer. Any Caddy started before must be stopped: they share ports.
func (e *env) startCaddy(ctx context.Context) error {
	if e.mixSite {
		return e.startCaddyWith(ctx, e.caddyfile, e.rpPort, e.gwPort, e.floorPort, e.mixPort)
	}
	return e.startCaddyWith(ctx, e.caddyfile, e.rpPort, e.gwPort, e.floorPort)
}

// startUploadsCaddy starts a Caddy with the benchmark's sites and its admin
// endpoint on, for the slow uploaders.
func (e *env) startUploadsCaddy(ctx context.Context) error {
	return e.startCaddyWith(ctx, e.uploadsCaddyfile, e.rpPort, e.gwPort, e.floorPort)
}

// startAdminCaddy starts a Caddy with the benchmark's sites and its admin
// endpoint on (the uploads Caddyfile), for Go's statistics; h2c: with h2c
// beside HTTP/1.1.
func (e *env) startAdminCaddy(ctx context.Context, h2c bool) error {
	if h2c {
		return e.startCaddyWith(ctx, e.h2cCaddyfile, e.rpPort, e.gwPort, e.floorPort)
	}
	return e.startCaddyWith(ctx, e.uploadsCaddyfile, e.rpPort, e.gwPort, e.floorPort)
}

// startHostileCaddy starts a Caddy with the hostile mix's Caddyfile, whose
// one site is the gateway on the gw port.
func (e *env) startHostileCaddy(ctx context.Context) error {
	return e.startCaddyWith(ctx, e.hostileCaddyfile, e.gwPort)
}

func (e *env) startCaddyWith(ctx context.Context, caddyfile string, ports ...int) error {
	p, err := harness.StartCaddy(e.caddyBin, caddyfile, e.outDir, filepath.Join(e.outDir, "caddy-bench.stderr"))
	if err != nil {
		return err
	}
	e.caddy = p
	for _, port := range ports {
		if err := harness.WaitHTTP(ctx, e.url(port)+"/health", p, 15*time.Second); err != nil {
			return fmt.Errorf("%v (see %s)", err, filepath.Join(e.outDir, "caddy-bench.stderr"))
		}
	}
	return nil
}

func (e *env) stopCaddy() {
	e.caddy.Stop(5 * time.Second)
	e.caddy = nil
}

// stop ends everything start and startCaddy started.
func (e *env) stop() {
	e.caddy.Stop(5 * time.Second)
	e.upstream.Stop(3 * time.Second)
}
