//go:build unix

package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// warmup is how long each timed run runs before it starts counting: long
// enough to open every keep-alive connection.
const warmup = 300 * time.Millisecond

// maxRequestsPerWorker bounds a closed-loop worker however fast the target is.
const maxRequestsPerWorker = 10_000_000

// throughput runs conc closed-loop workers sending non-streaming completions
// on keep-alive connections and returns completions per second over dur,
// after warmup.
func throughput(ctx context.Context, url string, conc int, dur time.Duration) (rps float64, failed int64) {
	client, tr := newClient(conc)
	defer tr.CloseIdleConnections()
	from := time.Now().Add(warmup)
	end := from.Add(dur)
	var ok, bad atomic.Int64
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for range maxRequestsPerWorker {
				if ctx.Err() != nil || !time.Now().Before(end) {
					return
				}
				err := completeOnce(ctx, client, url)
				now := time.Now()
				if now.Before(from) || now.After(end) {
					continue
				}
				if err != nil {
					bad.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return float64(ok.Load()) / dur.Seconds(), bad.Load()
}

// maxInFlight bounds the open-loop generator: a request that would exceed it
// is dropped and counted, never queued.
const maxInFlight = 1024

// latency sends non-streaming completions at a fixed rate (open loop: each
// request leaves on schedule in its own goroutine, so a slow answer does not
// delay the next one) and returns the p50 and p99 of the time from sending
// each request to its last byte.
func latency(ctx context.Context, url string, rate int, dur time.Duration) (p50, p99 time.Duration, failed, dropped int) {
	client, tr := newClient(64)
	defer tr.CloseIdleConnections()
	interval := time.Second / time.Duration(rate)
	skip := int(warmup / interval)
	n := skip + int(dur/interval)
	lat := make([]time.Duration, n)
	errs := make([]bool, n)
	sem := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	start := time.Now()
	for i := 0; i < n && ctx.Err() == nil; i++ {
		due := start.Add(time.Duration(i) * interval)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		}
		select {
		case sem <- struct{}{}:
		default:
			errs[i] = true
			if i >= skip {
				dropped++
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			sent := time.Now()
			err := completeOnce(ctx, client, url)
			lat[i], errs[i] = time.Since(sent), err != nil
		})
	}
	wg.Wait()
	var ok []time.Duration
	for i := skip; i < n; i++ {
		if errs[i] {
			failed++
			continue
		}
		ok = append(ok, lat[i])
	}
	failed -= dropped
	return percentile(ok, 50), percentile(ok, 99), failed, dropped
}

// streamLatency sends n streams one after another and returns the median
// time to first byte and to the end of the stream.
func streamLatency(ctx context.Context, url string, n int) (ttfb, total time.Duration, failed int) {
	client, tr := newClient(1)
	defer tr.CloseIdleConnections()
	for range 10 { // open the connection, warm the paths
		streamOnce(ctx, client, url, 0, nil)
	}
	var firsts, totals []time.Duration
	for i := 0; i < n && ctx.Err() == nil; i++ {
		r := streamOnce(ctx, client, url, 0, nil)
		if r.err != nil {
			failed++
			continue
		}
		firsts, totals = append(firsts, r.ttfb), append(totals, r.total)
	}
	return percentile(firsts, 50), percentile(totals, 50), failed
}

// cpuResult is the Caddy process's CPU time over one streaming phase.
type cpuResult struct {
	perChunk time.Duration
	cpu      time.Duration
	chunks   int64
	failed   int64
}

// streamCPU sends n streams with conc at a time through url and divides the
// CPU time the Caddy process used meanwhile by the chunks delivered. Both
// sites live in that one process, so only one target may be under load.
func streamCPU(ctx context.Context, url string, pid, n, conc int) (cpuResult, error) {
	client, tr := newClient(conc)
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range conc { // open the connections outside the measurement
		wg.Go(func() { streamOnce(ctx, client, url, 0, nil) })
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)

	before, err := harness.CPUTime(pid)
	if err != nil {
		return cpuResult{}, err
	}
	var next, chunks, failed atomic.Int64
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				r := streamOnce(ctx, client, url, 0, nil)
				chunks.Add(int64(r.chunks))
				if r.err != nil {
					failed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	after, err := harness.CPUTime(pid)
	if err != nil {
		return cpuResult{}, err
	}
	res := cpuResult{cpu: after - before, chunks: chunks.Load(), failed: failed.Load()}
	if res.chunks == 0 {
		return res, fmt.Errorf("no chunk delivered")
	}
	res.perChunk = res.cpu / time.Duration(res.chunks)
	return res, nil
}

// openResult is the Caddy process's memory with many streams open at once.
type openResult struct {
	perStreamKB float64
	baseKB      int64
	peakKB      int64
	failed      int
	endedEarly  int64 // streams that finished before the peak was sampled
}

// openStreams opens n slow streams at once through url, waits until every one
// has delivered its first event, and samples the Caddy process's VmRSS while
// all are open; the result is the growth over baseKB per stream. The caller
// runs it on a freshly started Caddy, so memory freed by an earlier phase
// (which Go keeps for reuse) cannot hide this target's cost.
func openStreams(ctx context.Context, url string, pid, n int, chunkDelay time.Duration) (openResult, error) {
	client, tr := newClient(n)
	defer tr.CloseIdleConnections()
	// take every lazily built piece (transports, pools) into the baseline
	for range 20 {
		_ = completeOnce(ctx, client, url)
		streamOnce(ctx, client, url, 0, nil)
	}
	tr.CloseIdleConnections()
	time.Sleep(time.Second)
	base, err := harness.RSS(pid)
	if err != nil {
		return openResult{}, err
	}

	streams, stop := context.WithCancel(ctx)
	var opened, ended, failed atomic.Int64
	var wg sync.WaitGroup
	defer func() {
		stop() // every stream ends at once
		wg.Wait()
	}()
	for range n {
		wg.Go(func() {
			r := streamOnce(streams, client, url, chunkDelay, func() { opened.Add(1) })
			if streams.Err() != nil {
				return
			}
			if r.err != nil {
				failed.Add(1)
			} else {
				ended.Add(1)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for opened.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := opened.Load(); got < int64(n) {
		return openResult{}, fmt.Errorf("only %d of %d streams opened (%d failed)", got, n, failed.Load())
	}
	peak, err := peakRSS(pid)
	if err != nil {
		return openResult{}, err
	}
	res := openResult{
		baseKB:      base / 1024,
		peakKB:      peak / 1024,
		perStreamKB: float64(peak-base) / 1024 / float64(n),
		failed:      int(failed.Load()),
		endedEarly:  ended.Load(),
	}
	return res, nil
}

// peakRSS is the highest VmRSS of the process in 5 samples over 0.4 s.
func peakRSS(pid int) (int64, error) {
	var peak int64
	for i := range 5 {
		if i > 0 {
			time.Sleep(100 * time.Millisecond)
		}
		rss, err := harness.RSS(pid)
		if err != nil {
			return 0, err
		}
		peak = max(peak, rss)
	}
	return peak, nil
}

// percentile is the p-th percentile (nearest rank) of ds; ds is sorted.
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	i := (len(ds)*p + 99) / 100
	return ds[max(i-1, 0)]
}

// median is the median of xs (the mean of the two middle values for an even count).
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
