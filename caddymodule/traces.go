package caddymodule

import (
	"context"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// A request's story as OpenTelemetry spans, under Caddy's own
// `tracing` directive: its exporter, its sampler and its server span, which
// it puts in the request's context. Nothing here runs without it: the
// context's span is then a no-op that records nothing.
//
// The spans are made when the request has ended (ServeHTTP's deferred
// function, which for a stream runs after its last byte) from the handler's
// Result, with the times the handler took: no span code sits in the
// request's path, and the request's span ends with the stream, not at its
// first byte.
//
//	<caddy's server span>
//	└── chat <model>                 the gateway's request span (internal)
//	    ├── chat <model sent>        one client span per attempt, from Try.Start to Try.End
//	    └── chat <fallback's model>  a resumed stream's try links to the try it continues
//
// Attributes follow the OpenTelemetry GenAI conventions (gen_ai.*) and the
// proposed gateway attributes (semantic-conventions #3342:
// gen_ai.gateway.*); the verdicts are llm_gateway.*. No prompt or answer
// text, no key (a key's configured name only), and what the client sent in
// headers (its session id; its User-Agent in Caddy's server span) masked as
// engine output is.

// tracerName is the instrumentation scope of the gateway's spans.
const tracerName = "github.com/llmgateway/caddy-llm-gateway"

// traceStory writes res's spans under the request's server span, if Caddy
// traces it.
func traceStory(r *http.Request, res *handler.Result, now time.Time) {
	parent := trace.SpanFromContext(r.Context())
	if !parent.IsRecording() {
		return
	}
	tracer := parent.TracerProvider().Tracer(tracerName)
	op := operationName(r.URL.Path)
	arrived := arrival(res, now)

	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.request.model", res.ModelAsked),
		attribute.String("gen_ai.gateway.request.model", res.ModelAsked),
		attribute.StringSlice("gen_ai.gateway.providers.attempted", attempted(res.Tries)),
		attribute.Int("http.response.status_code", res.Status),
		attribute.Int("llm_gateway.attempts", res.Attempts),
	}
	if res.ModelSent != "" && res.Engine != "" {
		attrs = append(attrs, attribute.String("gen_ai.response.model", res.ModelSent))
	}
	if models := answered(res.Tries); len(models) > 0 {
		attrs = append(attrs, attribute.StringSlice("gen_ai.gateway.response.models", models))
	}
	if s := maskClient(r.Header.Get("X-Session-Id")); s != "" {
		attrs = append(attrs, attribute.String("gen_ai.gateway.session.id", cutText(s)))
	}
	maskUserAgent(parent, r)
	attrs = append(attrs, costAttrs(res)...) // spend.go
	if res.HasUsage {
		attrs = append(attrs, attribute.Int("gen_ai.usage.input_tokens", res.Usage.Input),
			attribute.Int("gen_ai.usage.output_tokens", res.Usage.Output))
		// OpenTelemetry's GenAI conventions: the cache's parts of the input
		if res.Usage.CacheRead > 0 {
			attrs = append(attrs, attribute.Int("gen_ai.usage.cache_read.input_tokens", res.Usage.CacheRead))
		}
		if res.Usage.CacheWrite > 0 {
			attrs = append(attrs, attribute.Int("gen_ai.usage.cache_creation.input_tokens", res.Usage.CacheWrite))
		}
	}
	for k, v := range map[string]string{"llm_gateway.engine": res.Engine, "llm_gateway.fallback": res.Fallback, "llm_gateway.key.name": res.KeyName, "llm_gateway.refused": res.Refused,
		"llm_gateway.api": res.API, "llm_gateway.engine_api": res.EngineAPI} {
		if v != "" {
			attrs = append(attrs, attribute.String(k, v))
		}
	}
	attrs = append(attrs, contentAttrs(res)...) // trace_content (tracecontent.go)
	ctx, span := tracer.Start(r.Context(), spanName(op, res.ModelAsked),
		trace.WithTimestamp(arrived), trace.WithSpanKind(trace.SpanKindInternal), trace.WithAttributes(attrs...))
	if res.TTFB > 0 {
		span.AddEvent("llm_gateway.first_byte", trace.WithTimestamp(arrived.Add(res.TTFB)))
	}
	if reason := failureReason(res); reason != "" {
		span.SetStatus(codes.Error, reason)
	}

	var prev trace.SpanContext
	for i, t := range res.Tries {
		prev = traceTry(ctx, tracer, op, t, res.Tries[i+1:], prev)
	}
	span.End(trace.WithTimestamp(now))
}

