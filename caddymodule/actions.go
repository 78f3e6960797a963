package caddymodule

import (
	"context"
	"fmt"
	"net/http"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// The operators' actions, shared by the admin API and the status page's
// buttons: an engine started or stopped, a key's counters reset. Their
// errors are caddy.APIErrors, whose status the page keeps (asPageError).

// engineAction runs an engine action of the admin API: "start" (and wait
// until ready) or "stop" (drain: let the requests in flight finish first).
// The status page's buttons call it too.
func engineAction(ctx context.Context, e *engines.Engine, action string, drain bool) error {
	switch action {
	case "start":
		if err := e.Start(ctx); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusServiceUnavailable, Err: err}
		}
	case "stop":
		if err := e.Stop(ctx, drain, engines.StopAdmin); err != nil {
			return caddy.APIError{HTTPStatus: http.StatusConflict, Err: err}
		}
	default:
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("unknown engine action %q: use start or stop", action)}
	}
	return nil
}

func adminEngine(name string) (*engines.Engine, error) {
	e := lookupEngine(name)
	if e == nil {
		return nil, caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no engine named %q in the running config", name)}
	}
	return e, nil
}

// resetKey clears a named key's counters in every live config that limits
// it: the admin API's reset, and the status page's. It is a 404 APIError
// when no live config has limits for the key.
func resetKey(name string) error {
	found := false
	for _, g := range newestGateways() {
		ok, err := g.ResetKey(name)
		if err != nil {
			return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
		}
		found = found || ok
	}
	if !found {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: fmt.Errorf("no key named %q has limits in the running config", name)}
	}
	return nil
}
