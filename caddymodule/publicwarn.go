package caddymodule

import (
	"net/netip"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"
)

// warnIfOpen logs a warning when a gateway without keys is served on an
// address others can reach (a listener of its server that is neither
// loopback nor a unix socket), as the spec asks of a public bind: in plain
// text it is most likely a mistake, and said so; behind TLS (a domain with
// automatic HTTPS) it puts the engines on the internet as surely, unless a
// handler before the gateway authenticates, which the gateway cannot see
// (an `identity` block naming who it signed in is how it would).
//
// Caddy's http app provisions each server's handlers with the server in the
// context (caddyhttp.ServerCtxKey), after it has resolved the placeholders
// of its listen addresses and automatic HTTPS has given TLS connection
// policies to the servers that get them: at this point the server already
// knows whether it will speak TLS.
func warnIfOpen(ctx caddy.Context, logger *zap.Logger, hasKeys bool) {
	if hasKeys {
		return
	}
	srv, _ := ctx.Value(caddyhttp.ServerCtxKey).(*caddyhttp.Server)
	if srv == nil {
		// not inside an HTTP server we can look at: nothing rules it out
		logger.Warn("llm_gateway has no keys: anyone who can reach this site can use its engines")
		return
	}
	if open := plainPublicListeners(srv, httpPort(ctx)); len(open) > 0 {
		logger.Warn("llm_gateway has no keys and its site listens without TLS on a non-loopback address: anyone who can reach it can use its engines",
			zap.Strings("listen", open))
	} else if public := publicListeners(srv); len(public) > 0 {
		logger.Warn("llm_gateway has no keys and its site listens on a non-loopback address: anyone who can reach it can use its engines, unless a handler before it authenticates (give it keys, or an identity block for who that handler signs in)",
			zap.Strings("listen", public))
	}
}

// publicListeners returns the listen addresses of srv that are not
// loopback, TLS or not.
func publicListeners(srv *caddyhttp.Server) []string {
	var public []string
	for _, listen := range srv.Listen {
		if addr, err := caddy.ParseNetworkAddress(listen); err != nil || !isLoopback(addr) {
			public = append(public, listen)
		}
	}
	return public
}

// plainPublicListeners returns the listen addresses of srv that are neither
// loopback nor TLS. A server has TLS on each of its listeners when it has a
// connection policy, except on the HTTP port, as caddyhttp.App.Start decides.
func plainPublicListeners(srv *caddyhttp.Server, httpPort int) []string {
	var open []string
	for _, listen := range srv.Listen {
		addr, err := caddy.ParseNetworkAddress(listen)
		if err != nil {
			open = append(open, listen) // Caddy refuses it at start anyway; warn rather than guess
			continue
		}
		onHTTPPort := uint(httpPort) >= addr.StartPort && uint(httpPort) <= addr.EndPort
		if isLoopback(addr) || (len(srv.TLSConnPolicies) > 0 && !onHTTPPort) {
			continue
		}
		open = append(open, listen)
	}
	return open
}

// isLoopback reports whether only this machine can connect to addr. A
// wildcard (":8080"), a host name other than localhost and a socket handed
// over by a service manager (fd/…) may be reachable from elsewhere.
func isLoopback(addr caddy.NetworkAddress) bool {
	if addr.IsUnixNetwork() {
		return true
	}
	if addr.IsFdNetwork() {
		return false
	}
	if addr.Host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(addr.Host)
	return err == nil && ip.IsLoopback()
}

// httpPort is the port the http app serves plain HTTP on. The app is being
// provisioned when its handlers are, and Caddy registers an app before it
// provisions it, so AppIfConfigured finds it without loading it again.
func httpPort(ctx caddy.Context) int {
	if app, err := ctx.AppIfConfigured("http"); err == nil {
		if httpApp, ok := app.(*caddyhttp.App); ok && httpApp.HTTPPort != 0 {
			return httpApp.HTTPPort
		}
	}
	return caddyhttp.DefaultHTTPPort
}
