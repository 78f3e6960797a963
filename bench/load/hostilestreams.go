//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// The hostile phase's translated streams (issue 51): a runaway model, or a
// hostile node, answering every stream with one tool call of
// transArgsSize bytes of arguments, to Responses clients of a Chat-only
// engine (whose closing events would repeat the arguments whole: before the
// bound, 100 such streams took Caddy from 56 MB to 3.3 GB) and to Messages
// clients of it (who keep nothing of the answer: they get all of it). All
// streams at once, in a fresh Caddy: goal, its peak RSS at most its idle
// RSS + transRSSLimitMB, and every Responses stream cut with an in-band
// error, every Messages stream whole.
const (
	transStreams    = 100
	transArgsSize   = 10 << 20
	transRSSLimitMB = 150
)

// transStreamsCaddyfile is their Caddy: the gateway alone with a Chat-only
// engine. Arguments: the global options' admin and log file, gw port,
// upstream port.
const transStreamsCaddyfile = globalOptions + `
http://127.0.0.1:%d {
	llm_gateway {
		engine upchat {
			to http://127.0.0.1:%d
			models bench-chat
			api chat
		}
	}
}
`

// transStreamsResult is what runTransStreams measured for one client API.
type transStreamsResult struct {
	api                string
	streams, expected  int   // sent, and ended as they must (cut in-band, or whole)
	idleKB, peakKB     int64 // Caddy's VmRSS before, VmHWM during them
	clientMB, upMB     float64
	longest            time.Duration
	firstUnexpectedErr string
}

// transStreamsPhase runs the translated streams for Responses, then
// Messages clients, each in a fresh Caddy, and adds their rows.
func transStreamsPhase(ctx context.Context, e *env, r *report) error {
	for _, ask := range []struct {
		api, path, body string
		header          map[string]string
		cut             bool
	}{
		{"Responses", "/v1/responses", `{"model":"bench-chat","input":"write the file","stream":true}`, nil, true},
		{"Messages", "/v1/messages", `{"model":"bench-chat","max_tokens":64,"messages":[{"role":"user","content":"write the file"}],"stream":true}`,
			map[string]string{"anthropic-version": "2023-06-01"}, false},
	} {
		res, err := runTransStreams(ctx, e, ask.api, ask.path, ask.body, ask.header, ask.cut)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("translated streams, %s: %v", ask.api, err)
		}
		progress("translated streams, %s clients: %d/%d as expected, Caddy VmRSS %d KB idle, peak %d KB; %.1f MB to the clients, %.1f MB of arguments sent by the upstream; longest %v",
			res.api, res.expected, res.streams, res.idleKB, res.peakKB, res.clientMB, res.upMB, res.longest.Round(time.Millisecond))
		r.addTransStreams(res, ask.cut)
	}
	return nil
}

