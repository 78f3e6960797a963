//go:build unix

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// gatewayCaddyfile is a Caddy with llm_gateway, its admin endpoint on (the
// engine-start metric is the cross-check of starts.log), and one engine per
// model of the trace. %[4]s goes into the handler, each engine's block ends
// with its scheduling lines.
const gatewayCaddyfile = `{
	admin 127.0.0.1:%[1]d
	default_bind 127.0.0.1
	grace_period 1s
	log {
		output file %[3]s
		level INFO
	}
}

http://127.0.0.1:%[2]d {
	llm_gateway {
%[4]s%[5]s	}
}
`

// gatewayEngine is one engine: the demo engine behind a shell that appends
// "<model> <pid>" to starts.log and execs it, so the shell's pid is the
// engine's and every start is counted the same way for every target.
const gatewayEngine = `		engine %[1]s {
			cmd sh -c "%[2]s"
			to http://127.0.0.1:{engine.port}
			models %[1]s
%[3]s		}
`

// gatewayVariant is how one gateway target limits the engines to one at a time.
type gatewayVariant struct {
	name          string
	label         string
	handlerLines  string // inside llm_gateway, before the engines
	engineLines   string // inside each engine
	pendingIfBad  bool   // a config that does not adapt means "not available", not an error
	pendingReason string // what it waits for, in that case
	engineFlags   string // the demo engine's extra flags (warm.go: its sleep and wake times)
}

var (
	variantGroup = gatewayVariant{
		name:        "gw-group",
		label:       "gateway, group gpu (today)",
		engineLines: "\t\t\tgroup gpu\n",
	}
	variantMemory = gatewayVariant{
		name:          "gw-memory",
		label:         "gateway, memory 1 / memory_budget 1",
		handlerLines:  "\t\tmemory_budget 1\n",
		engineLines:   "\t\t\tmemory 1\n",
		pendingIfBad:  true,
		pendingReason: "the scheduler of issue 29 (memory, memory_budget) is not in this build",
	}
)

