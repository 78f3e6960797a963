package engines

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/providers"
)

// Readiness: the probe of a started engine until it answers 2xx, and the
// probe a caller asks for (Probe).

// Probe timing: a request is served within one probe interval of the engine
// turning ready.
const (
	firstProbeInterval = 5 * time.Millisecond
	maxProbeInterval   = 20 * time.Millisecond
	probeTimeout       = 2 * time.Second
)

// awaitReadyWithin probes base+Ready with a short back-off until a 2xx, the
// process exits, timeout passes, or the engine is torn down. It returns why
// the engine is not ready, or "" when it is.
func (e *Engine) awaitReadyWithin(proc *process, base *url.URL, timeout time.Duration) string {
	if !e.cfg.ProbesReady() {
		return "" // ready none: a running process is all there is to know
	}
	deadline := e.clock.NewTimer(timeout)
	defer deadline.Stop()
	probeURL := base.JoinPath(e.cfg.Ready)
	probeURL.RawQuery = ""
	interval := firstProbeInterval
	tick := e.clock.NewTimer(0)
	defer tick.Stop()
	for {
		select {
		case <-proc.done:
			return "the process " + proc.exitReason() + " before it was ready"
		case <-deadline.C():
			return fmt.Sprintf("not ready within start_timeout %s", timeout)
		case <-e.life.Done():
			return "the engine was shut down while starting"
		case <-tick.C():
		}
		if e.probe(e.life, probeURL.String()) {
			return ""
		}
		tick.Reset(interval)
		if interval *= 2; interval > maxProbeInterval {
			interval = maxProbeInterval
		}
	}
}

// probe reports whether GET url answers 2xx within probeTimeout.
func (e *Engine) probe(ctx context.Context, u string) bool {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	return e.get(ctx, u)
}

// get reports whether GET url answers 2xx.
func (e *Engine) get(ctx context.Context, u string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return false
	}
	e.cfg.SetKey(req.Header) // a cloud engine's readiness path may want its key
	if a, ok := e.cfg.Provider.(providers.Authorizer); ok && a.Authorize(ctx, req, nil) != nil {
		return false // no credentials: no answer to be had
	}
	resp, err := e.rt.RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}

// Probe asks the engine's readiness path now, whatever its state. For a
// managed engine that is not running it reports false without starting it.
// A provider's engine is asked nothing: it is reachable unless its state
// says down (answers.go).
func (e *Engine) Probe(ctx context.Context) bool {
	if e.cfg.IsProvider() {
		return e.remoteState() != "down"
	}
	e.mu.Lock()
	base, state := e.base, e.state
	e.mu.Unlock()
	if base == nil || (e.cfg.Managed() && state != Ready) {
		return false
	}
	if !e.cfg.ProbesReady() {
		return true
	}
	u := base.JoinPath(e.cfg.Ready)
	u.RawQuery = ""
	return e.probe(ctx, u.String())
}
