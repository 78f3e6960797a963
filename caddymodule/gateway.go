package caddymodule

import (
	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/keystore"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// Gateway is the `llm_gateway` HTTP handler: an OpenAI-compatible front door
// that routes requests by model to engines it may start on demand.
type Gateway struct {
	hconfig.Config

	// UI mounts the status page on the site at UI.Path, behind the
	// handler's keys (which it requires). Default: none; the page is always
	// on Caddy's admin endpoint at /llm_gateway/ui/.
	UI *statuspage.Config `json:"ui,omitempty"`

	// History keeps each finished request's story for the admin API and
	// the status page. Default: on, 100000 requests for at most 7 days, in
	// the key counters' embedded file under Caddy's data directory.
	History *history.Config `json:"history,omitempty"`

	gw      *handler.Gateway
	ui      *statuspage.Server
	engines []*engines.Engine
	poolKey []string
	limiter *quota.Limiter
	issued  *keystore.Store // keys issued at run time (issuedkeys.go), nil without issued_keys
	history *history.Store
	logger  *zap.Logger
	// followers give dynamic pools their members (dynamic.go)
	followers *followers
	ctx       caddy.Context // the config's, for its http app's grace_period (goingaway.go)
}

// CaddyModule returns the Caddy module information. Its receiver is a
// pointer that it never reads: Caddy's events app asks the emitting module
// for its ID from an engine's goroutine (a health check), which may run
// while Provision still fills the struct in.
func (*Gateway) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.handlers.llm_gateway",
		New: func() caddy.Module { return new(Gateway) },
	}
}

// Interface guards
var (
	_ caddy.Provisioner           = (*Gateway)(nil)
	_ caddy.Validator             = (*Gateway)(nil)
	_ caddy.CleanerUpper          = (*Gateway)(nil)
	_ caddyhttp.MiddlewareHandler = (*Gateway)(nil)
	_ caddyfile.Unmarshaler       = (*Gateway)(nil)
)
