//go:build unix

package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
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

// latencyResult is one target's latency at a fixed rate.
type latencyResult struct {
	p50, p99        time.Duration
	failed, dropped int
}

// latency sends non-streaming completions to each of urls at rate a second
// (open loop: each request leaves on schedule in its own goroutine, so a
// slow answer does not delay the next one) and returns, per url, the p50
// and p99 of the time from sending each request to its last byte. The urls
// share one loop and take turns, request by request: a pause of the
// machine or of the one Caddy both sites live in falls on each alike,
// where one run after the other left it to chance which target's tail it
// made (the p99 of one round's pair differed 0.08-3.46x).
func latency(ctx context.Context, urls []string, rate int, dur time.Duration) []latencyResult {
	clients := make([]*http.Client, len(urls))
	for i := range urls {
		client, tr := newClient(64)
		defer tr.CloseIdleConnections()
		clients[i] = client
	}
	interval := time.Second / time.Duration(rate*len(urls))
	skip := int(warmup / interval)
	n := skip + int(dur/interval)
	lat := make([]time.Duration, n)
	errs := make([]bool, n)
	out := make([]latencyResult, len(urls))
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
				out[i%len(urls)].dropped++
			}
			continue
		}
		wg.Go(func() {
			defer func() { <-sem }()
			sent := time.Now()
			err := completeOnce(ctx, clients[i%len(urls)], urls[i%len(urls)])
			lat[i], errs[i] = time.Since(sent), err != nil
		})
	}
	wg.Wait()
	for u := range urls {
		var ok []time.Duration
		for i := skip; i < n; i++ {
			if i%len(urls) != u {
				continue
			}
			if errs[i] {
				out[u].failed++
				continue
			}
			ok = append(ok, lat[i])
		}
		out[u].failed -= out[u].dropped
		out[u].p50, out[u].p99 = percentile(ok, 50), percentile(ok, 99)
	}
	return out
}

// ttfbResult is one target's time to first byte over sequential streams.
type ttfbResult struct {
	ttfb, ttfb99, total time.Duration
	failed              int
}

// streamLatency sends n streams to each of urls, one stream at a time and
// the urls in turn (stream by stream, as latency takes its turns), and
// returns per url the median and 99th percentile time to first byte and
// the median time to the end of the stream.
func streamLatency(ctx context.Context, urls []string, n int) []ttfbResult {
	asks := make([]streamAsk, len(urls))
	for i := range asks {
		asks[i] = chatStream
	}
	return streamLatencyAs(ctx, urls, asks, n)
}

// streamLatencyAs is streamLatency with the stream asks[i] sent to urls[i]
// (the translation phase: one site, three client APIs).
func streamLatencyAs(ctx context.Context, urls []string, asks []streamAsk, n int) []ttfbResult {
	clients := make([]*http.Client, len(urls))
	for i, url := range urls {
		client, tr := newClient(1)
		defer tr.CloseIdleConnections()
		clients[i] = client
		for range 10 { // open the connection, warm the paths
			streamOnceAs(ctx, client, url, asks[i], 0, nil)
		}
	}
	firsts, totals := make([][]time.Duration, len(urls)), make([][]time.Duration, len(urls))
	out := make([]ttfbResult, len(urls))
	for i := 0; i < n && ctx.Err() == nil; i++ {
		for u, url := range urls {
			r := streamOnceAs(ctx, clients[u], url, asks[u], 0, nil)
			if r.err != nil {
				out[u].failed++
				continue
			}
			firsts[u], totals[u] = append(firsts[u], r.ttfb), append(totals[u], r.total)
		}
	}
	for u := range urls {
		out[u].ttfb, out[u].ttfb99, out[u].total = percentile(firsts[u], 50), percentile(firsts[u], 99), percentile(totals[u], 50)
	}
	return out
}

// cpuResult is the Caddy process's CPU time over one streaming phase.
type cpuResult struct {
	perChunk time.Duration
	cpu      time.Duration
	chunks   int64
	failed   int64
	whole    int64 // streams that ended whole
}

// streamCPUAs sends n streams (those a asks for) with conc at a time
// through url and divides the CPU time the Caddy process used meanwhile by
// the chunks delivered. Both sites live in that one process, so only one
// target may be under load.
func streamCPUAs(ctx context.Context, url string, a streamAsk, pid, n, conc int) (cpuResult, error) {
	var before time.Duration
	var res cpuResult
	var err error
	res.chunks, res.whole, res.failed = streamBatchAs(ctx, url, a, n, conc, func() error {
		before, err = harness.CPUTime(pid)
		return err
	})
	if err != nil {
		return cpuResult{}, err
	}
	after, err := harness.CPUTime(pid)
	if err != nil {
		return cpuResult{}, err
	}
	res.cpu = after - before
	if res.chunks == 0 {
		return res, fmt.Errorf("no chunk delivered")
	}
	res.perChunk = res.cpu / time.Duration(res.chunks)
	return res, nil
}