// maskUserAgent masks the User-Agent in Caddy's server span (otelhttp's
// user_agent.original, as the client sent it): a token sent there is not
// exported. The span is still open (the request's handler
// runs inside it), and an attribute set again replaces the first; a
// User-Agent the masks leave as it is stays untouched.
func maskUserAgent(server trace.Span, r *http.Request) {
	ua := r.UserAgent()
	if m := maskClient(ua); m != ua {
		server.SetAttributes(attribute.String("user_agent.original", m))
	}
}

// traceTry writes one attempt's span and returns its context, which the
// next try links to when it resumes this one's cut stream.
func traceTry(ctx context.Context, tracer trace.Tracer, op string, t handler.Try, after []handler.Try, prev trace.SpanContext) trace.SpanContext {
	attrs := []attribute.KeyValue{
		attribute.String("gen_ai.operation.name", op),
		attribute.String("gen_ai.request.model", t.Model),
		attribute.String("llm_gateway.engine", t.Engine),
		attribute.String("llm_gateway.verdict.reason", t.Reason),
	}
	if host, port, err := net.SplitHostPort(t.Address); err == nil {
		attrs = append(attrs, attribute.String("server.address", host))
		if p, err := strconv.Atoi(port); err == nil {
			attrs = append(attrs, attribute.Int("server.port", p))
		}
	}
	if t.Status != 0 {
		attrs = append(attrs, attribute.Int("http.response.status_code", t.Status))
	}
	if s := failureScope(t); s != "" {
		attrs = append(attrs, attribute.String("llm_gateway.verdict.scope", s))
	}
	if t.Hedge {
		attrs = append(attrs, attribute.Bool("llm_gateway.hedge", true)) // started beside an attempt with no content yet
	}
	if t.Reason == "lost" {
		attrs = append(attrs, attribute.Float64("llm_gateway.hedge.lost_for.ms", ms(t.LostFor)))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(t.Start), trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...)}
	if t.Resume && prev.IsValid() {
		opts = append(opts, trace.WithAttributes(attribute.Bool("llm_gateway.resume", true)),
			trace.WithLinks(trace.Link{SpanContext: prev, Attributes: []attribute.KeyValue{attribute.String("llm_gateway.link", "resumes")}}))
	}
	_, span := tracer.Start(ctx, spanName(op, t.Model), opts...)
	if t.Waited >= noticeableWait {
		span.AddEvent("llm_gateway.wait", trace.WithTimestamp(t.Start.Add(t.Waited)),
			trace.WithAttributes(attribute.Float64("llm_gateway.wait.ms", ms(t.Waited))))
	}
	if t.Reason == "slow" {
		ev := []attribute.KeyValue{attribute.String("llm_gateway.engine", t.Engine)}
		if len(after) > 0 {
			ev = append(ev, attribute.String("llm_gateway.fallback", after[0].Engine))
		}
		span.AddEvent("llm_gateway.slow_start_switch", trace.WithTimestamp(t.End), trace.WithAttributes(ev...))
	}
	if t.Reason != "ok" && t.Reason != "lost" { // a hedge's loser did not fail: another answered first
		span.SetStatus(codes.Error, t.Reason)
	}
	span.End(trace.WithTimestamp(t.End))
	return span.SpanContext()
}

// noticeableWait is the shortest wait for an engine that gets an event: a
// lease on a ready engine takes microseconds.
const noticeableWait = time.Millisecond

// operationName is gen_ai.operation.name for a route.
func operationName(path string) string {
	switch path {
	case "/v1/chat/completions", "/v1/messages", "/v1/responses":
		return "chat"
	case "/v1/completions", "/completion", "/infill":
		return "text_completion"
	case "/v1/embeddings", "/embeddings", "/embedding":
		return "embeddings"
	}
	return strings.Trim(strings.TrimPrefix(path, "/v1/"), "/")
}

func spanName(op, model string) string {
	if model == "" {
		return op
	}
	return op + " " + cutText(model)
}

func cutText(s string) string {
	if len(s) > 128 {
		return s[:128]
	}
	return s
}

// attempted is the engines tried, in order (the fallback chain).
func attempted(tries []handler.Try) []string {
	out := make([]string, 0, len(tries))
	for _, t := range tries {
		out = append(out, t.Engine)
	}
	return out
}

// answered is the models whose content reached the client: the answer's,
// and a stream's that was cut and resumed on another.
func answered(tries []handler.Try) []string {
	var out []string
	for i, t := range tries {
		if (t.Reason == "ok" || i+1 < len(tries) && tries[i+1].Resume) && !slices.Contains(out, t.Model) {
			out = append(out, t.Model)
		}
	}
	return out
}
