//go:build unix

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// The hostile mix runs against llm_gateway alone. Its limits are
// the gateway's defaults (hconfig.DefaultMaxFallbacks and
// DefaultMaxAttempts; a test keeps them equal), written into its Caddyfile.
const (
	fallbackCap = 4
	attemptsCap = 8

	rssPerStreamLimitKB = 100 // RSS per open stream
	// rssPerStreamGoalKB is issue 30's goal for the memory and manystreams
	// rows (shown, not enforced: the hostile mix holds the limit above)
	rssPerStreamGoalKB = 64
	uploadersLimitMB   = 10 // memory held by the slow uploaders, all of them
)

// hostileConfig is the hostile mix's knobs (flags of the same names).
type hostileConfig struct {
	workers      int           // clients sending the mix at once
	cancelShare  float64       // share of requests the client cancels …
	cancelWithin time.Duration // … at a random moment this soon after sending
	failDelay    time.Duration // the failing upstream's pause before each answer
	idle         time.Duration // stream_idle_timeout of the healthy engine
	slowPause    time.Duration // how long the slow reader stops reading
	slowPad      int           // bytes added to each chunk of its stream
	slowBound    int           // what the socket buffers on its way can hold, bytes
	uploaders    int           // slow uploaders held open at once
	uploadClaim  int64         // the Content-Length each of them announces
}

// mixKind is what one request of the mix does.
type mixKind int

const (
	atCap   mixKind = iota // fallbacks: cap distinct engines, every one answering 401/403/404 (no retry, no breaker)
	repeats                // 2×cap items naming cap distinct engines ("f1" and "f1/fail1" are one): repeats count once
	overCap                // cap+1 distinct engines, or a list longer than the gateway resolves: a 400 before any call
	retried                // cap distinct engines answering 503: retried on each, bounded by max_attempts
	healthy                // a stream of the model bench, which must arrive whole
	kinds
)

var kindNames = [kinds]string{"at cap", "repeats", "over cap", "retried 503", "healthy"}

// mixWeights are the kinds' shares of the mix, in percent.
var mixWeights = [kinds]int{35, 15, 10, 10, 30}

// notRetried are the failing statuses that move on to the next candidate
// without a retry and without touching a breaker: nothing but the caps
// shortens such a walk (60,000 items were 60,001 calls).
var notRetried = []string{"401", "403", "404"}

// mixResult is one request of the mix as its client saw it.
type mixResult struct {
	kind      mixKind
	id        string
	want      int // the status the client must get (a stream may also get 200 and the error in-band)
	status    int
	cancelled bool // the client went away before the answer's end
	whole     bool // healthy: 50 chunks and data: [DONE]
	inBand    bool // a 200 whose body is an error event
	err       error
}

// hostileResult is what runHostile measured.
type hostileResult struct {
	requests    [kinds]int     // requests sent of each kind
	cancelled   [kinds]int     // … of which the client cancelled
	maxCalls    [kinds]int64   // most upstream calls of one request
	meanCalls   [kinds]float64 // mean calls of the requests not cancelled
	fullWalks   int            // at cap / repeats, not cancelled: requests that tried 1+cap engines
	walks       int            // … of how many
	badStatus   [kinds]int     // not cancelled, yet not the status the kind must get
	total       int64          // every chat call the upstream saw during the mix
	untagged    int64          // calls without the request's id (should be none)
	slowWhole   bool           // the slow reader got its whole stream
	slowErr     error
	rssGrowthKB int64 // peak VmRSS during the mix over the idle VmRSS
}