// cpuRound measures both targets of a round, each over n streams, in four
// slices of n/2 streams: the first target, the second, the second again,
// the first again. Both share one process on a machine whose speed drifts
// from second to second (other VMs, other work, the garbage one target
// leaves for the collector to meet in the next); run one after the other,
// a drift falls on one target, while in A B B A a steady one falls on both
// alike.
func cpuRound(ctx context.Context, ts []target, pid, n, conc int) ([]cpuResult, error) {
	asks := make([]streamAsk, len(ts))
	for i := range asks {
		asks[i] = chatStream
	}
	return cpuRoundAs(ctx, ts, asks, pid, n, conc)
}

// cpuRoundAs is cpuRound for any number of targets, target i sent the
// stream asks[i], in slices A B … B A (the translation phase's four: A B C
// D D C B A).
func cpuRoundAs(ctx context.Context, ts []target, asks []streamAsk, pid, n, conc int) ([]cpuResult, error) {
	out := make([]cpuResult, len(ts))
	turns := make([]int, 0, 2*len(ts))
	for i := range ts {
		turns = append(turns, i)
	}
	for i := range ts {
		turns = append(turns, len(ts)-1-i)
	}
	for _, i := range turns {
		res, err := streamCPUAs(ctx, ts[i].url, asks[i], pid, (n+1)/2, conc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", ts[i].name, err)
		}
		o := &out[i]
		o.cpu, o.chunks, o.failed, o.whole = o.cpu+res.cpu, o.chunks+res.chunks, o.failed+res.failed, o.whole+res.whole
	}
	for i := range out {
		out[i].perChunk = out[i].cpu / time.Duration(out[i].chunks)
	}
	return out, nil
}

// completionCPU sends n non-streaming completions with conc at a time
// through url and divides the CPU time the Caddy process used meanwhile by
// the completions answered: what one plain request costs the proxy. Like
// streamCPUAs, one target at a time.
func completionCPU(ctx context.Context, url string, pid, n, conc int) (cpuResult, error) {
	client, tr := newClient(conc)
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range conc { // open the connections outside the measurement
		wg.Go(func() { completeOnce(ctx, client, url) })
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	before, err := harness.CPUTime(pid)
	if err != nil {
		return cpuResult{}, err
	}
	var next, ok, failed atomic.Int64
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				if completeOnce(ctx, client, url) != nil {
					failed.Add(1)
				} else {
					ok.Add(1)
				}
			}
		})
	}
	wg.Wait()
	after, err := harness.CPUTime(pid)
	if err != nil {
		return cpuResult{}, err
	}
	// a completion is counted as one chunk: the row divides by it
	res := cpuResult{cpu: after - before, chunks: ok.Load(), whole: ok.Load(), failed: failed.Load()}
	if res.chunks == 0 {
		return res, fmt.Errorf("no completion answered")
	}
	res.perChunk = res.cpu / time.Duration(res.chunks)
	return res, nil
}

// completionCPURound is cpuRound for non-streaming completions: both
// targets, n completions each, in slices A B B A.
func completionCPURound(ctx context.Context, ts []target, pid, n, conc int) ([]cpuResult, error) {
	out := make([]cpuResult, len(ts))
	for _, i := range []int{0, 1, 1, 0} {
		res, err := completionCPU(ctx, ts[i].url, pid, (n+1)/2, conc)
		if err != nil {
			return nil, fmt.Errorf("%s: %v", ts[i].name, err)
		}
		o := &out[i]
		o.cpu, o.chunks, o.failed, o.whole = o.cpu+res.cpu, o.chunks+res.chunks, o.failed+res.failed, o.whole+res.whole
	}
	for i := range out {
		out[i].perChunk = out[i].cpu / time.Duration(out[i].chunks)
	}
	return out, nil
}

// syscallResult is the Caddy process's system calls over one streaming
// phase, per chunk delivered.
type syscallResult struct {
	perChunk                          float64
	read, write, epoll, futex, others float64 // per chunk
	calls                             harness.Syscalls
	chunks, failed                    int64
}

