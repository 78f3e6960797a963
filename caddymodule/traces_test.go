package caddymodule

import (
	"bytes"
	"compress/gzip"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	collectortrace "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// otlpReceiver is an OTLP/HTTP trace receiver (the protobuf service a
// collector runs) on a free loopback port: Caddy's exporter sends it the
// spans it batches.
type otlpReceiver struct {
	url   string
	mu    sync.Mutex
	spans []*tracepb.Span
	got   chan struct{} // closed and replaced at each export
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	o := &otlpReceiver{got: make(chan struct{})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(o.export)}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	o.url = "http://" + ln.Addr().String()
	return o
}

func (o *otlpReceiver) export(w http.ResponseWriter, r *http.Request) {
	var body io.Reader = r.Body
	if r.Header.Get("Content-Encoding") == "gzip" {
		zr, err := gzip.NewReader(r.Body)
		if err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		body = zr
	}
	b, _ := io.ReadAll(body)
	var req collectortrace.ExportTraceServiceRequest
	if r.URL.Path != "/v1/traces" || proto.Unmarshal(b, &req) != nil {
		http.Error(w, "not an OTLP trace export", 400)
		return
	}
	o.mu.Lock()
	for _, rs := range req.ResourceSpans {
		for _, ss := range rs.ScopeSpans {
			o.spans = append(o.spans, ss.Spans...)
		}
	}
	close(o.got)
	o.got = make(chan struct{})
	o.mu.Unlock()
	out, _ := proto.Marshal(&collectortrace.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	w.Write(out)
}

// requestSpan waits for the gateway's span of the request for model, and
// returns it with its children, oldest first: of the requests for model,
// one that reached an engine and has a span for each of its tries (a
// request the gateway refused has none), else one the gateway refused.
func (o *otlpReceiver) requestSpan(t *testing.T, model string) (*tracepb.Span, []*tracepb.Span) {
	t.Helper()
	deadline := time.After(20 * time.Second) // an upper bound only: the batcher exports every 50ms
	for {
		o.mu.Lock()
		got := o.got
		var refused *tracepb.Span
		for _, root := range o.spans {
			if attr(root, "gen_ai.gateway.request.model") != model || root.Kind != tracepb.Span_SPAN_KIND_INTERNAL {
				continue
			}
			var kids []*tracepb.Span
			for _, s := range o.spans {
				if bytes.Equal(s.ParentSpanId, root.SpanId) {
					kids = append(kids, s)
				}
			}
			attempted := attr(root, "gen_ai.gateway.providers.attempted")
			if attempted == "" && len(kids) == 0 {
				refused = root
				continue
			}
			if attempted != "" && len(kids) == len(strings.Split(attempted, ",")) {
				o.mu.Unlock()
				slices.SortFunc(kids, func(a, b *tracepb.Span) int { return int(int64(a.StartTimeUnixNano) - int64(b.StartTimeUnixNano)) })
				return root, kids
			}
		}
		o.mu.Unlock()
		select {
		case <-got:
		case <-deadline:
			if refused != nil {
				return refused, nil
			}
			t.Fatalf("no request span for %s (with all its tries) in %d spans", model, len(o.spans))
		}
	}
}

// attr is a span's attribute as text; a list is joined with commas.
func attr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return valueText(kv.Value)
		}
	}
	return ""
}

func valueText(v *commonpb.AnyValue) string {
	switch x := v.Value.(type) {
	case *commonpb.AnyValue_StringValue:
		return x.StringValue
	case *commonpb.AnyValue_IntValue:
		return fmt.Sprint(x.IntValue)
	case *commonpb.AnyValue_BoolValue:
		return fmt.Sprint(x.BoolValue)
	case *commonpb.AnyValue_DoubleValue:
		return fmt.Sprint(x.DoubleValue)
	case *commonpb.AnyValue_ArrayValue:
		var parts []string
		for _, e := range x.ArrayValue.Values {
			parts = append(parts, valueText(e))
		}
		return strings.Join(parts, ",")
	}
	return ""
}

func spanEvents(s *tracepb.Span) []string {
	var out []string
	for _, e := range s.Events {
		out = append(out, e.Name)
	}
	return out
}

