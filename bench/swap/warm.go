//go:build unix

package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// Warm swaps, with the demo engine's scripted sleep mode
// (-wake-time, -sleep-time: vLLM's published level-1 wake is 0.1-0.4 s
// against 30-100+ s for a cold load) and slots (-slots, -slot-save-path,
// -prefill-per-token):
//
//   - swap time: two engines that do not fit together (memory 1, budget 1),
//     asked in turn A B A B …, one request at a time: each request is a swap.
//     Its latency with `swap sleep`, against the engines' cold start (the
//     first request of each) and against the same turns with `swap stop`.
//   - resumed conversation: a conversation of -turns turns on L (one slot):
//     a document of about 1,500 tokens, then a short question each turn;
//     another engine M asked after every second turn (it swaps L out); the
//     prompt tokens L processes for each turn after a swap, as a share of
//     the conversation, with and without `slots save`.

// sleepVariant is gw-memory with swap sleep, for the trace.
func sleepVariant(o options) gatewayVariant {
	return gatewayVariant{
		name:         "gw-sleep",
		label:        "gateway, memory 1 / memory_budget 1, swap sleep",
		handlerLines: "\t\tmemory_budget 1\n",
		engineLines:  "\t\t\tmemory 1\n\t\t\tswap sleep\n",
		engineFlags:  fmt.Sprintf(" --wake-time %s --sleep-time %s", o.wakeTime, o.sleepTime),
		pendingIfBad: true, pendingReason: "warm swaps (issue 26: swap sleep) are not in this build",
	}
}

// warmGateway starts a Caddy whose handler holds handler (engines
// included), and returns its site and admin URLs and how to stop it.
func warmGateway(ctx context.Context, o options, name, handler string) (site, admin string, stop func(), err error) {
	dir, err := targetDir(o.outDir, name)
	if err != nil {
		return "", "", nil, err
	}
	ports, err := harness.FreePorts(2)
	if err != nil {
		return "", "", nil, err
	}
	cf := fmt.Sprintf(gatewayCaddyfile, ports[0], ports[1], filepath.Join(dir, "caddy.log"), handler, "")
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := writeFile(caddyfile, cf); err != nil {
		return "", "", nil, err
	}
	caddy, unavailable, err := startAdapted(o, caddyfile, dir, true, "warm swaps (issue 26) are not in this build")
	if err != nil {
		return "", "", nil, err
	}
	if unavailable != "" {
		return "", "", nil, fmt.Errorf("%s", unavailable)
	}
	site, admin = fmt.Sprintf("http://127.0.0.1:%d", ports[1]), fmt.Sprintf("http://127.0.0.1:%d", ports[0])
	stop = func() { stopTarget(caddy, dir) }
	if err := harness.WaitHTTP(ctx, site+"/v1/models", caddy, 15*time.Second); err != nil {
		stop()
		return "", "", nil, err
	}
	return site, admin, stop, nil
}

// warmEngine is an engine block: the demo engine with flags, memory 1,
// and lines.
func warmEngine(name, flags, lines string) string {
	return fmt.Sprintf("\t\tengine %[1]s {\n\t\t\tcmd {gateway.executable} llm-demo-engine --port {engine.port} --model %[1]s %[2]s\n"+
		"\t\t\tto http://127.0.0.1:{engine.port}\n\t\t\tmodels %[1]s\n\t\t\tmemory 1\n%[3]s\t\t}\n", name, flags, lines)
}

type swapRun struct {
	mode  string
	cold  []time.Duration // the first request of each engine
	swaps []time.Duration // every later one: a swap
	wakes float64
}

func runSwapTimes(ctx context.Context, o options, mode string) (swapRun, error) {
	r := swapRun{mode: mode}
	flags := fmt.Sprintf("--load-time %s --wake-time %s --sleep-time %s", o.loadTime, o.wakeTime, o.sleepTime)
	handler := "\t\tmemory_budget 1\n" + warmEngine("A", flags, "\t\t\tswap "+mode+"\n") + warmEngine("B", flags, "\t\t\tswap "+mode+"\n")
	site, admin, stop, err := warmGateway(ctx, o, "warm-swap-"+mode, handler)
	if err != nil {
		return r, err
	}
	defer stop()
	client := newClient(o.clientTimeout)
	for i := range 2 + 2*o.swaps {
		model := []string{"A", "B"}[i%2]
		out := complete(ctx, client, site+"/v1/chat/completions", "", model)
		if !out.ok() {
			return r, fmt.Errorf("%s: %s", model, failureReason(out))
		}
		d := out.done.Sub(out.sent)
		if i < 2 {
			r.cold = append(r.cold, d)
		} else {
			r.swaps = append(r.swaps, d)
		}
	}
	r.wakes, _ = metricSum(admin, "llm_gateway_engine_wakes_total{")
	slices.Sort(r.swaps)
	return r, nil
}

