package handler

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"
)

// A remote engine is "running" when it answers: /v1/models asks each remote
// engine for its own model list, at most once per listingTTL however many
// clients ask (concurrent askers share one fan-out), and reports its models
// loaded or unloaded from the cached answer. Engines the gateway starts are
// known without asking.

const (
	listingTTL     = 2 * time.Second
	listingTimeout = 2 * time.Second
)

type listing struct {
	mu      sync.Mutex
	at      time.Time
	up      map[string]bool // remote engine name → answered its model list
	running chan struct{}   // closed when the fan-out in progress ends
}

// remoteUp returns, per remote engine, whether it answered its model list
// within the last listingTTL, refreshing the answers when they are older.
func (g *Gateway) remoteUp(ctx context.Context) map[string]bool {
	l := &g.listing
	l.mu.Lock()
	if l.up != nil && time.Since(l.at) < listingTTL {
		up := l.up
		l.mu.Unlock()
		return up
	}
	if l.running == nil {
		l.running = make(chan struct{})
		go g.fanOut(l.running)
	}
	running := l.running
	l.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.up
}

// fanOut asks every remote engine at once and stores the answers.
func (g *Gateway) fanOut(done chan struct{}) {
	up := map[string]bool{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rt := range g.routes {
		if rt.cfg.Managed() {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok := g.askModels(rt)
			mu.Lock()
			up[rt.cfg.Name] = ok
			mu.Unlock()
		}()
	}
	wg.Wait()
	l := &g.listing
	l.mu.Lock()
	l.up, l.at, l.running = up, time.Now(), nil
	l.mu.Unlock()
	close(done)
}

// askModels reports whether the engine answers GET /v1/models with a 2xx,
// asked with its own key.
func (g *Gateway) askModels(rt *route) bool {
	ctx, cancel := context.WithTimeout(context.Background(), listingTimeout)
	defer cancel()
	base := rt.eng.Peek()
	if base == nil {
		return false
	}
	u := *base
	u.Path = joinPath(base.Path, "/v1/models")
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false
	}
	rt.cfg.SetKey(req.Header)
	resp, err := rt.eng.Transport().RoundTrip(req)
	if err != nil {
		return false
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	resp.Body.Close()
	return resp.StatusCode >= 200 && resp.StatusCode < 300
}
