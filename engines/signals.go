package engines

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	dto "github.com/prometheus/client_model/go"
	"go.uber.org/zap"
)

// Signals: what an engine says of its own load, read in the
// background on the gateway's clock and never on a request's path, so a
// pool can pass over an engine whose own queue is long even when this
// gateway sent it nothing (another front door did, or its slots are held
// by long generations). The engine publishes them on its Prometheus
// /metrics:
//
//	llama-server (needs --metrics)   llamacpp:requests_processing, llamacpp:requests_deferred
//	vLLM                             vllm:num_requests_running, vllm:num_requests_waiting, vllm:kv_cache_usage_perc
//	SGLang (--enable-metrics)        sglang:num_running_reqs, sglang:num_queue_reqs, sglang:token_usage
//
// (ollama has no /metrics: it answers 404, and is judged by the gateway's
// own counts.) Real pages are kept in testdata/metrics-*.txt. A sample the
// parser cannot read is skipped and counted (Signal.Skipped), never the
// page (exposition.go). llama-server's /slots is read on its own, whether
// or not its /metrics parsed or is on at all: it alone says the engine's
// capacity, which a pool needs most from a fresh engine, the one whose
// /metrics is not yet clean.
//
// A read older than signals_stale is ignored: an engine that stopped
// answering its /metrics is judged by the gateway's own counts alone, never
// by what it said long ago.

// Bounds on what one read may make the gateway hold.
const (
	maxSignalsBody   = 4 << 20 // bytes of one /metrics answer read
	maxSignalsSeries = 512     // series kept for re-exposure per engine
)

// StartSignals starts the background reads of the engine's metrics when its
// config turns them on; the first read is at once. They end when the engine
// is destructed. Call it once, after SetClock.
func (e *Engine) StartSignals() {
	if e.cfg.Signals != SignalsMetrics {
		return
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		e.every(time.Duration(e.cfg.SignalsInterval), e.ReadSignals)
	}()
}

// ReadSignals reads the engine's metrics once, now, if it is running, and
// records what it found. A read that fails records nothing: the last one
// grows stale. It is what the background reader does each interval.
func (e *Engine) ReadSignals() {
	e.mu.Lock()
	base, state := e.base, e.state
	e.mu.Unlock()
	if base == nil || state != Ready {
		return
	}
	inFlight, queued := e.gatewayLoad()
	timeout := max(time.Duration(e.cfg.SignalsInterval), time.Second)
	ctx, cancel := context.WithTimeout(e.life, timeout)
	defer cancel()
	sig, series, parsed := e.readMetrics(ctx, base)
	// the slot list is llama-server's: asked unless the page named another
	// engine, and even when the page did not parse
	if sig.kind == "" || sig.kind == kindLlama {
		sig.Slots, sig.SlotsBusy = e.readSlots(ctx, base)
	}
	if !parsed {
		if sig.Slots == 0 {
			return // nothing read: the last read grows stale
		}
		// each busy slot is running one request; the queue is unknown
		sig.Running = float64(sig.SlotsBusy)
	}
	// the engine counted somewhere between the two looks at the gateway's
	// own: the larger one keeps the requests sent meanwhile from passing
	// for another front door's
	afterFlight, afterQueued := e.gatewayLoad()
	sig.At, sig.Own = e.clock.Now(), max(inFlight+queued, afterFlight+afterQueued)
	e.sig.mu.Lock()
	e.sig.last, e.sig.ok, e.sig.series = sig, true, series
	e.sig.mu.Unlock()
}

// readMetrics reads and parses the engine's /metrics; false when it did
// not answer or its page did not parse (a Signal with nothing known).
func (e *Engine) readMetrics(ctx context.Context, base *url.URL) (Signal, []Series, bool) {
	none := Signal{KVCache: -1}
	body, _, err := e.getSignal(ctx, base, e.cfg.SignalsPath)
	if err != nil {
		return none, nil, false
	}
	defer body.Close()
	sig, series, err := ParseSignals(io.LimitReader(body, maxSignalsBody))
	if err != nil {
		if ce := e.log.Check(zap.DebugLevel, "engine metrics not parsed"); ce != nil {
			ce.Write(zap.Error(err))
		}
		return none, nil, false
	}
	if sig.Skipped > 0 {
		if ce := e.log.Check(zap.DebugLevel, "engine metrics: samples skipped"); ce != nil {
			ce.Write(zap.Int("skipped", sig.Skipped))
		}
	}
	return sig, series, true
}