type resumeRun struct {
	slots    bool
	whole    []int // the conversation's prompt tokens at each resumed turn
	fresh    []int // the tokens processed for it
	restored []int
	latency  []time.Duration
}

func runResume(ctx context.Context, o options, slots bool) (resumeRun, error) {
	r := resumeRun{slots: slots}
	dir, err := filepath.Abs(filepath.Join(o.outDir, "warm-slots"))
	if err != nil {
		return r, err
	}
	_ = os.RemoveAll(dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return r, err
	}
	flags := fmt.Sprintf("--load-time %s --slots 1 --slot-save-path %s --prefill-per-token %s", o.loadTime, dir, o.prefillPerToken)
	lines := ""
	name := "warm-resume-stop"
	if slots {
		lines, name = "\t\t\tslots save "+dir+"\n", "warm-resume-slots"
	}
	handler := "\t\tmemory_budget 1\n" + warmEngine("L", flags, lines) + warmEngine("M", fmt.Sprintf("--load-time %s", o.loadTime), "")
	site, admin, stop, err := warmGateway(ctx, o, name, handler)
	if err != nil {
		return r, err
	}
	defer stop()
	client := newClient(o.clientTimeout)
	url := site + "/v1/chat/completions"
	var msgs []map[string]string
	// a document, then short questions about it: the shape of a long
	// conversation, whose every turn resends what the engine holds
	doc := strings.Repeat("a long document that the conversation is about and the engine keeps in its cache ", 100)
	for turn := range o.turns {
		content := fmt.Sprintf("question %d about it: what does part %d say?", turn, turn)
		if turn == 0 {
			content = doc + content
		}
		msgs = append(msgs, map[string]string{"role": "user", "content": content})
		swapped := turn > 0 && turn%2 == 0
		if swapped {
			if out := complete(ctx, client, url, "", "M"); !out.ok() { // L is swapped out
				return r, fmt.Errorf("model M: %s", failureReason(out))
			}
		}
		before := counters(admin, "L")
		body, _ := json.Marshal(map[string]any{"model": "L", "messages": msgs})
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(string(body)))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("X-Session-Id", "bench-conversation")
		sent := time.Now()
		resp, err := client.Do(req)
		if err != nil {
			return r, err
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		took := time.Since(sent)
		if resp.StatusCode != 200 {
			return r, fmt.Errorf("model L: status %d", resp.StatusCode)
		}
		msgs = append(msgs, map[string]string{"role": "assistant", "content": "noted"})
		after := counters(admin, "L")
		if !swapped {
			continue
		}
		if after.Processed < before.Processed { // a fresh process: its counts are this turn's
			before = warmCounters{}
		}
		r.whole = append(r.whole, int(after.Processed-before.Processed+after.Cached-before.Cached))
		r.fresh = append(r.fresh, int(after.Processed-before.Processed))
		r.restored = append(r.restored, int(after.Restored-before.Restored))
		r.latency = append(r.latency, took)
	}
	return r, nil
}

type warmCounters struct {
	Processed int64 `json:"prompt_tokens_processed"`
	Cached    int64 `json:"prompt_tokens_cached"`
	Restored  int64 `json:"tokens_restored"`
}

// counters asks engine name's demo engine (its port from the admin API)
// what it processed; zero when it is not running.
func counters(admin, name string) warmCounters {
	var c warmCounters
	resp, err := http.Get(admin + "/llm_gateway/engines/" + name)
	if err != nil {
		return c
	}
	var st struct {
		Port int `json:"port"`
	}
	_ = json.NewDecoder(resp.Body).Decode(&st)
	resp.Body.Close()
	if st.Port == 0 {
		return c
	}
	resp, err = http.Get("http://127.0.0.1:" + strconv.Itoa(st.Port) + "/counters")
	if err != nil {
		return c
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&c)
	return c
}

