//go:build unix

package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// The priorities scenario: engine A serves one request at a time
// (max_concurrent 1, a queue behind it), a batch key keeps 8 streams asking
// for A back to back, and an interactive key asks A once a second. What the
// interactive client waits before its first event is its queue wait: the
// engine sends the first event as soon as it takes the request.
const priorityEngine = `		engine A {
			cmd {gateway.executable} llm-demo-engine --port {engine.port} --model A --load-time %[1]s --chunk-delay %[2]s
			to http://127.0.0.1:{engine.port}
			models A
			max_concurrent 1
			queue 64 5m
		}
`

const (
	batchToken       = "sk-bench-batch-00112233445566778899"
	interactiveToken = "sk-bench-interactive-0011223344556677"
)

// priorityVariant is how the keys are written: without priorities (first
// come, first served, today) or with the scheduler's priority per key.
type priorityVariant struct {
	name, label   string
	keys          string
	pendingIfBad  bool
	pendingReason string
}

var (
	priorityFIFO = priorityVariant{
		name:  "prio-fifo",
		label: "gateway, keys without priority (FIFO, today)",
		keys:  "\t\tkey batch " + batchToken + "\n\t\tkey interactive " + interactiveToken + "\n",
	}
	priorityKeys = priorityVariant{
		name:  "prio-keys",
		label: "gateway, priority 0 batch / 10 interactive",
		keys: "\t\tkey batch " + batchToken + " {\n\t\t\tpriority 0\n\t\t}\n" +
			"\t\tkey interactive " + interactiveToken + " {\n\t\t\tpriority 10\n\t\t}\n",
		pendingIfBad:  true,
		pendingReason: "the scheduler of issue 29 (priority per key) is not in this build",
	}
)

// priorityResult is one row of the scenario.
type priorityResult struct {
	label       string
	unavailable string
	alone       time.Duration   // an interactive stream's wait with no batch running (median of 3)
	service     time.Duration   // an interactive stream's length with no batch running: one slot's turn
	waits       []time.Duration // the interactive streams' waits under the batch, sorted
	batchDone   int
	failed      int
	failures    map[string]int
}

func runPriority(ctx context.Context, o options, v priorityVariant) (priorityResult, error) {
	res := priorityResult{label: v.label, failures: map[string]int{}}
	dir, err := targetDir(o.outDir, v.name)
	if err != nil {
		return res, err
	}
	ports, err := harness.FreePorts(2)
	if err != nil {
		return res, err
	}
	adminPort, sitePort := ports[0], ports[1]
	engine := fmt.Sprintf(priorityEngine, o.loadTime, o.chunkDelay)
	cf := fmt.Sprintf(gatewayCaddyfile, adminPort, sitePort, filepath.Join(dir, "caddy.log"), v.keys, engine)
	caddyfile := filepath.Join(dir, "Caddyfile")
	if err := writeFile(caddyfile, cf); err != nil {
		return res, err
	}
	caddy, unavailable, err := startAdapted(o, caddyfile, dir, v.pendingIfBad, v.pendingReason)
	if err != nil || unavailable != "" {
		res.unavailable = unavailable
		return res, err
	}
	defer caddy.Stop(10 * time.Second)
	site := fmt.Sprintf("http://127.0.0.1:%d", sitePort)
	if err := harness.WaitHTTP(ctx, site+"/v1/models", caddy, 15*time.Second); err != nil {
		return res, err
	}
	client := newClient(o.clientTimeout)
	url := site + "/v1/chat/completions"

	// the first request starts the engine; then the unloaded figures
	if s := stream(ctx, client, url, batchToken); s.err != nil {
		return res, fmt.Errorf("warm-up: %v", s.err)
	}
	var alone, service []time.Duration
	for range 3 {
		s := stream(ctx, client, url, interactiveToken)
		if s.err != nil {
			return res, fmt.Errorf("unloaded stream: %v", s.err)
		}
		alone, service = append(alone, s.wait), append(service, s.total)
	}
	slices.Sort(alone)
	slices.Sort(service)
	res.alone, res.service = alone[1], service[1]

	var mu sync.Mutex
	fail := func(s streamOutcome) {
		mu.Lock()
		res.failed++
		res.failures[s.err.Error()]++
		mu.Unlock()
	}
	end := time.Now().Add(o.priorityFor)
	var wg sync.WaitGroup
	for range o.batchClients {
		wg.Go(func() {
			for time.Now().Before(end) && ctx.Err() == nil {
				s := stream(ctx, client, url, batchToken)
				if s.err != nil {
					fail(s)
					continue
				}
				mu.Lock()
				res.batchDone++
				mu.Unlock()
			}
		})
	}
	// the interactive client starts once the batch fills the queue, and
	// asks once a second, each request in its own goroutine
	for at := time.Now().Add(time.Second); at.Before(end); at = at.Add(time.Second) {
		if !sleepUntil(ctx, at) {
			break
		}
		wg.Go(func() {
			s := stream(ctx, client, url, interactiveToken)
			if s.err != nil {
				fail(s)
				return
			}
			mu.Lock()
			res.waits = append(res.waits, s.wait)
			mu.Unlock()
		})
	}
	wg.Wait()
	slices.Sort(res.waits)
	return res, nil
}

type streamOutcome struct {
	wait  time.Duration // sent -> first data event
	total time.Duration // sent -> [DONE]
	err   error
}

// stream sends one streaming completion for A and reads it to the end. The
// wait ends at the first `data:` event, not at the response headers: the
// gateway may answer with headers and keep-alive comments while it waits.
func stream(ctx context.Context, client *http.Client, url, token string) streamOutcome {
	var so streamOutcome
	body := strings.NewReader(`{"model":"A","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, url, body)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	sent := time.Now()
	resp, err := client.Do(req)
	if err != nil {
		so.err = err
		return so
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		so.err = fmt.Errorf("status %d", resp.StatusCode)
		return so
	}
	sc := bufio.NewScanner(resp.Body)
	done := false
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "data:") {
			continue
		}
		if so.wait == 0 {
			so.wait = time.Since(sent)
		}
		payload := strings.TrimSpace(strings.TrimPrefix(line, "data:"))
		if strings.HasPrefix(payload, `{"error"`) {
			so.err = fmt.Errorf("error in the stream")
			return so
		}
		if payload == "[DONE]" {
			done = true
			break
		}
	}
	so.total = time.Since(sent)
	if !done {
		so.err = fmt.Errorf("stream ended without [DONE]")
	}
	return so
}
