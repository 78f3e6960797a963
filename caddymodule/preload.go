package caddymodule

import (
	"fmt"
	"sync"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func init() {
	caddy.RegisterModule(new(preloader))
}

// preloader is the llm_gateway app. Engines with `preload` must start once
// their config runs, but a handler has no such moment: its Provision also
// runs for `caddy validate` and `caddy adapt --validate`, which must start
// nothing. Caddy starts an app only when its config really runs (after every
// module of it is provisioned), so each handler hands its preload engines
// to this app, which Caddy instantiates for the config when a handler asks
// for it (ctx.App) and starts with the config's other apps. A config that
// fails to start is cleaned up: its engines are destructed, preloaded or not.
type preloader struct {
	mu      sync.Mutex
	engines []*engines.Engine
}

// CaddyModule returns the Caddy module information.
func (*preloader) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "llm_gateway",
		New: func() caddy.Module { return new(preloader) },
	}
}

// Start starts the preload engines that are stopped, without waiting for
// them: a reload that keeps a running engine leaves it as it is, and a start
// that fails is logged (the next request tries again).
func (p *preloader) Start() error {
	p.mu.Lock()
	es := append([]*engines.Engine(nil), p.engines...)
	p.mu.Unlock()
	for _, e := range es {
		e.Preload()
	}
	return nil
}

// Stop does nothing: engines outlive configs, and the handlers' Cleanup
// lets go of them.
func (*preloader) Stop() error { return nil }

func (p *preloader) add(es []*engines.Engine) {
	p.mu.Lock()
	p.engines = append(p.engines, es...)
	p.mu.Unlock()
}

// preloadAtStart hands a handler's preload engines to its config's app.
func preloadAtStart(ctx caddy.Context, es []*engines.Engine) error {
	if len(es) == 0 {
		return nil
	}
	app, err := ctx.App("llm_gateway")
	if err != nil {
		return fmt.Errorf("preload: %v", err)
	}
	app.(*preloader).add(es)
	return nil
}

// Interface guards
var _ caddy.App = (*preloader)(nil)
