package caddymodule

import (
	"sync"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
)

// The events app of the newest config: engines outlive configs, so their
// events go through whichever config is current.
var events struct {
	mu  sync.Mutex
	app *caddyevents.App
	ctx caddy.Context
}

func setEvents(ctx caddy.Context) {
	appIface, err := ctx.App("events")
	if err != nil {
		return
	}
	app, ok := appIface.(*caddyevents.App)
	if !ok {
		return
	}
	events.mu.Lock()
	events.app, events.ctx = app, ctx
	events.mu.Unlock()
}

func emit(name string, data map[string]any) {
	events.mu.Lock()
	app, ctx := events.app, events.ctx
	events.mu.Unlock()
	if app != nil {
		app.Emit(ctx, name, data)
	}
}