// targetDir is a fresh directory for one target's config, logs and starts.log.
func targetDir(outDir, name string) (string, error) {
	dir, err := filepath.Abs(filepath.Join(outDir, "swap-"+name))
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := os.Remove(filepath.Join(dir, "starts.log")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	return dir, nil
}

// shellSafe refuses a path that the engine's `sh -c` line would split or
// interpret: the line is written without quoting.
func shellSafe(paths ...string) error {
	for _, p := range paths {
		if strings.ContainsAny(p, " \t\n'\"\\$`;&|<>(){}*?[]#~") {
			return fmt.Errorf("path %q has characters the engine's shell line cannot hold; use another -out or binary path", p)
		}
	}
	return nil
}

// engineShell is the shell line that counts a start and execs the demo engine.
func engineShell(startsLog, engineBin, port, model string, loadTime time.Duration, extra string) string {
	return fmt.Sprintf("echo %s $$ >> %s; exec %s llm-demo-engine --port %s --model %s --load-time %s%s",
		model, startsLog, engineBin, port, model, loadTime, extra)
}

func writeGatewayCaddyfile(dir string, v gatewayVariant, names []string, loadTime time.Duration, adminPort, sitePort int) (string, error) {
	startsLog := filepath.Join(dir, "starts.log")
	if err := shellSafe(startsLog); err != nil {
		return "", err
	}
	var engines strings.Builder
	for _, m := range names {
		line := engineShell(startsLog, "{gateway.executable}", "{engine.port}", m, loadTime, v.engineFlags)
		fmt.Fprintf(&engines, gatewayEngine, m, line, v.engineLines)
	}
	cf := fmt.Sprintf(gatewayCaddyfile, adminPort, sitePort, filepath.Join(dir, "caddy.log"), v.handlerLines, engines.String())
	path := filepath.Join(dir, "Caddyfile")
	return path, os.WriteFile(path, []byte(cf), 0o644)
}

// adapts reports whether Caddy accepts the Caddyfile, and if not, why (the
// last line of `caddy adapt`'s output).
func adapts(caddyBin, caddyfile string) (bool, string) {
	out, err := exec.Command(caddyBin, "adapt", "--config", caddyfile, "--adapter", "caddyfile").CombinedOutput()
	if err == nil {
		return true, ""
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	last := lines[len(lines)-1]
	var entry struct {
		Msg string `json:"msg"`
	}
	if json.Unmarshal([]byte(last), &entry) == nil && entry.Msg != "" {
		return false, entry.Msg // Caddy logs the error as JSON
	}
	return false, last
}

// startAdapted starts Caddy on caddyfile once it adapts. A variant whose
// syntax this build lacks (pending) is reported unavailable, with why.
func startAdapted(o options, caddyfile, dir string, pending bool, pendingReason string) (*harness.Process, string, error) {
	if ok, why := adapts(o.caddyBin, caddyfile); !ok {
		if pending {
			return nil, fmt.Sprintf("%s (caddy adapt: %s)", pendingReason, why), nil
		}
		return nil, "", fmt.Errorf("%s: caddy adapt: %s", caddyfile, why)
	}
	p, err := harness.StartCaddy(o.caddyBin, caddyfile, dir, filepath.Join(dir, "caddy.stderr"))
	return p, "", err
}

// runGateway plays the trace against a fresh Caddy configured as v.
func runGateway(ctx context.Context, o options, v gatewayVariant, tr trace) (traceResult, error) {
	res := traceResult{target: v.label}
	dir, err := targetDir(o.outDir, v.name)
	if err != nil {
		return res, err
	}
	ports, err := harness.FreePorts(2)
	if err != nil {
		return res, err
	}
	adminPort, sitePort := ports[0], ports[1]
	caddyfile, err := writeGatewayCaddyfile(dir, v, tr.engineNames(), o.loadTime, adminPort, sitePort)
	if err != nil {
		return res, err
	}
	caddy, unavailable, err := startAdapted(o, caddyfile, dir, v.pendingIfBad, v.pendingReason)
	if err != nil || unavailable != "" {
		res.unavailable = unavailable
		return res, err
	}
	admin := fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	site := fmt.Sprintf("http://127.0.0.1:%d", sitePort)
	defer stopTarget(caddy, dir)
	if err := harness.WaitHTTP(ctx, admin+"/llm_gateway/engines", caddy, 15*time.Second); err != nil {
		return res, err
	}
	if err := harness.WaitHTTP(ctx, site+"/v1/models", caddy, 15*time.Second); err != nil {
		return res, err
	}

	outs, start := play(ctx, newClient(o.clientTimeout), site+"/v1/chat/completions", "", tr)
	res = summarize(v.label, outs, start)
	res.starts, res.startsBy, err = countStarts(dir)
	if err != nil {
		return res, err
	}
	if n, err := metricStarts(admin); err == nil {
		res.crossCheck = fmt.Sprintf("llm_gateway_engine_starts_total: %s", n)
	}
	if w, err := metricSum(admin, "llm_gateway_engine_wakes_total{"); err == nil && w > 0 {
		res.crossCheck += fmt.Sprintf("; wakes %.0f (not starts: the process was kept asleep)", w)
	}
	return res, nil
}

// llamaSwapYAML is llama-swap's config: the same engines, ports picked here,
// one group that lets one member run at a time and unloads every other group.
const llamaSwapYAML = `# generated by bench/swap: the engines of the gateway's targets, for llama-swap
healthCheckTimeout: 300
logLevel: info
models:
%s
groups:
  gpu:
    swap: true
    exclusive: true
    members: [%s]
`

const llamaSwapModel = `  %[1]s:
    cmd: sh -c '%[2]s'
    proxy: http://127.0.0.1:%[3]d
    checkEndpoint: /health
%[4]s`

// runLlamaSwap plays the trace against llama-swap (its binary is o.llamaSwap).
func runLlamaSwap(ctx context.Context, o options, tr trace) (traceResult, error) {
	label := "llama-swap " + llamaSwapVersion(o.llamaSwap) + " (swap, exclusive)"
	if o.llamaSwapLimit > 0 {
		label = fmt.Sprintf("llama-swap %s (swap, exclusive, concurrencyLimit %d)", llamaSwapVersion(o.llamaSwap), o.llamaSwapLimit)
	}
	res := traceResult{target: label}
	dir, err := targetDir(o.outDir, "llama-swap")
	if err != nil {
		return res, err
	}
	engineBin, err := filepath.Abs(o.caddyBin)
	if err != nil {
		return res, err
	}
	startsLog := filepath.Join(dir, "starts.log")
	if err := shellSafe(startsLog, engineBin); err != nil {
		return res, err
	}
	names := tr.engineNames()
	ports, err := harness.FreePorts(len(names) + 1)
	if err != nil {
		return res, err
	}
	var models strings.Builder
	for i, m := range names {
		line := engineShell(startsLog, engineBin, strconv.Itoa(ports[i+1]), m, o.loadTime, "")
		limit := "" // llama-swap's default: 10 requests per model, waiting ones included
		if o.llamaSwapLimit > 0 {
			limit = fmt.Sprintf("    concurrencyLimit: %d\n", o.llamaSwapLimit)
		}
		fmt.Fprintf(&models, llamaSwapModel, m, line, ports[i+1], limit)
	}
	config := filepath.Join(dir, "config.yaml")
	if err := os.WriteFile(config, []byte(fmt.Sprintf(llamaSwapYAML, models.String(), strings.Join(names, ", "))), 0o644); err != nil {
		return res, err
	}
	base := fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	ls, err := harness.Start("llama-swap", []string{o.llamaSwap, "-config", config, "-listen", strings.TrimPrefix(base, "http://")},
		nil, filepath.Join(dir, "llama-swap.log"))
	if err != nil {
		return res, err
	}
	defer stopTarget(ls, dir)
	if err := harness.WaitHTTP(ctx, base+"/health", ls, 15*time.Second); err != nil {
		return res, err
	}

	outs, start := play(ctx, newClient(o.clientTimeout), base+"/v1/chat/completions", "", tr)
	res = summarize(label, outs, start)
	res.starts, res.startsBy, err = countStarts(dir)
	return res, err
}

func llamaSwapVersion(bin string) string {
	out, err := exec.Command(bin, "-version").Output()
	if err != nil {
		return "(version unknown)"
	}
	// "version: v250-5-g0bdb3720 (abcd1234), built at unknown"
	f := strings.Fields(string(out))
	if len(f) >= 2 && f[0] == "version:" {
		return f[1]
	}
	return "(version unknown)"
}

func newClient(timeout time.Duration) *http.Client {
	return &http.Client{
		Timeout:   timeout,
		Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true},
	}
}

// startRecord is one line of starts.log.
type startRecord struct {
	model string
	pid   int
}

func readStarts(dir string) ([]startRecord, error) {
	f, err := os.Open(filepath.Join(dir, "starts.log"))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var recs []startRecord
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		if len(fs) != 2 {
			return nil, fmt.Errorf("starts.log: unexpected line %q", sc.Text())
		}
		pid, err := strconv.Atoi(fs[1])
		if err != nil {
			return nil, fmt.Errorf("starts.log: unexpected line %q", sc.Text())
		}
		recs = append(recs, startRecord{fs[0], pid})
	}
	return recs, sc.Err()
}

