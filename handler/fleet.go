package handler

import (
	"context"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
	"github.com/llmgateway/caddy-llm-gateway/internal/grammar"
)

// Fleet routing: remote nodes' model states, fanned out at most once per
// interval, and the ranking and waking of a node for a pool's model.

// A remote engine is "running" when it answers: /v1/models asks each remote
// engine for its own model list, at most once per listingTTL however many
// clients ask (concurrent askers share one fan-out), and reports its models
// loaded or unloaded from the cached answer. Engines the gateway starts are
// known without asking.
//
// A remote engine with models_from is a node that reports each model's own
// state (status.value loaded, loading or unloaded, as this gateway,
// llama-swap and llama.cpp's router mode do): the same fan-out reads it,
// and pools route by it (pool.go): a model loaded on a node is served there,
// one loading is waited for, and only then is a node made to load it.

const (
	listingTTL     = 2 * time.Second
	listingMaxAge  = 30 * time.Second // older answers are waited for, not served
	listingTimeout = 2 * time.Second
	maxListing     = 1 << 20
)

// fleet is one fan-out's answers.
type fleet struct {
	at time.Time
	// up: remote engine name → answered its model list
	up map[string]bool
	// models: a models_from engine's name → model id → its status there
	models map[string]map[string]string
}

// fleet returns the remote engines' answers for routing. Older than
// listingTTL, they are asked again (once, however many callers ask) in the
// background, and the answers in hand serve meanwhile: a slow node delays
// no request. Only when there are none younger than listingMaxAge does a
// request wait for the fan-out (at most listingTimeout).
func (g *Gateway) fleet(ctx context.Context) *fleet { return g.fleetAged(ctx, listingMaxAge) }

// listingFleet returns the remote engines' answers for a model listing
// (/v1/models), which says what the nodes report now: answers older than
// listingTTL are asked again and waited for (at most listingTimeout). A
// listing that served the answers in hand showed what a node had reported
// up to 30 s before: a front door listed every model unloaded while a node
// reported one loaded, until a second look.
func (g *Gateway) listingFleet(ctx context.Context) *fleet {
	return g.fleetAged(ctx, listingTTL)
}

// fleetAged returns answers younger than listingTTL at once; older ones
// are asked again, and served meanwhile while younger than maxAge, else
// waited for.
func (g *Gateway) fleetAged(ctx context.Context, maxAge time.Duration) *fleet {
	l := &g.listing
	l.mu.Lock()
	age := time.Duration(-1)
	if l.last != nil {
		age = g.clock.Now().Sub(l.last.at)
	}
	if age >= 0 && age < listingTTL {
		f := l.last
		l.mu.Unlock()
		return f
	}
	if l.running == nil {
		l.running = make(chan struct{})
		go g.fanOut(l.running)
	}
	running := l.running
	if age >= 0 && age < maxAge {
		f := l.last
		l.mu.Unlock()
		return f
	}
	l.mu.Unlock()
	select {
	case <-running:
	case <-ctx.Done():
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		return &fleet{}
	}
	return l.last
}

// fanOut asks every remote engine at once and stores the answers.
func (g *Gateway) fanOut(done chan struct{}) {
	f := &fleet{up: map[string]bool{}, models: map[string]map[string]string{}}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, rt := range g.askedRoutes() {
		if rt.cfg.Managed() {
			continue
		}
		if rt.provider != nil {
			// a cloud provider lists no models at /v1/models (or not
			// with the key its requests take): it is up, as far as a
			// listing can tell; its answers say otherwise (its state)
			mu.Lock()
			f.up[rt.cfg.Name] = true
			mu.Unlock()
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			ok, models := g.askModels(rt)
			rt.eng.Heard(ok)
			mu.Lock()
			f.up[rt.cfg.Name] = ok
			if rt.cfg.ModelsFrom != "" && ok {
				f.models[rt.cfg.Name] = models
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	l := &g.listing
	l.mu.Lock()
	f.at = g.clock.Now()
	l.last, l.running = f, nil
	l.mu.Unlock()
	close(done)
}

// askModels reports whether the engine answers its model list (GET
// /v1/models, or its models_from) with a 2xx, asked with its own key, and
// for a models_from engine each listed model's status.
func (g *Gateway) askModels(rt *route) (bool, map[string]string) {
	ctx, cancel := context.WithTimeout(context.Background(), listingTimeout)
	defer cancel()
	base := rt.eng.Peek()
	if base == nil {
		return false, nil
	}
	path := rt.cfg.ModelsFrom
	if path == "" {
		path = "/v1/models"
	}
	u := *base
	u.Path = upstream.JoinPath(base.Path, path)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, nil
	}
	rt.cfg.SetKey(req.Header)
	resp, err := rt.eng.Transport().RoundTrip(req)
	if err != nil {
		return false, nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, maxListing))
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return false, nil
	}
	if rt.cfg.ModelsFrom == "" {
		return true, nil
	}
	return true, grammar.ModelStates(body)
}

// nodeState is where model stands on rt's node, by the last listing and
// the requests this gateway sent since.
func (g *Gateway) nodeState(f *fleet, rt *route, model string) int {
	if !f.up[rt.cfg.Name] {
		return nodeUnreachable
	}
	switch f.models[rt.cfg.Name][model] {
	case "loaded":
		return nodeLoaded
	case "loading":
		return nodeLoading
	}
	l := &g.listing
	l.mu.Lock()
	at, ok := l.woken[rt.cfg.Name+"\x00"+model]
	l.mu.Unlock()
	if ok && !f.at.After(at) {
		return nodeLoading
	}
	return nodeUnloaded
}

// wakeNode records that a request went to a node for a model it had
// unloaded: the node is loading it now.
func (g *Gateway) wakeNode(rt *route, model string) {
	l := &g.listing
	l.mu.Lock()
	if l.woken == nil {
		l.woken = map[string]time.Time{}
	}
	l.woken[rt.cfg.Name+"\x00"+model] = g.clock.Now()
	l.mu.Unlock()
}

// Where a model stands on a models_from node, as pools rank it.
const (
	nodeLoaded      = iota
	nodeLoading     // wait for it rather than load it on another node
	nodeUnloaded    // a request there makes the node load it
	nodeUnreachable // the node did not answer its model list
)
