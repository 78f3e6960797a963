package caddymodule

import (
	"context"
	"errors"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/quota"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// board holds the recent requests and engine starts every status page shows:
// process-wide, like the engines, so a reload keeps the list.
var board = statuspage.NewBoard(statuspage.DefaultRecent)

// adminPage is the status page on Caddy's admin endpoint: no key, since
// Caddy guards its admin endpoint itself (loopback, origin checks). It may
// take the streams kept in reserve for it, so that operator keys holding
// every stream of the sites' pages do not lock it out (issue 39).
var adminPage = &statuspage.Server{Prefix: "/llm_gateway/ui", Board: board, Source: liveSource{}, Admin: true}

// recordRequest adds a finished request to the board; it runs on the
// request's goroutine and only takes the board's short lock.
func recordRequest(r *http.Request, res *handler.Result) {
	q := statuspage.Request{
		Time: board.Clock().Now().Add(-res.Duration).UnixMilli(), Path: r.URL.Path,
		Model: res.ModelAsked, Engine: res.Engine, Fallback: res.Fallback, Attempts: res.Attempts,
		Status: res.Status, TTFBMs: ms(res.TTFB), DurationMs: ms(res.Duration),
		TokensIn: -1, TokensOut: -1, KeyName: res.KeyName, Reason: failureReason(res),
	}
	if res.HasUsage {
		q.TokensIn, q.TokensOut = int64(res.Usage.Prompt), int64(res.Usage.Completion)
	}
	board.Record(q)
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

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
