//go:build unix

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"time"
)

// The translation phase: what a Messages or a Responses client pays to reach
// a Chat Completions engine through translation, against the same question
// asked natively, and against stock reverse_proxy, on the same upstream.

// The same question in each client API. Every body names a token limit and
// the Chat ones ask for usage, as the translated requests do (toward Chat
// the gateway always asks for usage): the upstream then sends the same 50
// chunks and a usage chunk to each, so only the way there and back differs.
var (
	transChatBody = []byte(`{"model":"bench","max_tokens":64,"messages":[{"role":"user","content":"hi"}],` +
		`"stream":true,"stream_options":{"include_usage":true}}`)
	transMessagesBody  = []byte(`{"model":"bench-chat","max_tokens":64,"messages":[{"role":"user","content":"hi"}],"stream":true}`)
	transResponsesBody = []byte(`{"model":"bench-chat","input":"hi","max_output_tokens":64,"stream":true}`)
)

// transChunks is what CPU is divided by, per whole stream: the upstream's
// 50 chat chunks, the same for every target (the client's event counts
// differ by API: 51 Chat chunks with the usage, 52 Messages events before
// message_stop, 55 Responses events before response.completed).
const transChunks = 50

var (
	transChat     = streamAsk{path: chatPath, body: transChatBody, keep: tailKept, last: chatStream.last, whole: chatStream.whole}
	transMessages = streamAsk{path: "/v1/messages", body: transMessagesBody, keep: tailKept, last: "message_stop",
		header: map[string]string{"anthropic-version": "2023-06-01"},
		whole:  func(tail []byte) bool { return bytes.HasPrefix(finalEvent(tail), []byte("event: message_stop\n")) }}
	// response.completed carries the whole answer (about 1 KB here): the
	// tail keeps 4 KiB of it
	transResponses = streamAsk{path: "/v1/responses", body: transResponsesBody, keep: 4 << 10, slack: 12 << 10,
		last: "response.completed",
		whole: func(tail []byte) bool {
			return bytes.HasPrefix(finalEvent(tail), []byte("event: response.completed\n"))
		}}
)

// finalEvent is the last whole event in tail, nil when tail does not hold
// all of it (or does not end with one).
func finalEvent(tail []byte) []byte {
	if !bytes.HasSuffix(tail, []byte("\n\n")) {
		return nil
	}
	t := bytes.TrimRight(tail, "\n")
	i := bytes.LastIndex(t, []byte("\n\n"))
	if i < 0 {
		return nil
	}
	return t[i+2:]
}

// transTarget is one of the phase's four: a site and the stream sent to it.
type transTarget struct {
	target
	ask streamAsk
}

// transMetric is one row of the translation table: per target (in the
// order of transTargets), a value per round.
type transMetric struct {
	name string
	prec int
	vals [][]float64
}