// getSignal GETs path of the engine with its key, and returns the body of
// a 200; any other status is an error (its body read a little and closed),
// and the status is returned with it.
func (e *Engine) getSignal(ctx context.Context, base *url.URL, path string) (io.ReadCloser, int, error) {
	u := base.JoinPath(path)
	u.RawQuery = ""
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	e.cfg.SetKey(req.Header)
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return nil, 0, err
	}
	if resp.StatusCode != http.StatusOK {
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
		resp.Body.Close()
		return nil, resp.StatusCode, fmt.Errorf("%s answered %d", path, resp.StatusCode)
	}
	return resp.Body, resp.StatusCode, nil
}

// The engines whose names a page carries (Signal.kind).
const (
	kindLlama  = "llamacpp"
	kindVLLM   = "vllm"
	kindSGLang = "sglang"
)

// ParseSignals reads a Prometheus text exposition: the load signals of
// llama-server, vLLM and SGLang (summed over their series, one per model),
// and the gauges and counters of each to re-expose (at most
// maxSignalsSeries). A sample it cannot parse is skipped and counted in
// Signal.Skipped; a NaN or infinite value counts for nothing in the load.
func ParseSignals(r io.Reader) (Signal, []Series, error) {
	fams, skipped, err := parseExposition(r)
	if err != nil {
		return Signal{}, nil, err
	}
	sig := Signal{KVCache: -1, Skipped: skipped}
	sum := func(name string) (float64, bool) {
		f := fams[name]
		if f == nil {
			return 0, false
		}
		var v float64
		for _, m := range f.GetMetric() {
			if x := valueOf(f.GetType(), m); finite(x) {
				v += x
			}
		}
		return v, true
	}
	// the first name the engine publishes: one that publishes two (a
	// proxy in front of either) must not be counted twice
	for _, n := range []string{"llamacpp:requests_processing", "vllm:num_requests_running", "sglang:num_running_reqs"} {
		if v, ok := sum(n); ok {
			sig.Running, sig.kind = v, n[:strings.IndexByte(n, ':')]
			break
		}
	}
	for _, n := range []string{"llamacpp:requests_deferred", "vllm:num_requests_waiting", "sglang:num_queue_reqs"} {
		if v, ok := sum(n); ok {
			sig.Waiting = v
			break
		}
	}
	for _, n := range []string{"vllm:kv_cache_usage_perc", "vllm:gpu_cache_usage_perc", "sglang:token_usage"} {
		f := fams[n]
		if f == nil || len(f.GetMetric()) == 0 {
			continue
		}
		// one per model: the fullest one is what a new request meets
		for _, m := range f.GetMetric() {
			if x := valueOf(f.GetType(), m); finite(x) {
				sig.KVCache = max(sig.KVCache, x)
			}
		}
		break
	}

	names := make([]string, 0, len(fams))
	for n := range fams {
		if strings.HasPrefix(n, kindLlama+":") || strings.HasPrefix(n, kindVLLM+":") || strings.HasPrefix(n, kindSGLang+":") {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	var series []Series
	for _, n := range names {
		f := fams[n]
		t := f.GetType()
		if t != dto.MetricType_GAUGE && t != dto.MetricType_COUNTER && t != dto.MetricType_UNTYPED {
			continue // histograms and summaries are the engine's own scrape's
		}
		for _, m := range f.GetMetric() {
			if len(series) == maxSignalsSeries {
				return sig, series, nil
			}
			s := Series{Name: n, Counter: t == dto.MetricType_COUNTER, Value: valueOf(t, m)}
			for _, l := range m.GetLabel() {
				s.Labels = append(s.Labels, [2]string{l.GetName(), l.GetValue()})
			}
			sort.Slice(s.Labels, func(i, j int) bool { return s.Labels[i][0] < s.Labels[j][0] })
			series = append(series, s)
		}
	}
	return sig, series, nil
}

func finite(x float64) bool { return !math.IsNaN(x) && !math.IsInf(x, 0) }

func valueOf(t dto.MetricType, m *dto.Metric) float64 {
	switch t {
	case dto.MetricType_GAUGE:
		return m.GetGauge().GetValue()
	case dto.MetricType_COUNTER:
		return m.GetCounter().GetValue()
	}
	return m.GetUntyped().GetValue()
}

// Signal returns the engine's last read of its own load if it is fresh
// (younger than signals_stale); false when signals are off, nothing was
// read yet, or the last read is stale.
func (e *Engine) Signal() (Signal, bool) {
	if e.cfg.Signals != SignalsMetrics {
		return Signal{}, false
	}
	e.sig.mu.Lock()
	s, ok := e.sig.last, e.sig.ok
	e.sig.mu.Unlock()
	if !ok || e.clock.Now().Sub(s.At) > time.Duration(e.cfg.SignalsStale) {
		return Signal{}, false
	}
	return s, true
}

// SignalSeries returns the series of the engine's last fresh read, for the
// gateway's /metrics; nil when there is none.
func (e *Engine) SignalSeries() []Series {
	if _, ok := e.Signal(); !ok {
		return nil
	}
	e.sig.mu.Lock()
	defer e.sig.mu.Unlock()
	return e.sig.series
}

// Occupancy is an engine's load as a pool weighs it, read at once: one
// look at the gateway's counts and the engine's last signal.
type Occupancy struct {
	// Load is how many requests the engine has, as far as the gateway
	// knows: the gateway's own in flight (leases, or places taken) and
	// queued, now, and, when its signals are fresh, what the engine had
	// beyond the gateway's own when it was read (running and waiting:
	// other front doors' requests).
	//
	// The gateway's own count is exact and current; the engine's is up to
	// an interval old. Adding only the engine's excess keeps a lone front
	// door from herding: with the engine's whole count, every request in
	// one interval would see the same engine as the idlest and go there.
	Load int

	// Capacity is how many requests the engine serves at once, when
	// known: its max_concurrent, else the slots its fresh /slots listed;
	// 0 when neither says.
	Capacity int

	// Saturated reports whether a request sent to the engine now would
	// wait rather than run: the gateway's own queue for it is full
	// (max_concurrent and queue), or its fresh signals say it defers
	// requests, or has every slot busy, and holds more than the gateway
	// sent it (other front doors fill it). A pool tries such a member
	// last.
	//
	// Deferrals of the gateway's own requests do not count: its own count
	// is current, the signal up to an interval old, and a lone front door
	// that passed over an engine for a whole interval after one deferral
	// would pile its requests onto the others (measured: bench/affinity,
	// -signals).
	Saturated bool
}

// Occupancy returns the engine's load, capacity and saturation now.
func (e *Engine) Occupancy() Occupancy {
	var o Occupancy
	inFlight, queued := e.gatewayLoad()
	o.Load = inFlight + queued
	if e.lim != nil {
		if e.cfg.MaxConcurrent > 0 { // the default cap is no capacity the operator named
			o.Capacity = e.lim.max
		}
		o.Saturated = inFlight >= e.lim.max && queued >= e.lim.queueMax
	}
	if s, ok := e.Signal(); ok {
		others := int(s.Running+s.Waiting) > s.Own
		o.Load += max(0, int(s.Running+s.Waiting)-s.Own)
		if o.Capacity == 0 {
			o.Capacity = s.Slots
		}
		full := s.Waiting > 0 || (s.Slots > 0 && s.SlotsBusy >= s.Slots)
		o.Saturated = o.Saturated || (others && full)
	}
	return o
}

// Load is Occupancy().Load.
func (e *Engine) Load() int { return e.Occupancy().Load }

// gatewayLoad is the gateway's own count of the engine's requests.
func (e *Engine) gatewayLoad() (inFlight, queued int) {
	if e.lim != nil && e.cfg.MaxConcurrent > 0 { // below the default cap, an engine counts as it did without a limit
		return e.lim.counts()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leases, e.waiting
}
