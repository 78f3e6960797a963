package handler

import (
	"context"
	"errors"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler/apierror"
)

// A front door that restarts. When Caddy is told to exit, each server
// stops accepting connections and waits for the requests it serves, at
// most its grace_period; then the process exits, and a stream still open
// ends mid-event, a cut the client cannot tell from a crash. (A reload's
// old server is not cut: its streams finish.) Shortly before the period
// ends, the caddy module calls
// GoingAway for the server: each stream it relays has its upstream
// cancelled, gets one error event in its own grammar (503
// gateway_going_away: send the request again) and a clean end, so that its
// client knows the answer is incomplete and why, and retries elsewhere.
// Such an end is not the engine's fault: no breaker hears of it, and it is
// not resumed on a fallback (this gateway is leaving).

// errGoingAway is the cause a relayed attempt is cancelled with.
var errGoingAway = errors.New("the gateway is going away: its server's grace period is ending")

// awayWatch is one relayed stream's registration with its server.
type awayWatch struct {
	srv  *http.Server
	mu   sync.Mutex
	a    *attempt // the attempt relayed now (a resume replaces it)
	away bool
}

// servers are the streams each server relays, and the servers going away.
var servers = struct {
	sync.Mutex
	streams map[*http.Server]map[*awayWatch]struct{}
	away    map[*http.Server]bool
}{streams: map[*http.Server]map[*awayWatch]struct{}{}, away: map[*http.Server]bool{}}

// watchGoingAway registers a stream with the server that serves its
// request (net/http puts it in the request's context); nil when there is
// none (a probe's request, a test's recorder).
func watchGoingAway(r *http.Request) *awayWatch {
	srv, _ := r.Context().Value(http.ServerContextKey).(*http.Server)
	if srv == nil {
		return nil
	}
	w := &awayWatch{srv: srv}
	servers.Lock()
	defer servers.Unlock()
	w.away = servers.away[srv]
	if servers.streams[srv] == nil {
		servers.streams[srv] = map[*awayWatch]struct{}{}
	}
	servers.streams[srv][w] = struct{}{}
	return w
}

// follow makes a the attempt the stream relays now; it is cancelled at
// once when the server is going away already.
func (w *awayWatch) follow(a *attempt) {
	if w == nil {
		return
	}
	w.mu.Lock()
	w.a = a
	away := w.away
	w.mu.Unlock()
	if away && a.cancel != nil {
		a.cancel(errGoingAway)
	}
}

// done ends the stream's registration.
func (w *awayWatch) done() {
	if w == nil {
		return
	}
	servers.Lock()
	defer servers.Unlock()
	delete(servers.streams[w.srv], w)
	if len(servers.streams[w.srv]) == 0 {
		delete(servers.streams, w.srv)
	}
}

// GoingAway ends every stream srv relays, as the server's grace period
// ends: each upstream is cancelled, and its relay writes the client an
// error event and ends cleanly (wentAway). Streams that begin on srv after
// it are ended as they begin.
func GoingAway(srv *http.Server) {
	servers.Lock()
	servers.away[srv] = true
	var ws []*awayWatch
	for w := range servers.streams[srv] {
		ws = append(ws, w)
	}
	servers.Unlock()
	for _, w := range ws {
		w.mu.Lock()
		w.away = true
		a := w.a
		w.mu.Unlock()
		if a != nil && a.cancel != nil {
			a.cancel(errGoingAway)
		}
	}
}

// ForgetServer drops what GoingAway remembers of srv, once it has shut
// down.
func ForgetServer(srv *http.Server) {
	servers.Lock()
	defer servers.Unlock()
	delete(servers.away, srv)
}

// wentAway ends a relay that stopped because its server is going away:
// the client gets the error event and a clean end, and true. Any other
// stop is not its concern (false).
func (g *Gateway) wentAway(rp *reply, a *attempt) bool {
	if a.ctx == nil || !errors.Is(context.Cause(a.ctx), errGoingAway) {
		return false
	}
	g.log.Info("a stream ended as its server's grace period ends", zap.String("engine", a.c.rt.cfg.Name))
	rp.res.cutShort("going_away", rp.sent)
	rp.errorEvent(&apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeUnavailable, Code: "gateway_going_away",
		Message: "the gateway is restarting and ended this stream before its grace period ran out: the answer is incomplete; send the request again"})
	return true
}