func runTransStreams(ctx context.Context, e *env, api, path, body string, header map[string]string, cut bool) (transStreamsResult, error) {
	res := transStreamsResult{api: api, streams: transStreams}
	file := filepath.Join(e.outDir, "transstreams.Caddyfile")
	logFile, _ := filepath.Abs(filepath.Join(e.outDir, "caddy-transstreams.log"))
	if err := os.WriteFile(file, fmt.Appendf(nil, transStreamsCaddyfile, "admin off", logFile, e.gwPort, e.upPort), 0o644); err != nil {
		return res, err
	}
	if err := e.startCaddyWith(ctx, file, e.gwPort); err != nil {
		return res, err
	}
	defer e.stopCaddy()
	gw, up := e.url(e.gwPort), e.url(e.upPort)
	client, tr := newClient(transStreams + 1)
	defer tr.CloseIdleConnections()
	for range 3 { // the engine's transport and a translated stream's pieces belong to the baseline
		if _, err := transStream(ctx, client, gw+path, body, header, "16384"); err != nil {
			return res, fmt.Errorf("warm-up: %v", err)
		}
	}
	if _, err := upstreamCalls(ctx, up, true); err != nil {
		return res, err
	}
	pid := e.caddy.PID()
	if err := os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0); err != nil {
		return res, fmt.Errorf("resetting Caddy's peak RSS: %v", err)
	}
	idle, err := harness.RSS(pid)
	if err != nil {
		return res, err
	}
	res.idleKB = idle >> 10

	var mu sync.Mutex
	var wg sync.WaitGroup
	var clientBytes int64
	start := time.Now()
	for range transStreams {
		wg.Go(func() {
			a, err := transStream(ctx, client, gw+path, body, header, strconv.Itoa(transArgsSize))
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			clientBytes += a.n
			res.longest = max(res.longest, took)
			ok := err == nil && a.status == http.StatusOK && (cut && a.inBand && a.readErr != nil || !cut && a.whole)
			if ok {
				res.expected++
			} else if res.firstUnexpectedErr == "" {
				res.firstUnexpectedErr = fmt.Sprintf("%d, %d bytes, %v %v, ending %q", a.status, a.n, err, a.readErr, a.tail)
			}
		})
	}
	wg.Wait()
	if res.peakKB, err = peakRSSKB(pid); err != nil {
		return res, err
	}
	calls, err := upstreamCalls(ctx, up, false)
	if err != nil {
		return res, err
	}
	res.clientMB, res.upMB = float64(clientBytes)/(1<<20), float64(calls.ToolArgsSent)/(1<<20)
	if res.firstUnexpectedErr != "" {
		progress("translated streams, %s: first unexpected: %s", api, res.firstUnexpectedErr)
	}
	return res, nil
}

// transAnswer is what a client of a translated stream read.
type transAnswer struct {
	status  int
	n       int64
	tail    []byte // the last bytes of the stream
	inBand  bool   // an error event ends it
	whole   bool   // it ends with the API's last event
	readErr error  // the stream's end: nil for a clean one
}

// transStream sends one stream asking for a tool call of args bytes of
// arguments, and reads it to its end, keeping only its last bytes.
func transStream(ctx context.Context, client *http.Client, url, body string, header map[string]string, args string) (transAnswer, error) {
	var a transAnswer
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader([]byte(body)))
	if err != nil {
		return a, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bench-Tool-Args", args)
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return a, err
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	tail := &tailWriter{keep: 4 << 10}
	a.n, a.readErr = io.Copy(tail, resp.Body)
	a.tail = tail.b
	last := finalEvent(a.tail)
	a.inBand = bytes.Contains(last, []byte(`"error"`))
	a.whole = a.readErr == nil && (bytes.HasPrefix(last, []byte("event: message_stop\n")) || bytes.HasPrefix(last, []byte("event: response.completed\n")))
	return a, nil
}

// tailWriter keeps the last keep bytes written to it.
type tailWriter struct {
	b    []byte
	keep int
}

func (t *tailWriter) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*t.keep {
		t.b = append(t.b[:0], t.b[len(t.b)-t.keep:]...)
	}
	return len(p), nil
}

// addTransStreams turns a run of translated streams into rows.
func (r *report) addTransStreams(t transStreamsResult, cut bool) {
	end := "whole"
	if cut {
		end = "cut in-band"
	}
	limit := t.idleKB + transRSSLimitMB<<10
	r.check(fmt.Sprintf("%d %s streams of %d MB tool arguments: peak RSS", t.streams, t.api, transArgsSize>>20),
		fmt.Sprintf("%d MB", t.peakKB>>10), fmt.Sprintf("<= idle + %d MB", transRSSLimitMB), t.peakKB > 0 && t.peakKB <= limit)
	r.check(fmt.Sprintf("  streams %s", end), fmt.Sprintf("%d/%d", t.expected, t.streams), "all", t.expected == t.streams)
	r.info("  idle RSS / to the clients / sent upstream (MB)", fmt.Sprintf("%d / %.0f / %.0f", t.idleKB>>10, t.clientMB, t.upMB))
}