// translationPhase measures, in rounds whose order rotates, the stream TTFB
// (p50, p99), time to the stream's end and Caddy's CPU per chunk of: the
// question asked natively through reverse_proxy and llm_gateway (model
// bench, engine up), and asked by a Messages and a Responses client of
// engine upchat (model bench-chat, api chat: translated both ways). TTFB
// takes turns stream by stream, as the stream phase's does; CPU is
// measured one target at a time (one Caddy) in slices A B C D D C B A.
// Then, in rounds of their own, RSS per open stream: each target holds
// c.transOpenStreams slow streams in a fresh Caddy (transMemory).
func translationPhase(ctx context.Context, e *env, c config, r *report, pid int) error {
	rp := target{"reverse_proxy", e.url(e.rpPort)}
	gw := e.url(e.gwPort)
	ts := []transTarget{
		{rp, transChat},
		{target{"native chat", gw}, transChat},
		{target{"Messages->Chat", gw}, transMessages},
		{target{"Responses->Chat", gw}, transResponses},
	}
	if err := transSanity(ctx, ts); err != nil {
		return err
	}
	mk := func(name string, prec int) *transMetric {
		m := &transMetric{name: name, prec: prec, vals: make([][]float64, len(ts))}
		r.translation = append(r.translation, m)
		return m
	}
	ttfb, ttfb99 := mk("stream TTFB p50 (us)", 0), mk("stream TTFB p99 (us)", 0)
	total, cpu := mk("stream to its end p50 (us)", 0), mk("Caddy CPU per chunk (us)", 2)
	perStream := mk("Caddy CPU per stream (us)", 0) // the same CPU, per whole stream
	// c.transOpenStreams streams open at once: the table's header says
	rss := mk("RSS per open stream (KB)", 1)
	heap, gor := mk("  Go heap per stream (KB)", 1), mk("  goroutines per stream", 2)
	r.transNames = nil
	for _, t := range ts {
		r.transNames = append(r.transNames, t.name)
	}
	for round := range c.rounds {
		// the round's order: the four rotated by one each round, so no
		// target always follows the same one
		idx := make([]int, len(ts))
		for i := range idx {
			idx[i] = (round + i) % len(ts)
		}
		urls, asks, order := make([]string, len(ts)), make([]streamAsk, len(ts)), make([]target, len(ts))
		for i, j := range idx {
			urls[i], asks[i], order[i] = ts[j].url, ts[j].ask, ts[j].target
		}
		res := streamLatencyAs(ctx, urls, asks, c.ttfbStreams)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		for i, j := range idx {
			s := res[i]
			r.failures(ts[j].name, "translation TTFB", int64(s.failed))
			ttfb.vals[j] = append(ttfb.vals[j], us(s.ttfb))
			ttfb99.vals[j] = append(ttfb99.vals[j], us(s.ttfb99))
			total.vals[j] = append(total.vals[j], us(s.total))
			progress("translation round %d/%d %-16s TTFB %6.0f us (p99 %6.0f us)  total %6.0f us",
				round+1, c.rounds, ts[j].name, us(s.ttfb), us(s.ttfb99), us(s.total))
		}
		cres, err := cpuRoundAs(ctx, order, asks, pid, c.cpuStreams, c.cpuConcurrency)
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("translation, cpu per chunk: %v", err)
		}
		for i, j := range idx {
			res := cres[i]
			r.failures(ts[j].name, "translation cpu", res.failed)
			if res.whole == 0 {
				return fmt.Errorf("translation, cpu per chunk, %s: no stream ended whole", ts[j].name)
			}
			per := res.cpu / time.Duration(res.whole*transChunks)
			cpu.vals[j] = append(cpu.vals[j], us(per))
			perStream.vals[j] = append(perStream.vals[j], us(res.cpu/time.Duration(res.whole)))
			progress("translation cpu round %d/%d %-16s %5.2f us/chunk (%v CPU over %d streams, %d client events)",
				round+1, c.rounds, ts[j].name, us(per), res.cpu, res.whole, res.chunks)
		}
	}
	// the memory rounds last: each target in a Caddy of its own, and the
	// benchmark's Caddy stopped (the phases after this one start their own,
	// as after the memory phase)
	e.stopCaddy()
	for round := range c.rounds {
		for i := range ts {
			j := (round + i) % len(ts)
			res, err := transMemory(ctx, e, c, ts[j])
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("translation, open streams, %s: %v", ts[j].name, err)
			}
			r.failures(ts[j].name, "translation memory", int64(res.failed))
			if res.firstErr != "" {
				r.note("translation memory %s: %d failed, the first: %s", ts[j].name, res.failed, res.firstErr)
			}
			if res.endedEarly > 0 {
				r.note("translation memory %s: %d streams ended before memory was sampled; raise -open-chunk-delay", ts[j].name, res.endedEarly)
			}
			rss.vals[j] = append(rss.vals[j], res.perStreamKB)
			heap.vals[j] = append(heap.vals[j], res.heapPerStreamKB)
			gor.vals[j] = append(gor.vals[j], res.goroutinesPerStream)
			progress("translation memory round %d/%d %-16s %6.1f KB/stream, Go heap %.1f KB/stream, %.2f goroutines/stream (VmRSS %d KB idle, %d KB with %d open)",
				round+1, c.rounds, ts[j].name, res.perStreamKB, res.heapPerStreamKB, res.goroutinesPerStream, res.baseKB, res.peakKB, c.transOpenStreams)
		}
	}
	return nil
}

// transMemory holds c.transOpenStreams streams of t (the upstream pausing
// -open-chunk-delay between chunks) in a fresh Caddy with its admin
// endpoint on, as the memory phase holds its Chat streams: Go keeps freed
// memory for reuse, so a process that held another target's streams before
// would show this one's cost too low.
func transMemory(ctx context.Context, e *env, c config, t transTarget) (openResult, error) {
	if err := e.startAdminCaddy(ctx, false); err != nil {
		return openResult{}, err
	}
	defer e.stopCaddy()
	o := openOptions{n: c.transOpenStreams, chunkDelay: c.openChunkDelay, admin: e.url(e.adminPort), ask: t.ask}
	if c.profiles {
		// "Messages->Chat" -> translation-Messages-to-Chat-heap.pprof
		name := strings.NewReplacer("->", "-to-", " ", "-").Replace(t.name)
		o.profiles = filepath.Join(e.outDir, "translation-"+name)
	}
	return openStreams(ctx, t.url, e.caddy.PID(), o)
}