// runHostile runs the mix for dur against a Caddy started with the hostile
// Caddyfile and counts, at the fake upstream, the calls each request caused.
func runHostile(ctx context.Context, e *env, c config) (hostileResult, error) {
	var res hostileResult
	if err := e.startHostileCaddy(ctx); err != nil {
		return res, err
	}
	defer e.stopCaddy()
	gw, up := e.url(e.gwPort), e.url(e.upPort)
	pid := e.caddy.PID()
	h := c.hostile

	client, tr := newClient(h.workers + 1)
	defer tr.CloseIdleConnections()
	for range 10 { // open connections, build the engines' transports
		if err := completeOnce(ctx, client, gw); err != nil {
			return res, fmt.Errorf("hostile Caddy: %v", err)
		}
	}
	if _, err := upstreamCalls(ctx, up, true); err != nil {
		return res, err
	}
	base, err := harness.RSS(pid)
	if err != nil {
		return res, err
	}

	mix, stop := context.WithTimeout(ctx, c.duration)
	defer stop()
	var peak atomic.Int64
	peak.Store(base)
	sampled := make(chan struct{})
	go func() { // Caddy's VmRSS while the mix runs
		defer close(sampled)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for mix.Err() == nil {
			if rss, err := harness.RSS(pid); err == nil && rss > peak.Load() {
				peak.Store(rss)
			}
			select {
			case <-t.C:
			case <-mix.Done():
			}
		}
	}()

	slow := make(chan error, 1)
	go func() { slow <- slowReader(ctx, gw, h) }()

	var mu sync.Mutex
	var results []mixResult
	mixClients(mix, ctx, client, gw, h, 13, "mix", func(r mixResult) {
		mu.Lock()
		results = append(results, r)
		mu.Unlock()
	})
	res.slowErr = <-slow
	res.slowWhole = res.slowErr == nil
	stop()
	<-sampled
	res.rssGrowthKB = (peak.Load() - base) / 1024
	if ctx.Err() != nil {
		return res, ctx.Err()
	}

	// a cancelled request's last call may still be on its way
	time.Sleep(300 * time.Millisecond)
	calls, err := upstreamCalls(ctx, up, false)
	if err != nil {
		return res, err
	}
	res.total = calls.Total
	res.untagged = calls.Total
	for _, n := range calls.Calls {
		res.untagged -= n
	}
	var sum [kinds]int64
	var done [kinds]int
	for _, r := range results {
		n := calls.Calls[r.id]
		res.requests[r.kind]++
		res.maxCalls[r.kind] = max(res.maxCalls[r.kind], n)
		if r.cancelled {
			res.cancelled[r.kind]++
			continue
		}
		sum[r.kind] += n
		done[r.kind]++
		if !r.expected() {
			res.badStatus[r.kind]++
		}
		if r.kind == atCap || r.kind == repeats {
			res.walks++
			if n == 1+fallbackCap {
				res.fullWalks++
			}
		}
	}
	for k := range kinds {
		if done[k] > 0 {
			res.meanCalls[k] = float64(sum[k]) / float64(done[k])
		}
	}
	return res, nil
}

// mixClients runs h.workers clients that send the mix to url until until
// ends, each request under reqCtx with the id <prefix>-<n>, and passes each
// result to done; it returns when every client has stopped. seed makes the
// clients' choices differ from another run's.
func mixClients(until, reqCtx context.Context, client *http.Client, url string, h hostileConfig, seed uint64, prefix string, done func(mixResult)) {
	var seq atomic.Int64
	var wg sync.WaitGroup
	for w := range h.workers {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), seed))
			for until.Err() == nil {
				done(mixRequest(reqCtx, client, url, h, rng, fmt.Sprintf("%s-%d", prefix, seq.Add(1))))
			}
		})
	}
	wg.Wait()
}

// expected says whether a request that ran to its end got what its kind
// must get.
func (r mixResult) expected() bool {
	switch {
	case r.err != nil:
		return false
	case r.kind == healthy:
		return r.status == http.StatusOK && r.whole
	case r.kind == overCap:
		return r.status == r.want
	default:
		// every candidate failed: the primary's error, or for a stream
		// that got its preamble first, a 200 carrying an error in-band
		return r.status == r.want || r.status == http.StatusOK && r.inBand
	}
}