// streamSyscalls sends n streams with conc at a time through url and counts
// the system calls the Caddy process made meanwhile (harness.StartSyscalls),
// per chunk delivered. Like streamCPUAs, one target at a time.
func streamSyscalls(ctx context.Context, url string, pid, n, conc int, outDir string) (syscallResult, error) {
	var counter *harness.SyscallCounter
	var err error
	var res syscallResult
	res.chunks, res.failed = streamBatch(ctx, url, n, conc, func() error {
		counter, err = harness.StartSyscalls(pid, outDir)
		return err
	})
	if err != nil {
		return res, err
	}
	if res.calls, err = counter.Stop(); err != nil {
		return res, err
	}
	if res.chunks == 0 {
		return res, fmt.Errorf("no chunk delivered")
	}
	c, per := res.calls, func(v int64) float64 { return float64(v) / float64(res.chunks) }
	res.perChunk, res.read, res.write, res.epoll, res.futex, res.others =
		per(c.Total), per(c.Read), per(c.Write), per(c.Epoll), per(c.Futex), per(c.Other())
	return res, nil
}

// streamBatch opens conc connections to url (a stream each, unmeasured),
// calls begin, then sends n streams, conc at a time, and returns the chunks
// delivered and the streams that failed. A begin error stops it.
func streamBatch(ctx context.Context, url string, n, conc int, begin func() error) (chunks, failed int64) {
	chunks, _, failed = streamBatchAs(ctx, url, chatStream, n, conc, begin)
	return chunks, failed
}

// streamBatchAs is streamBatch with the stream a asks for; it also returns
// the streams that ended whole.
func streamBatchAs(ctx context.Context, url string, a streamAsk, n, conc int, begin func() error) (chunks, whole, failed int64) {
	client, tr := newClient(conc)
	defer tr.CloseIdleConnections()
	var wg sync.WaitGroup
	for range conc { // open the connections outside the measurement
		wg.Go(func() { streamOnceAs(ctx, client, url, a, 0, nil) })
	}
	wg.Wait()
	time.Sleep(100 * time.Millisecond)
	if begin() != nil {
		return 0, 0, 0
	}
	var next, nchunks, nwhole, nfailed atomic.Int64
	for range conc {
		wg.Go(func() {
			for next.Add(1) <= int64(n) && ctx.Err() == nil {
				r := streamOnceAs(ctx, client, url, a, 0, nil)
				nchunks.Add(int64(r.chunks))
				if r.err != nil {
					nfailed.Add(1)
				} else {
					nwhole.Add(1)
				}
			}
		})
	}
	wg.Wait()
	return nchunks.Load(), nwhole.Load(), nfailed.Load()
}

// openResult is the Caddy process's memory with many streams open at once.
type openResult struct {
	perStreamKB float64
	baseKB      int64
	peakKB      int64
	// goroutines added per open stream (go_goroutines on the admin
	// endpoint's /metrics), when it was asked for
	goroutinesPerStream float64
	// Go's stacks and heap in use added per open stream, from the same
	stackPerStreamKB, heapPerStreamKB float64
	// the CPU the process used while the streams were held, in % of one
	// core, and per chunk (estimated: streams × hold / chunk delay)
	cpuPercent  float64
	cpuPerChunk time.Duration
	failed      int
	endedEarly  int64 // streams that finished before the peak was sampled
	firstErr    string
}

// openOptions say how openStreams opens and holds its streams.
type openOptions struct {
	n          int
	chunkDelay time.Duration // the upstream's pause between chunks
	rate       int           // streams opened per second; 0: all at once
	hold       time.Duration // CPU is measured over this long once all are open; 0: not
	admin      string        // Caddy's admin endpoint, for its goroutines; "": not counted
	h2c        bool          // the client speaks HTTP/2 without TLS to Caddy (few connections)
	// ask is the stream held (and sent to warm up); zero: chatStream. The
	// translation phase holds Messages and Responses streams too.
	ask streamAsk
	// profiles, when set (with admin), is a path prefix: Caddy's heap and
	// goroutine profiles are saved there while the streams are held (and
	// the heap's before they open, as <prefix>-heapbase.pprof), and with
	// hold its CPU profile over a second hold
	profiles string
}