// transSanity makes sure each target answers a whole stream before
// anything is timed: a translated stream cut or refused would be timed as
// a fast one.
func transSanity(ctx context.Context, ts []transTarget) error {
	for _, t := range ts {
		client, tr := newClient(1)
		res := streamOnceAs(ctx, client, t.url, t.ask, 0, nil)
		tr.CloseIdleConnections()
		if res.err != nil {
			return fmt.Errorf("translation, %s: stream: %v", t.name, res.err)
		}
		if res.chunks < transChunks {
			return fmt.Errorf("translation, %s: stream delivered %d events, want at least %d", t.name, res.chunks, transChunks)
		}
	}
	return nil
}

// transRatios are the ratios the table prints: a over b, by index in the
// phase's targets (0 reverse_proxy, 1 native chat, 2 Messages, 3 Responses).
var transRatios = []struct {
	name string
	a, b int
}{
	{"Messages/native", 2, 1},
	{"Responses/native", 3, 1},
	{"Messages/rp", 2, 0},
	{"Responses/rp", 3, 0},
	{"native/rp", 1, 0},
}

// printTranslation prints the phase's medians, then their ratios, each with
// the spread of the per-round ratios (round i of one target against round i
// of the other).
func (r *report) printTranslation(w io.Writer) {
	if len(r.translation) == 0 || len(r.translation[0].vals[0]) == 0 {
		return
	}
	c := r.cfg
	fmt.Fprintf(w, "\nthrough translation: Messages and Responses clients of a Chat-only engine (api chat) against\n")
	fmt.Fprintf(w, "the same question in Chat, through llm_gateway and stock reverse_proxy: same Caddy, same upstream, 127.0.0.1\n")
	fmt.Fprintf(w, "medians of %d rounds (order rotating); TTFB %d sequential streams/round per target, the four in turn;\n", c.rounds, c.ttfbStreams)
	fmt.Fprintf(w, "CPU %d streams/round per target at %d concurrent, slices A B C D D C B A, per upstream chunk (50 per stream)\n", c.cpuStreams, c.cpuConcurrency)
	fmt.Fprintf(w, "RSS %d streams held open at once per target, each in a fresh Caddy, the upstream pausing %v between chunks:\n", c.transOpenStreams, c.openChunkDelay)
	fmt.Fprintf(w, "VmRSS (and Go's heap, goroutines) once every stream delivered its first event, over idle, per stream\n")
	fmt.Fprintf(w, "ratios are a/b of the medians, so > 1.00 means a costs more (takes longer, burns more CPU, holds more memory) than b\n\n")
	row := "%-28s" + strings.Repeat(" %16s", len(r.transNames)) + "\n"
	names := make([]any, 0, len(r.transNames)+1)
	names = append(names, "metric")
	for _, n := range r.transNames {
		names = append(names, n)
	}
	fmt.Fprintf(w, row, names...)
	fmt.Fprintln(w, strings.Repeat("-", 28+17*len(r.transNames)))
	for _, m := range r.translation {
		cells := []any{m.name}
		for _, v := range m.vals {
			cells = append(cells, num(median(v), m.prec))
		}
		fmt.Fprintf(w, row, cells...)
	}
	fmt.Fprintln(w)
	row = "%-28s" + strings.Repeat(" %18s", len(transRatios)) + "\n"
	names = []any{"ratio (rounds)"}
	for _, q := range transRatios {
		names = append(names, q.name)
	}
	fmt.Fprintf(w, row, names...)
	fmt.Fprintln(w, strings.Repeat("-", 28+19*len(transRatios)))
	for _, m := range r.translation {
		cells := []any{m.name}
		for _, q := range transRatios {
			cells = append(cells, transRatio(m.vals[q.a], m.vals[q.b]))
		}
		fmt.Fprintf(w, row, cells...)
	}
}

// transRatio is median(a)/median(b), with the lowest and highest per-round
// a/b when there is more than one round.
func transRatio(a, b []float64) string {
	ma, mb := median(a), median(b)
	if ma <= 0 || mb <= 0 {
		return "-"
	}
	s := fmt.Sprintf("%.2fx", ma/mb)
	lo, hi := 0.0, 0.0
	for i := range min(len(a), len(b)) {
		if a[i] <= 0 || b[i] <= 0 {
			return s
		}
		q := a[i] / b[i]
		if i == 0 || q < lo {
			lo = q
		}
		if i == 0 || q > hi {
			hi = q
		}
	}
	if min(len(a), len(b)) > 1 {
		s += fmt.Sprintf(" (%.2f-%.2f)", lo, hi)
	}
	return s
}