// mixRequest sends one request of a random kind, cancelled at a random
// moment with probability h.cancelShare.
func mixRequest(ctx context.Context, client *http.Client, url string, h hostileConfig, rng *rand.Rand, id string) mixResult {
	r := mixResult{kind: pickKind(rng), id: id}
	stream := r.kind == healthy || rng.IntN(2) == 0
	body, header := mixBody(r.kind, stream, rng), http.Header{}
	header.Set("Content-Type", "application/json")
	header.Set("X-Bench-Req", id)
	switch r.kind {
	case healthy:
		header.Set("X-Bench-Chunk-Delay", "1ms")
		r.want = http.StatusOK
	case overCap:
		r.want = http.StatusBadRequest
	case retried:
		r.want = http.StatusServiceUnavailable
	default:
		r.want, _ = strconv.Atoi(notRetried[rng.IntN(len(notRetried))])
	}
	switch r.kind {
	case healthy:
	case overCap: // were it sent, it would fail like the others
		header.Set("X-Bench-Fail", notRetried[rng.IntN(len(notRetried))])
	default:
		header.Set("X-Bench-Fail", strconv.Itoa(r.want))
	}
	if r.kind != healthy {
		header.Set("X-Bench-Fail-Delay", h.failDelay.String())
	}

	reqCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	if rng.Float64() < h.cancelShare {
		t := time.AfterFunc(time.Duration(rng.Int64N(int64(h.cancelWithin))+1), cancel)
		defer t.Stop()
	}
	req, err := http.NewRequestWithContext(reqCtx, http.MethodPost, url+chatPath, bytes.NewReader(body))
	if err != nil {
		r.err = err
		return r
	}
	req.Header = header
	resp, err := client.Do(req)
	if err != nil {
		r.err, r.cancelled = err, reqCtx.Err() != nil
		return r
	}
	defer resp.Body.Close()
	r.status = resp.StatusCode
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		r.err, r.cancelled = err, reqCtx.Err() != nil
		return r
	}
	r.whole = r.kind == healthy && wholeStream(b)
	r.inBand = bytes.HasPrefix(bytes.TrimLeft(b, ": \n"), []byte(`data: {"error"`)) || bytes.Contains(b, []byte("\ndata: {\"error\""))
	return r
}

func pickKind(rng *rand.Rand) mixKind {
	n := rng.IntN(100)
	for k, w := range mixWeights {
		if n < w {
			return mixKind(k)
		}
		n -= w
	}
	return healthy
}

// mixBody is a chat request for the kind: the model bench, or the model
// fail0 (engine f0) with a body fallbacks list of engines f1, f2, ….
func mixBody(k mixKind, stream bool, rng *rand.Rand) []byte {
	if k == healthy {
		return streamBody
	}
	engines := make([]string, fallbackCap, 2*fallbackCap)
	for i := range engines {
		engines[i] = fmt.Sprintf(`"f%d"`, i+1)
	}
	switch {
	case k == repeats:
		for len(engines) < 2*fallbackCap {
			i := rng.IntN(fallbackCap) + 1
			if rng.IntN(2) == 0 {
				engines = append(engines, fmt.Sprintf(`"f%d"`, i))
			} else { // the engine's own model: the same candidate
				engines = append(engines, fmt.Sprintf(`"f%d/fail%d"`, i, i))
			}
		}
	case k == overCap && rng.IntN(2) == 0:
		engines = append(engines, fmt.Sprintf(`"f%d"`, fallbackCap+1))
	case k == overCap:
		// issue 13's attack: a long list, here of 10,000 items
		for len(engines) < 10_000 {
			engines = append(engines, engines[rng.IntN(fallbackCap)])
		}
	}
	rng.Shuffle(len(engines), func(i, j int) { engines[i], engines[j] = engines[j], engines[i] })
	return fmt.Appendf(nil, `{"model":"fail0","messages":[{"role":"user","content":"hi"}],"stream":%t,"fallbacks":[%s]}`,
		stream, strings.Join(engines, ","))
}