// openStreams opens o.n slow streams through url, waits until every one
// has delivered its first event, and samples the Caddy process's VmRSS while
// all are open; the result is the growth over baseKB per stream. The caller
// runs it on a freshly started Caddy, so memory freed by an earlier phase
// (which Go keeps for reuse) cannot hide this target's cost.
func openStreams(ctx context.Context, url string, pid int, o openOptions) (openResult, error) {
	n := o.n
	a := o.ask
	if a.path == "" {
		a = chatStream
	}
	client, tr := newClient(n)
	if o.h2c {
		client, tr = newH2CClient()
	}
	defer tr.CloseIdleConnections()
	// take every lazily built piece (transports, pools) into the baseline
	for range 20 {
		_ = completeOnce(ctx, client, url)
		streamOnceAs(ctx, client, url, a, 0, nil)
	}
	tr.CloseIdleConnections()
	time.Sleep(time.Second)
	base, err := harness.RSS(pid)
	if err != nil {
		return openResult{}, err
	}
	var baseG []float64
	if o.admin != "" {
		if baseG, err = adminMetrics(ctx, o.admin, "go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes"); err != nil {
			return openResult{}, err
		}
		// the live heap before the streams, for pprof -diff_base
		if o.profiles != "" {
			if err := saveProfile(ctx, o.admin+"/debug/pprof/heap?gc=1", o.profiles+"-heapbase.pprof"); err != nil {
				return openResult{}, err
			}
		}
	}

	streams, stop := context.WithCancel(ctx)
	var opened, ended, failed atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	defer func() {
		stop() // every stream ends at once
		wg.Wait()
	}()
	start := time.Now()
	for i := range n {
		if o.rate > 0 {
			if d := time.Until(start.Add(time.Duration(i) * time.Second / time.Duration(o.rate))); d > 0 {
				time.Sleep(d)
			}
		}
		wg.Go(func() {
			r := streamOnceAs(streams, client, url, a, o.chunkDelay, func() { opened.Add(1) })
			if streams.Err() != nil {
				return
			}
			if r.err != nil {
				if failed.Add(1) == 1 {
					firstErr.Store(r.err.Error())
				}
			} else {
				ended.Add(1)
			}
		})
	}
	deadline := time.Now().Add(30 * time.Second)
	for opened.Load()+failed.Load() < int64(n) && time.Now().Before(deadline) && ctx.Err() == nil {
		time.Sleep(10 * time.Millisecond)
	}
	if got := opened.Load(); got+failed.Load() < int64(n) || got == 0 {
		return openResult{}, fmt.Errorf("only %d of %d streams opened (%d failed)", got, n, failed.Load())
	}
	peak, err := peakRSS(pid)
	if err != nil {
		return openResult{}, err
	}
	// the streams held: the failed ones cost nothing (a stream that failed
	// after it was opened is counted too, but gone)
	held := float64(n - int(failed.Load()))
	res := openResult{
		baseKB:      base / 1024,
		peakKB:      peak / 1024,
		perStreamKB: float64(peak-base) / 1024 / held,
	}
	if o.admin != "" { // after VmRSS: reading /metrics allocates
		g, err := adminMetrics(ctx, o.admin, "go_goroutines", "go_memstats_stack_inuse_bytes", "go_memstats_heap_inuse_bytes")
		if err != nil {
			return openResult{}, err
		}
		res.goroutinesPerStream = (g[0] - baseG[0]) / held
		res.stackPerStreamKB = (g[1] - baseG[1]) / 1024 / held
		res.heapPerStreamKB = (g[2] - baseG[2]) / 1024 / held
		if o.profiles != "" {
			// heap?gc=1: the live heap now, not as of the last GC (which
			// may have run before the streams opened); after the figures,
			// which the forced GC would change
			for _, p := range []string{"heap", "goroutine"} {
				q := p
				if p == "heap" {
					q += "?gc=1"
				}
				if err := saveProfile(ctx, o.admin+"/debug/pprof/"+q, o.profiles+"-"+p+".pprof"); err != nil {
					return openResult{}, err
				}
			}
		}
	}
	if o.hold > 0 {
		before, err := harness.CPUTime(pid)
		if err != nil {
			return openResult{}, err
		}
		t0 := time.Now()
		time.Sleep(o.hold)
		after, err := harness.CPUTime(pid)
		if err != nil {
			return openResult{}, err
		}
		took := time.Since(t0)
		res.cpuPercent = 100 * float64(after-before) / float64(took)
		if chunks := float64(n-int(failed.Load())) * float64(took) / float64(o.chunkDelay); chunks > 0 {
			res.cpuPerChunk = time.Duration(float64(after-before) / chunks)
		}
		if o.profiles != "" && o.admin != "" {
			// where that CPU goes: a profile over another hold as long,
			// after the figure (profiling costs CPU of its own)
			secs := max(1, int(o.hold/time.Second))
			if err := saveProfile(ctx, fmt.Sprintf("%s/debug/pprof/profile?seconds=%d", o.admin, secs), o.profiles+"-cpu.pprof"); err != nil {
				return openResult{}, err
			}
		}
	}
	res.failed, res.endedEarly = int(failed.Load()), ended.Load()
	if e, ok := firstErr.Load().(string); ok {
		res.firstErr = e
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

// saveProfile writes the pprof profile at url to path.
func saveProfile(ctx context.Context, url, path string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
