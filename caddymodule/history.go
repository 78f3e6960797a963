package caddymodule

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/trace"
	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler"
	"github.com/llmgateway/caddy-llm-gateway/history"
	"github.com/llmgateway/caddy-llm-gateway/statuspage"
)

// The request history (issue 27): each finished request's story, kept in
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
		Model: history.Cut(res.ModelAsked), Engine: res.Engine, Fallback: res.Fallback,
		Status: res.Status, TTFBMs: ms(res.TTFB), DurationMs: ms(res.Duration),
		TokensIn: -1, TokensOut: -1,
		Stream: strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream"),
	}
	if res.HasUsage {
		rec.TokensIn, rec.TokensOut = int64(res.Usage.Prompt), int64(res.Usage.Completion)
	}
	if len(res.Tries) > 0 {
		rec.Tries = make([]history.Try, len(res.Tries))
		for i, t := range res.Tries {
			rec.Tries[i] = history.Try{
				Engine: t.Engine, Model: t.Model, Address: t.Address,
				StartMs: ms(t.Start.Sub(arrived)), DurationMs: ms(t.End.Sub(t.Start)), WaitedMs: ms(t.Waited),
				Status: t.Status, Reason: t.Reason, Scope: failureScope(t), Resume: t.Resume,
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

// maskedHead bounds what maskClient reads of a header: the history and the
// spans keep at most 128 bytes of one, and a secret that starts in them is
// shorter than the rest of the head, so it is masked whole.
const maskedHead = 4 << 10

// maskClient is a header the client sent (User-Agent, X-Session-Id), as the
// history and the spans keep it (issue 39, SPEC §19): masked as engine
// output is (engines.Mask: the gateway's key tokens and whatever looks like
// a credential), so that a token sent there is neither stored nor exported.
// Only its head is masked: a header may be as long as the server allows,
// and the masks' patterns cost per byte.
func maskClient(v string) string {
	if v == "" {
		return ""
	}
	return engines.Mask(v[:min(len(v), maskedHead)], nil)
}

// failureReason is why a request failed, for the history and the page: the
// key rule that refused it, or its last attempt's verdict.
func failureReason(res *handler.Result) string {
	switch {
	case res.Refused != "":
		return "key " + res.Refused
	case res.Status < 400:
		return ""
	case res.Status == handler.StatusClientClosed:
		return "client closed"
	case len(res.Tries) > 0:
		return res.Tries[len(res.Tries)-1].Reason
	}
	return ""
}

// failureScope is whose health a failed try speaks of; an answer's is none.
func failureScope(t handler.Try) string {
	if t.Reason == "ok" {
		return ""
	}
	return t.Scope
}

// clientAddress is the client's IP as Caddy sees it (its trusted proxies
// honoured), else the connection's.
func clientAddress(r *http.Request) string {
	if ip, ok := caddyhttp.GetVar(r.Context(), caddyhttp.ClientIPVarKey).(string); ok && ip != "" {
		return ip
	}
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// serveRequestsAdmin serves GET /llm_gateway/requests: the history, filtered
// and paged (history.ParseQuery), as JSON or, with ?format=jsonl or
// Accept: application/x-ndjson, as JSON lines (every record selected).
func serveRequestsAdmin(w http.ResponseWriter, r *http.Request) error {
	if r.Method != http.MethodGet {
		return caddy.APIError{HTTPStatus: http.StatusMethodNotAllowed, Err: fmt.Errorf("%s %s is not supported", r.Method, r.URL.Path)}
	}
	st := newestHistory()
	if st == nil {
		return caddy.APIError{HTTPStatus: http.StatusNotFound, Err: errors.New("the request history is off in the running config (history off)")}
	}
	f, err := history.ParseQuery(r.URL.Query(), time.Now())
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusBadRequest, Err: err}
	}
	if history.WantsLines(r) {
		return st.WriteLines(w, f)
	}
	page, err := st.QueryPage(f)
	if err != nil {
		return caddy.APIError{HTTPStatus: http.StatusInternalServerError, Err: err}
	}
	return writeAdminJSON(w, page)
}

// History gives the status pages the newest live history.
func (liveSource) History() *history.Store { return newestHistory() }

// Interface guards
var _ statuspage.HistorySource = liveSource{}