// slowReader streams a large answer (50 chunks, 49 of them padded with
// h.slowPad bytes) through a socket with a small receive buffer, reads the
// first event, stops reading for h.slowPause (longer than the engine's
// stream_idle_timeout), then reads the rest. The pause is the client's: the
// stream must arrive whole.
//
// The gateway is blocked writing to the client during the pause only if the
// stream is larger than what the socket buffers between them absorb: the
// client's receive buffer (4 KiB asked) and the gateway's send buffer, which
// the kernel grows up to tcp_wmem's maximum. slowPad makes it so (see
// slowStreamPad); against the gateway before issue 13's fix, the stream was
// cut after 2.9 MB.
func slowReader(ctx context.Context, url string, h hostileConfig) error {
	dialer := &net.Dialer{Timeout: 5 * time.Second, Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096)
		})
		return errors.Join(err, serr)
	}}
	tr := &http.Transport{DialContext: dialer.DialContext, DisableCompression: true}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+chatPath, bytes.NewReader(streamBody))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Bench-Req", "slow-reader")
	req.Header.Set("X-Bench-Chunk-Pad", strconv.Itoa(h.slowPad))
	resp, err := (&http.Client{Transport: tr, Timeout: time.Minute}).Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("status %d", resp.StatusCode)
	}
	first := make([]byte, 512)
	n, err := resp.Body.Read(first)
	if err != nil {
		return fmt.Errorf("first read: %v", err)
	}
	select {
	case <-time.After(h.slowPause):
	case <-ctx.Done():
		return ctx.Err()
	}
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("after the pause, %d bytes: %v", n+len(rest), err)
	}
	all := append(first[:n], rest...)
	if !wholeStream(all) {
		tail := all[max(0, len(all)-200):]
		return fmt.Errorf("stream of %d bytes is not 50 chunks and [DONE]; it ends %q", len(all), tail)
	}
	if want := 49 * h.slowPad; len(all) < want { // the last chunk has no content to pad
		return fmt.Errorf("stream of %d bytes, want more than %d", len(all), want)
	}
	return nil
}

// slowStreamPad is the padding per chunk that makes the slow reader's
// stream at least twice what the socket buffers can hold, and at least pad.
// bound is that buffer space in bytes.
func slowStreamPad(pad int) (padded, bound int) {
	bound = 64 << 10 // the client's receive buffer, and slack
	if b, err := os.ReadFile("/proc/sys/net/ipv4/tcp_wmem"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 3 {
			if n, err := strconv.Atoi(f[2]); err == nil {
				bound += n
			}
		}
	} else {
		bound += 4 << 20 // Linux's default maximum
	}
	return min(max(pad, (2*bound+48)/49), 1<<20), bound
}

// wholeStream says whether b is the fake upstream's whole stream: 50 chunks
// and data: [DONE] (comments the gateway may add do not count).
func wholeStream(b []byte) bool {
	return bytes.HasSuffix(b, doneEvent) && bytes.Count(b, []byte("data: ")) == 51
}

// callCounts is the fake upstream's GET /bench/calls.
type callCounts struct {
	Total  int64            `json:"total"`
	Calls  map[string]int64 `json:"calls"`
	Tokens map[string]int64 `json:"tokens"` // what each id's answers cost
	// bytes of X-Bench-Tool-Args arguments written (hostilestreams.go)
	ToolArgsSent int64 `json:"tool_args_sent"`
}

// upstreamCalls reads the fake upstream's call counts, and resets them.
func upstreamCalls(ctx context.Context, up string, reset bool) (callCounts, error) {
	var c callCounts
	u := up + "/bench/calls"
	if reset {
		u += "?reset=1"
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return c, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return c, fmt.Errorf("upstream call counts: %v", err)
	}
	defer resp.Body.Close()
	if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != 200 {
		return c, fmt.Errorf("upstream call counts: %d %v", resp.StatusCode, err)
	}
	return c, nil
}

