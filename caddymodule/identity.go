package caddymodule

import (
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
)

// withIdentity hands the door who another Caddy handler authenticated
// (basic_auth, forward_auth, a JWT module): the identity block's
// placeholders, resolved for this request by Caddy's replacer, which the
// handler package does not know. A placeholder nothing set (no handler
// authenticated the request) is empty: no identity, and the request needs
// a gateway key.
func (g *Gateway) withIdentity(r *http.Request) *http.Request {
	id := g.Identity
	if id == nil {
		return r
	}
	repl, ok := r.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
	if !ok {
		return r
	}
	who := keys.Identity{User: repl.ReplaceAll(id.User, "")}
	if who.User == "" {
		return r
	}
	if id.Groups != "" {
		who.Groups = keys.SplitGroups(repl.ReplaceAll(id.Groups, ""))
	}
	return keys.WithIdentity(r, who)
}
