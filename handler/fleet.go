package handler

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/handler/upstream"
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

// fleet returns the remote engines' answers of the last listingTTL, asking
// them again (once, however many callers wait) when they are older.
func (g *Gateway) fleet(ctx context.Context) *fleet {
	l := &g.listing
	l.mu.Lock()
	if l.last != nil && g.clock.Now().Sub(l.last.at) < listingTTL {
		f := l.last
		l.mu.Unlock()
		return f
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
	for _, rt := range g.routes {
		if rt.cfg.Managed() {
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
	return true, modelStates(body)
}

// modelStates reads a model list's per-model status: OpenAI's list shape
// with llama-swap's and llama.cpp router mode's "status": {"value": …}, and
// this gateway's "aliases". A listed model without a status is loaded (the
// engine serves what it lists).
func modelStates(body []byte) map[string]string {
	var list struct {
		Data []struct {
			ID      string   `json:"id"`
			Aliases []string `json:"aliases"`
			Status  *struct {
				Value string `json:"value"`
			} `json:"status"`
		} `json:"data"`
	}
	states := map[string]string{}
	if json.Unmarshal(body, &list) != nil {
		return states
	}
	for _, m := range list.Data {
		s := "loaded"
		if m.Status != nil {
			switch m.Status.Value {
			case "loading", "unloaded":
				s = m.Status.Value
			case "sleeping": // swap sleep: a request wakes it, sooner than a load
				s = "loading"
			}
		}
		states[m.ID] = s
		for _, a := range m.Aliases {
			// a gateway node lists an engine once, its other names as
			// aliases (list_aliases off): they are the same model
			if _, ok := states[a]; !ok {
				states[a] = s
			}
		}
	}
	return states
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