func countStarts(dir string) (int, map[string]int, error) {
	recs, err := readStarts(dir)
	by := map[string]int{}
	for _, r := range recs {
		by[r.model]++
	}
	return len(recs), by, err
}

// stopTarget stops the gateway or llama-swap, then makes sure no engine it
// started outlives it: engines run in their own process groups, so stopping
// the target's group does not reach them. A survivor is reported and killed
// by its pid (after checking it still is a demo engine).
func stopTarget(p *harness.Process, dir string) {
	p.Stop(10 * time.Second)
	recs, _ := readStarts(dir)
	for _, r := range recs {
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", r.pid))
		if err != nil || !strings.Contains(string(cmdline), "llm-demo-engine") {
			continue
		}
		fmt.Fprintf(os.Stderr, "swap: engine %s (pid %d) outlived %s; killing it\n", r.model, r.pid, p.Name)
		_ = syscall.Kill(r.pid, syscall.SIGKILL)
	}
}

// metricStarts is the sum of llm_gateway_engine_starts_total by result, as
// "N ok, M failed", from the admin endpoint's metrics.
func metricStarts(admin string) (string, error) {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return "", err
	}
	sum := map[string]float64{}
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, "llm_gateway_engine_starts_total{") {
			continue
		}
		labels, value, ok := strings.Cut(line, "} ")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(value, 64)
		if err != nil {
			continue
		}
		for _, result := range []string{"ok", "failed"} {
			if strings.Contains(labels, `result="`+result+`"`) {
				sum[result] += v
			}
		}
	}
	return fmt.Sprintf("%.0f ok, %.0f failed", sum["ok"], sum["failed"]), nil
}
