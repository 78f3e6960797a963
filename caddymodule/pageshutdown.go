package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// A status page's streams (api/events, api/logs/…) never end by
// themselves, and a process told to exit waits for every request its
// servers serve: without grace_period for ever, else the whole period; the
// admin endpoint's server ten seconds. An open page held `caddy stop` and
// SIGTERM. Each page request's context therefore ends when its server's
// Shutdown begins (net/http runs the functions registered with
// RegisterOnShutdown then): the stream ends cleanly, the page reconnects
// to whatever serves next (a reload's new server), and the exit goes on.

// errServerStopping is why a page's stream ended: its server is stopping.
var errServerStopping = errors.New("the server is stopping")

// serverEnding holds, per server that served a page, a channel closed when
// its Shutdown begins.
var serverEnding sync.Map // *http.Server → chan struct{}

// servePage serves a status page request whose streams end when the
// server that carries it begins to shut down.
func servePage(page *statuspage.Server, w http.ResponseWriter, r *http.Request) {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		page.ServeHTTP(w, r)
		return
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	defer cancel(nil)
	ending := endingOf(srv)
	// owned by the request: it returns when the request does, whichever way
	go func() {
		select {
		case <-ending:
			cancel(errServerStopping)
		case <-ctx.Done():
		}
	}()
	page.ServeHTTP(w, r.WithContext(ctx))
}

// endingOf is srv's channel, registered with it once. The entry outlives
// the shutdown by a minute, so that a request already on its way when
// Shutdown began finds the channel closed (a function registered after
// Shutdown is never run), and then goes, with the server it holds.
func endingOf(srv *http.Server) chan struct{} {
	fresh := make(chan struct{})
	v, loaded := serverEnding.LoadOrStore(srv, fresh)
	ending := v.(chan struct{})
	if !loaded {
		srv.RegisterOnShutdown(func() {
			close(ending)
			time.AfterFunc(time.Minute, func() { serverEnding.Delete(srv) })
		})
	}
	return ending
}