func runWarm(ctx context.Context, o options) error {
	var runs []swapRun
	for _, mode := range []string{"stop", "sleep"} {
		fmt.Fprintf(os.Stderr, "swap: warm, swap %s ...\n", mode)
		r, err := runSwapTimes(ctx, o, mode)
		if err != nil {
			return fmt.Errorf("swap %s: %v", mode, err)
		}
		runs = append(runs, r)
	}
	var resumes []resumeRun
	for _, slots := range []bool{false, true} {
		fmt.Fprintf(os.Stderr, "swap: warm, resumed conversation (slots save %t) ...\n", slots)
		r, err := runResume(ctx, o, slots)
		if err != nil {
			return fmt.Errorf("resume: %v", err)
		}
		resumes = append(resumes, r)
	}
	printWarm(os.Stdout, o, runs, resumes)
	return nil
}

func printWarm(w io.Writer, o options, runs []swapRun, resumes []resumeRun) {
	fmt.Fprintf(w, "\nwarm swaps: two engines, one fits (memory 1, budget 1), asked A B A B … one at a time; cold load %v,\n", o.loadTime)
	fmt.Fprintf(w, "scripted sleep %v and wake %v (the demo engine's); each request after the first two is a swap\n\n", o.sleepTime, o.wakeTime)
	const row = "%-12s %14s %12s %12s %12s %12s %8s\n"
	fmt.Fprintf(w, row, "swap", "cold start", "swap min", "swap p50", "swap max", "p50 / cold", "wakes")
	fmt.Fprintln(w, strings.Repeat("-", 90))
	var sleepRatio float64
	for _, r := range runs {
		cold := (r.cold[0] + r.cold[1]) / 2
		p50 := percentile(r.swaps, 50)
		ratio := p50.Seconds() / cold.Seconds()
		if r.mode == "sleep" {
			sleepRatio = ratio
		}
		fmt.Fprintf(w, row, r.mode, secs(cold), secs(r.swaps[0]), secs(p50), secs(r.swaps[len(r.swaps)-1]),
			fmt.Sprintf("%.1f %%", 100*ratio), fmt.Sprint(r.wakes))
	}
	verdict := "FAIL"
	if sleepRatio <= 0.10 {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "goal of issue 26: a swap with swap sleep <= 10 %% of a cold start: %.1f %%: %s\n", 100*sleepRatio, verdict)

	fmt.Fprintf(w, "\nresumed conversation: %d turns on L (1 slot, %v per prompt token processed); M asked after every second turn swaps L out\n\n", o.turns, o.prefillPerToken)
	const row2 = "%-18s %-34s %-34s %s\n"
	fmt.Fprintf(w, row2, "L", "tokens processed / conversation", "latency of the resumed turn", "restored")
	fmt.Fprintln(w, strings.Repeat("-", 110))
	var worst float64
	for _, r := range resumes {
		name := "slots save off"
		if r.slots {
			name = "slots save"
		}
		var parts, lat, rest []string
		share := 0.0
		for i := range r.whole {
			parts = append(parts, fmt.Sprintf("%d/%d", r.fresh[i], r.whole[i]))
			lat = append(lat, secs(r.latency[i]))
			rest = append(rest, fmt.Sprint(r.restored[i]))
			if r.whole[i] > 0 {
				share = max(share, float64(r.fresh[i])/float64(r.whole[i]))
			}
		}
		if r.slots {
			worst = share
		}
		fmt.Fprintf(w, row2, name, strings.Join(parts, " "), strings.Join(lat, " "), strings.Join(rest, " "))
	}
	verdict = "FAIL"
	if worst <= 0.10 {
		verdict = "PASS"
	}
	fmt.Fprintf(w, "goal of issue 26: a resumed turn processes <= 10 %% of the conversation: at most %.1f %%: %s\n", 100*worst, verdict)
}

// metricSum is the sum of the series whose line starts with prefix, from
// the admin endpoint's metrics.
func metricSum(admin, prefix string) (float64, error) {
	resp, err := http.Get(admin + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		return 0, err
	}
	sum := 0.0
	for line := range strings.SplitSeq(string(b), "\n") {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		if _, value, ok := strings.Cut(line, "} "); ok {
			if v, err := strconv.ParseFloat(value, 64); err == nil {
				sum += v
			}
		}
	}
	return sum, nil
}
