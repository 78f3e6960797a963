package caddymodule

import (
	"net/http"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// board holds the recent requests and engine starts every status page shows:
// process-wide, like the engines, so a reload keeps the list.
var board = statuspage.NewBoard(statuspage.DefaultRecent)

// recordRequest adds a finished request to the board; it runs on the
// request's goroutine and only takes the board's short lock.
func recordRequest(r *http.Request, res *handler.Result) {
	q := statuspage.Request{
		Time: board.Clock().Now().Add(-res.Duration).UnixMilli(), Path: r.URL.Path,
		API: res.API, EngineAPI: res.EngineAPI, UserAgent: history.Cut(maskClient(r.Header.Get("User-Agent"))),
		Model: res.ModelAsked, Engine: res.Engine, Fallback: res.Fallback, Attempts: res.Attempts,
		Status: res.Status, TTFBMs: ms(res.TTFB), DurationMs: ms(res.Duration),
		TokensIn: -1, TokensOut: -1, KeyName: res.KeyName, Reason: failureReason(res),
	}
	if res.HasUsage {
		q.TokensIn, q.TokensOut = int64(res.Usage.Input), int64(res.Usage.Output)
	}
	board.Record(q)
}
