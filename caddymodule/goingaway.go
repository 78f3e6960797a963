package caddymodule

import (
	"net/http"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// A front door that restarts (handler/goingaway.go): Caddy's grace_period
// bounds how long a process told to exit (SIGTERM, `caddy stop`, the admin
// API's /stop) waits for the requests its servers serve; then it exits,
// and a stream still open is cut mid-event. The gateway hears of the stop
// from each server itself (net/http runs the functions registered with
// RegisterOnShutdown when Shutdown begins) and, shortly before the period
// ends, ends each stream it relays there with an error event and a clean
// end. A reload is left alone: its old server stops accepting connections
// but nothing closes the ones it serves when the period ends (net/http's
// Shutdown only stops waiting), so its streams finish whole. With no
// grace_period (Caddy waits forever) nothing is ended.

// watched are the servers whose shutdown the gateway listens for: one
// registration per server, made by the first request it serves.
var watched sync.Map // *http.Server → struct{}

// watchShutdown registers, once per server, the end of its streams before
// its grace period ends.
func (g *Gateway) watchShutdown(r *http.Request) {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return
	}
	if _, seen := watched.Load(srv); seen {
		return
	}
	if _, seen := watched.LoadOrStore(srv, struct{}{}); seen {
		return
	}
	grace := g.gracePeriod()
	srv.RegisterOnShutdown(func() {
		if grace <= 0 || !caddy.Exiting() {
			watched.Delete(srv)
			return
		}
		time.AfterFunc(grace-goingAwayLead(grace), func() { handler.GoingAway(srv) })
		// the server is gone once its period is: forget it
		time.AfterFunc(grace+time.Second, func() {
			handler.ForgetServer(srv)
			watched.Delete(srv)
		})
	})
}

// goingAwayLead is how long before the grace period's end the streams are
// ended: a quarter of the period, at most a second, time for the last
// events to reach the client before Caddy closes the connection.
func goingAwayLead(grace time.Duration) time.Duration {
	return min(grace/4, time.Second)
}

// gracePeriod is the http app's grace_period in this handler's config (0:
// Caddy waits for every request). The app is provisioned by the time a
// request is served, so asking for it returns it and loads nothing.
func (g *Gateway) gracePeriod() time.Duration {
	app, err := g.ctx.AppIfConfigured("http")
	if err != nil {
		return 0
	}
	if a, ok := app.(*caddyhttp.App); ok {
		return time.Duration(a.GracePeriod)
	}
	return 0
}