// startTracedGateway loads a config whose site runs Caddy's tracing
// directive before llm_gateway.
func startTracedGateway(t *testing.T, site string) {
	t.Helper()
	initRaw(t, testGlobals("")+fmt.Sprintf(`http://%s {
	tracing {
		span gateway
	}
	llm_gateway {
%s
	}
}
`, gwAddr, site))
}

// usageChat answers a chat completion that reports its usage.
func usageChat(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, `{"id":"c1","object":"chat.completion","created":1,"model":"up","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"ok"}}],"usage":{"prompt_tokens":7,"completion_tokens":3,"total_tokens":10}}`)
}

func TestEachRequestIsOneTraceWithASpanPerAttempt(t *testing.T) {
	o := newOTLPReceiver(t)
	// Caddy's tracing exports through OpenTelemetry's autoexport, set up
	// by the standard environment variables
	t.Setenv("OTEL_TRACES_EXPORTER", "otlp")
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", o.url)
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "50")
	t.Setenv("OTEL_TRACES_SAMPLER", "always_on")
	// Caddy keeps one tracer provider while any config traces, made with
	// the environment of its time: a config without tracing lets go of an
	// earlier one, so the next is made with this receiver's
	initRaw(t, "{\n\tadmin localhost:@ADMIN@\n\thttp_port @HTTP@\n\thttps_port @HTTPS@\n}\nhttp://"+gwAddr+" {\n\trespond ok\n}\n")

	t.Run("a plain answer", func(t *testing.T) {
		up := newRecorder(t, usageChat)
		startTracedGateway(t, fmt.Sprintf(`
		key tracer history-key-000002
		engine plain {
			to %s
			models tr-plain
			model_name plain-7b
		}`, up.URL))
		resp, body := post(t, "/v1/chat/completions", `{"model":"tr-plain","messages":[{"role":"user","content":"a secret prompt"}]}`,
			"Authorization", "Bearer history-key-000002", "X-Session-Id", "sess-7")
		if resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		root, tries := o.requestSpan(t, "tr-plain")
		want := map[string]string{
			"gen_ai.operation.name": "chat", "gen_ai.request.model": "tr-plain", "gen_ai.response.model": "plain-7b",
			"gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "3", "gen_ai.gateway.providers.attempted": "plain",
			"gen_ai.gateway.response.models": "plain-7b", "gen_ai.gateway.session.id": "sess-7", "llm_gateway.key.name": "tracer",
			"http.response.status_code": "200",
		}
		for k, v := range want {
			if got := attr(root, k); got != v {
				t.Errorf("request span %s = %q, want %q", k, got, v)
			}
		}
		if root.Name != "chat tr-plain" || len(root.ParentSpanId) == 0 {
			t.Errorf("request span %q, parent %x: want a child of Caddy's server span", root.Name, root.ParentSpanId)
		}
		try := tries[0]
		host, port, _ := net.SplitHostPort(strings.TrimPrefix(up.URL, "http://"))
		if try.Name != "chat plain-7b" || try.Kind != tracepb.Span_SPAN_KIND_CLIENT || attr(try, "server.address") != host ||
			attr(try, "server.port") != port || attr(try, "llm_gateway.verdict.reason") != "ok" || attr(try, "llm_gateway.engine") != "plain" {
			t.Errorf("try span %q %v %v", try.Name, try.Kind, try.Attributes)
		}
		if try.StartTimeUnixNano < root.StartTimeUnixNano || try.EndTimeUnixNano > root.EndTimeUnixNano {
			t.Errorf("the try's span is not within the request's")
		}
		if s := fmt.Sprint(root, tries); strings.Contains(s, "history-key-000002") || strings.Contains(s, "secret prompt") {
			t.Errorf("a span holds the key or the prompt")
		}
		// the history names the trace
		syncHistory(t)
		if p := historyPage(t, "?model=tr-plain"); len(p.Requests) == 0 || p.Requests[0].TraceID != hex.EncodeToString(root.TraceId) {
			t.Errorf("history %+v, trace %x", p.Requests, root.TraceId)
		}
	})

	t.Run("trace_content on keeps the prompt and the answer", func(t *testing.T) {
		up := newRecorder(t, streamWithUsage)
		startTracedGateway(t, fmt.Sprintf(`
		trace_content on
		engine content {
			to %s
			models tr-content-false tr-content-true
		}`, up.URL))
		for _, stream := range []string{"false", "true"} {
			resp, body := post(t, "/v1/chat/completions", `{"model":"tr-content-`+stream+`","stream":`+stream+`,"messages":[{"role":"system","content":"be brief"},{"role":"user","content":[{"type":"text","text":"a traced prompt"}]}]}`)
			if resp.StatusCode != 200 {
				t.Fatalf("%d %s", resp.StatusCode, body)
			}
			root, _ := o.requestSpan(t, "tr-content-"+stream)
			in, out := attr(root, "gen_ai.input.messages"), attr(root, "gen_ai.output.messages")
			if in != `[{"role":"system","parts":[{"type":"text","content":"be brief"}]},{"role":"user","parts":[{"type":"text","content":"a traced prompt"}]}]` {
				t.Errorf("stream %s: input %s", stream, in)
			}
			answer := "ok"
			if stream == "true" {
				answer = "w0w1w2w3"
			}
			if out != `[{"role":"assistant","parts":[{"type":"text","content":"`+answer+`"}]}]` {
				t.Errorf("stream %s: output %s", stream, out)
			}
		}
	})

	t.Run("a slow start switches to the fallback", func(t *testing.T) {
		fb := newRecorder(t, okChat)
		startTracedGateway(t, fmt.Sprintf(`
		engine gpu {
			`+engineCmd("--load-time 3s")+`
			models tr-slow
			fallback cpu
			fallback_after 300ms
			fallback_model cpu-model
		}
		engine cpu {
			to %s
			models tr-cpu
		}`, fb.URL))
		if resp, body := post(t, "/v1/chat/completions", `{"model":"tr-slow"}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		root, tries := o.requestSpan(t, "tr-slow")
		if attr(root, "gen_ai.gateway.providers.attempted") != "gpu,cpu" || attr(root, "llm_gateway.fallback") != "cpu" ||
			attr(root, "gen_ai.response.model") != "cpu-model" {
			t.Fatalf("request span %v", root.Attributes)
		}
		slow, ok := tries[0], tries[1]
		if attr(slow, "llm_gateway.verdict.reason") != "slow" || !slices.Contains(spanEvents(slow), "llm_gateway.slow_start_switch") ||
			!slices.Contains(spanEvents(slow), "llm_gateway.wait") || slow.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("the slow try: %v, events %v, status %v", slow.Attributes, spanEvents(slow), slow.Status)
		}
		if d := time.Duration(slow.EndTimeUnixNano - slow.StartTimeUnixNano); d < 300*time.Millisecond {
			t.Errorf("the slow try lasted %s, less than fallback_after", d)
		}
		if attr(ok, "llm_gateway.engine") != "cpu" || attr(ok, "gen_ai.request.model") != "cpu-model" || ok.StartTimeUnixNano < slow.EndTimeUnixNano {
			t.Errorf("the fallback's try: %v", ok.Attributes)
		}
	})

	t.Run("a failure fails over to the fallback", func(t *testing.T) {
		var cnt counter
		primary := scripted(t, &cnt, func(_ int, w http.ResponseWriter, _ *http.Request) {
			http.Error(w, `{"error":{"message":"overloaded"}}`, http.StatusServiceUnavailable)
		})
		fb := newRecorder(t, okChat)
		startTracedGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models tr-fail
			retries 0
			fallback backup
		}
		engine backup {
			to %s
			models tr-backup
		}`, primary, fb.URL))
		if resp, body := post(t, "/v1/chat/completions", `{"model":"tr-fail"}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		root, tries := o.requestSpan(t, "tr-fail")
		if attr(root, "gen_ai.gateway.providers.attempted") != "primary,backup" {
			t.Fatalf("request span %v", root.Attributes)
		}
		failed := tries[0]
		if attr(failed, "llm_gateway.verdict.reason") != "503" || attr(failed, "http.response.status_code") != "503" ||
			attr(failed, "llm_gateway.verdict.scope") != "model" {
			t.Errorf("the failed try: %v", failed.Attributes)
		}
		if attr(tries[1], "llm_gateway.verdict.reason") != "ok" {
			t.Errorf("the fallback's try: %v", tries[1].Attributes)
		}
	})

	t.Run("a hedge and its loser", func(t *testing.T) {
		silent := newRecorder(t, func(w http.ResponseWriter, r *http.Request) { <-r.Context().Done() })
		fb := newRecorder(t, okChat)
		startTracedGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models tr-hedge
			fallback backup
			hedge_after 100ms
		}
		engine backup {
			to %s
			models tr-hedge-backup
		}`, silent.URL, fb.URL))
		if resp, body := post(t, "/v1/chat/completions", `{"model":"tr-hedge"}`); resp.StatusCode != 200 {
			t.Fatalf("%d %s", resp.StatusCode, body)
		}
		_, tries := o.requestSpan(t, "tr-hedge")
		lost, won := tries[0], tries[1]
		if attr(lost, "llm_gateway.verdict.reason") != "lost" || attr(lost, "llm_gateway.hedge.lost_for.ms") == "" ||
			lost.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("the loser's span: %v %v", lost.Attributes, lost.Status)
		}
		if attr(won, "llm_gateway.verdict.reason") != "ok" || attr(won, "llm_gateway.hedge") != "true" {
			t.Errorf("the hedge's span: %v", won.Attributes)
		}
	})

	t.Run("a cut stream resumed on the fallback", func(t *testing.T) {
		up := newRecorder(t, primaryThatBreaks(false, false))
		startTracedGateway(t, fmt.Sprintf(`
		engine primary {
			to %s
			models tr-resume
			fallback backup
			fallback_model backup-model
			resume on
		}
		engine backup {
			to %s
			models backup
			prefill on
		}`, up.URL, continuing(t, false).URL))
		if text, err := readStream(sdk("").Chat.Completions.NewStreaming(t.Context(), chatParams("tr-resume", "count"))); err != nil || text != cannedText() {
			t.Fatalf("%v %q", err, text)
		}
		root, tries := o.requestSpan(t, "tr-resume")
		cut, resumed := tries[0], tries[1]
		if attr(resumed, "llm_gateway.resume") != "true" || len(resumed.Links) != 1 || !bytes.Equal(resumed.Links[0].SpanId, cut.SpanId) {
			t.Fatalf("the resumed try: %v, links %v", resumed.Attributes, resumed.Links)
		}
		if attr(root, "gen_ai.gateway.response.models") != "tr-resume,backup-model" {
			t.Errorf("response models %q: both engines' content reached the client", attr(root, "gen_ai.gateway.response.models"))
		}
	})

	t.Run("a stream's span ends with its last byte", func(t *testing.T) {
		var mu sync.Mutex
		var lastByte time.Time
		up := newRecorder(t, func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/event-stream")
			for i := range 5 {
				io.WriteString(w, chunk(fmt.Sprint("w", i)))
				w.(http.Flusher).Flush()
				time.Sleep(80 * time.Millisecond) // the engine's pace, not a synchronisation
			}
			// the moment before the last event: the gateway may end the
			// request as soon as it has it, before this handler runs on
			mu.Lock()
			lastByte = time.Now()
			mu.Unlock()
			io.WriteString(w, "data: [DONE]\n\n")
			w.(http.Flusher).Flush()
		})
		startTracedGateway(t, fmt.Sprintf(`
		engine streamer {
			to %s
			models tr-stream
		}`, up.URL))
		if text, err := streamText(t, "tr-stream"); err != nil || text != "w0w1w2w3w4" {
			t.Fatalf("%v %q", err, text)
		}
		root, tries := o.requestSpan(t, "tr-stream")
		mu.Lock()
		last := lastByte
		mu.Unlock()
		end := time.Unix(0, int64(root.EndTimeUnixNano))
		if end.Before(last) || time.Unix(0, int64(tries[0].EndTimeUnixNano)).Before(last) {
			t.Fatalf("the request span ended at %s, the try's at %s, before the engine's last byte at %s",
				end.Format(time.StampMicro), time.Unix(0, int64(tries[0].EndTimeUnixNano)).Format(time.StampMicro), last.Format(time.StampMicro))
		}
		first := root.Events[slices.Index(spanEvents(root), "llm_gateway.first_byte")]
		if end.Sub(time.Unix(0, int64(first.TimeUnixNano))) < 300*time.Millisecond {
			t.Fatalf("the span ended %s after the first byte: it must last the whole stream", end.Sub(time.Unix(0, int64(first.TimeUnixNano))))
		}
	})
}
