package caddymodule

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
)

// The request history: each finished request's story, kept in
// the key counters' embedded file (its own bucket) under Caddy's data
// directory, so it survives reloads and restarts, or in memory with
// `history { memory }`. The request only hands its record to the history's
// writer (history.Store.Add, which never waits); a full queue drops the
// record and counts it in llm_gateway_history_dropped_total.

// historyDropped counts records the history's queue had no room for.
var historyDropped = sync.OnceValue(func() prometheus.Counter {
	return prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNS, Name: "history_dropped_total",
		Help: "Finished requests the request history dropped because its writer was behind (its queue full)."})
})

func registerHistoryMetrics(reg *prometheus.Registry) {
	if err := reg.Register(historyDropped()); err != nil {
		var are prometheus.AlreadyRegisteredError
		if !errors.As(err, &are) {
			caddy.Log().Error("registering llm_gateway history metrics", zap.Error(err))
		}
	}
}

// openHistory makes the config's history handle: nil when it is off. It
// touches no file: the first request's record opens it (caddy validate
// writes nothing). A file it cannot open (held by another process, such as
// a second server on one data directory) is logged, and the history is kept
// in memory instead.
func openHistory(cfg *history.Config, log *zap.Logger) (*history.Store, error) {
	var c history.Config
	if cfg != nil {
		c = *cfg
	}
	if c.Off {
		return nil, nil
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	keep, maxAge := c.Limits()
	opts := history.Options{
		Keep: keep, MaxAge: maxAge,
		OnError: func(err error) {
			log.Warn("the request history is failing: requests are missing from it", zap.Error(err))
		},
	}
	if !c.Memory {
		opts.Path = quotaPath()
	}
	st, err := history.Open(opts)
	if err != nil {
		return nil, fmt.Errorf("the request history: %v", err)
	}
	return st, nil
}

// keepStory hands a finished request's story to the history. It runs on the
// request's goroutine and never waits (BenchmarkKeepStory).
func keepStory(st *history.Store, w http.ResponseWriter, r *http.Request, res *handler.Result, now time.Time) {
	arrived := arrival(res, now)
	rec := history.Record{
		Time: arrived.UnixMilli(), Path: r.URL.Path,
		Key: res.KeyName, Client: clientAddress(r),
		UserAgent: history.Cut(maskClient(r.Header.Get("User-Agent"))), Session: history.Cut(maskClient(r.Header.Get("X-Session-Id"))),
		Model: history.Cut(res.ModelAsked), Engine: res.Engine, Fallback: res.Fallback, API: res.API, EngineAPI: res.EngineAPI,
		Status: res.Status, TTFBMs: ms(res.TTFB), DurationMs: ms(res.Duration),
		TokensIn: -1, TokensOut: -1,
		Stream: strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"),
		Cut:    res.Cut, RelayedBytes: res.Relayed,
	}
	if res.HasUsage {
		rec.TokensIn, rec.TokensOut = int64(res.Usage.Input), int64(res.Usage.Output)
		rec.CacheRead, rec.CacheWrite = int64(res.Usage.CacheRead), int64(res.Usage.CacheWrite)
	}
	rec.Cost = res.Cost // spend.go
	if len(res.Tries) > 0 {
		rec.Tries = make([]history.Try, len(res.Tries))
		for i, t := range res.Tries {
			rec.Tries[i] = history.Try{
				Engine: t.Engine, Model: t.Model, Address: t.Address,
				StartMs: ms(t.Start.Sub(arrived)), DurationMs: ms(t.End.Sub(t.Start)), WaitedMs: ms(t.Waited),
				Status: t.Status, Reason: t.Reason, Scope: failureScope(t), Resume: t.Resume,
				Hedge: t.Hedge, LostForMs: ms(t.LostFor),
			}
		}
	}
	rec.Reason = failureReason(res)
	if sc := trace.SpanContextFromContext(r.Context()); sc.IsSampled() {
		rec.TraceID = sc.TraceID().String()
	}
	if !st.Add(rec) {
		historyDropped().Inc()
	}
}
