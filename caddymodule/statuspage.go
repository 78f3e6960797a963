package caddymodule

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// adminPage is the status page on Caddy's admin endpoint: no key, since
// Caddy guards its admin endpoint itself (loopback, origin checks). It may
// take the streams kept in reserve for it, so that operator keys holding
// every stream of the sites' pages do not lock it out.
var adminPage = &statuspage.Server{Prefix: "/llm_gateway/ui", Board: board, Source: liveSource{}, Admin: true}

// liveSource is the running gateway for the status page: the live configs'
// engines, pools and keys, and the admin API's engine actions and key reset.
type liveSource struct{}

func (liveSource) Engines() []*engines.Engine {
	liveMu.Lock()
	defer liveMu.Unlock()
	out := make([]*engines.Engine, 0, len(liveEngines))
	for _, list := range liveEngines {
		if len(list) > 0 {
			out = append(out, list[len(list)-1])
		}
	}
	sortEngines(out)
	return out
}

func (liveSource) Pools() []handler.PoolStatus { return livePools() }

func (liveSource) Act(ctx context.Context, name, action string, drain bool) error {
	e, err := adminEngine(name)
	if err == nil {
		err = engineAction(ctx, e, action, drain)
	}
	return asPageError(err)
}

// asPageError keeps an admin API error's status for the status page.
func asPageError(err error) error {
	var apiErr caddy.APIError
	if errors.As(err, &apiErr) {
		return pageError{apiErr}
	}
	return err
}

func (liveSource) KeyUsage() []quota.KeyUsage { return liveKeyUsage() }

func (liveSource) ResetKey(name string) error { return asPageError(resetKey(name)) }

// pageError gives an admin API error's status to the status page.
type pageError struct{ caddy.APIError }

func (e pageError) StatusCode() int { return e.HTTPStatus }

func (e pageError) Error() string { return e.Err.Error() }

func sortEngines(es []*engines.Engine) {
	slices.SortFunc(es, func(a, b *engines.Engine) int { return strings.Compare(a.Name(), b.Name()) })
}

// History gives the status pages the newest live history.
func (liveSource) History() *history.Store { return newestHistory() }

// Interface guards
var _ statuspage.HistorySource = liveSource{}