// uploadResult is the Caddy process's memory while slow uploaders are held,
// as the kernel sees it (VmRSS) and as Go accounts for it (heap spans and
// goroutine stacks in use). Both count: Go takes fresh memory from the
// kernel already zeroed and does not touch an allocation until bytes are
// written to it, so a buffer allocated whole for a claimed Content-Length
// shows in RSS only once reused memory must be zeroed for it (the 192 MB of
// issue 13), while Go's account shows it at once.
type uploadResult struct {
	heldKB, baseKB, peakKB       int64 // VmRSS
	goHeldKB, goBaseKB, goPeakKB int64 // heap in use + stacks in use
	closedEarly                  int   // connections the server closed or answered while held
}

// slowUploaders opens n connections to the gateway (port), each sending a
// request that announces a Content-Length of claim bytes and then only the
// first 17 bytes of a body, and samples the Caddy process's memory while
// all are held open. admin is its admin endpoint, for Go's statistics.
func slowUploaders(ctx context.Context, url, admin string, port, pid, n int, claim int64) (uploadResult, error) {
	var res uploadResult
	client, tr := newClient(4)
	for range 20 { // lazily built pieces belong to the baseline
		_ = completeOnce(ctx, client, url)
	}
	tr.CloseIdleConnections()
	for range 3 { // the statistics' own garbage too
		if _, err := goMemory(ctx, admin); err != nil {
			return res, err
		}
	}
	time.Sleep(time.Second)
	base, err := harness.RSS(pid)
	if err != nil {
		return res, err
	}
	goBase, err := goMemory(ctx, admin)
	if err != nil {
		return res, err
	}

	head := fmt.Sprintf("POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"+
		"Content-Length: %d\r\n\r\n{\"model\":\"bench\",", chatPath, port, claim)
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	for range n {
		c, err := dialer.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		if err != nil {
			return res, fmt.Errorf("uploader %d: %v", len(conns)+1, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			return res, fmt.Errorf("uploader %d: %v", len(conns), err)
		}
	}
	time.Sleep(time.Second) // every handler is reading its body by now
	peak, err := peakRSS(pid)
	if err != nil {
		return res, err
	}
	goPeak, err := goMemory(ctx, admin) // after VmRSS: reading it allocates
	if err != nil {
		return res, err
	}
	res.baseKB, res.peakKB, res.heldKB = base/1024, peak/1024, (peak-base)/1024
	res.goBaseKB, res.goPeakKB, res.goHeldKB = goBase/1024, goPeak/1024, (goPeak-goBase)/1024
	// each must still be waiting for its body: no answer, no close
	var one [1]byte
	for _, c := range conns {
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if _, err := c.Read(one[:]); !isTimeout(err) {
			res.closedEarly++
		}
	}
	return res, nil
}

// goMemory is the memory Go holds for the Caddy process's heap and
// goroutine stacks (go_memstats_heap_inuse_bytes + stack_inuse_bytes), from
// the admin endpoint's /metrics.
func goMemory(ctx context.Context, admin string) (int64, error) {
	m, err := adminMetrics(ctx, admin, "go_memstats_heap_inuse_bytes", "go_memstats_stack_inuse_bytes")
	if err != nil {
		return 0, err
	}
	return int64(m[0] + m[1]), nil
}

// adminMetrics reads the unlabelled metrics names from the admin endpoint's
// /metrics, in their order.
func adminMetrics(ctx context.Context, admin string, names ...string) ([]float64, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, admin+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("caddy's metrics: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
	if err != nil || resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("caddy's metrics: %d %v", resp.StatusCode, err)
	}
	out := make([]float64, len(names))
	found := 0
	for line := range strings.SplitSeq(string(b), "\n") {
		for i, name := range names {
			if v, ok := strings.CutPrefix(line, name+" "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					return nil, fmt.Errorf("caddy's metrics: %q", line)
				}
				out[i] = f
				found++
			}
		}
	}
	if found != len(names) {
		return nil, fmt.Errorf("caddy's metrics: not all of %v", names)
	}
	return out, nil
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
