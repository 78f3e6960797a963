//go:build unix

package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// caddyfileTemplate has two sites in one Caddy in front of one upstream:
// stock reverse_proxy with its defaults (it flushes text/event-stream on its
// own, so no flush_interval) and llm_gateway. Arguments: log file, rp port,
// upstream port, gw port, upstream port.
const caddyfileTemplate = `{
	admin off
	default_bind 127.0.0.1
	grace_period 1s
	log {
		output file %s
		level ERROR
	}
}

http://127.0.0.1:%d {
	reverse_proxy 127.0.0.1:%d
}

http://127.0.0.1:%d {
	llm_gateway {
		engine up {
			to http://127.0.0.1:%d
			models bench
		}
	}
}
`

// env is what the benchmark runs: the fake upstream and Caddy, on loopback
// ports picked at start.
type env struct {
	caddyBin, upstreamBin, outDir string
	upPort, rpPort, gwPort        int
	caddyfile                     string

	upstream *harness.Process
	caddy    *harness.Process
}

func (e *env) url(port int) string { return fmt.Sprintf("http://127.0.0.1:%d", port) }

// start picks ports, starts the upstream and writes the Caddyfile.
func (e *env) start(ctx context.Context) error {
	ports, err := harness.FreePorts(3)
	if err != nil {
		return fmt.Errorf("picking ports: %v", err)
	}
	e.upPort, e.rpPort, e.gwPort = ports[0], ports[1], ports[2]
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
	cf := fmt.Sprintf(caddyfileTemplate, logFile, e.rpPort, e.upPort, e.gwPort, e.upPort)
	return os.WriteFile(e.caddyfile, []byte(cf), 0o644)
}

// startCaddy starts a Caddy with the benchmark's Caddyfile and waits until
// both sites answer. Any Caddy started before must be stopped: they share ports.
func (e *env) startCaddy(ctx context.Context) error {
	xdg, _ := filepath.Abs(filepath.Join(e.outDir, "xdg"))
	p, err := harness.Start("caddy",
		[]string{e.caddyBin, "run", "--config", e.caddyfile, "--adapter", "caddyfile"},
		// keep Caddy's autosave and storage inside bench/out
		[]string{"XDG_CONFIG_HOME=" + xdg + "/config", "XDG_DATA_HOME=" + xdg + "/data"},
		filepath.Join(e.outDir, "caddy-bench.stderr"))
	if err != nil {
		return err
	}
	e.caddy = p
	for _, port := range []int{e.rpPort, e.gwPort} {
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
