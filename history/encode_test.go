package history

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"math"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/price"
)

// marshalled is what encoding/json writes for r as a stored value.
func marshalled(t testing.TB, r Record) []byte {
	r.Seq = 0
	j, err := json.Marshal(r)
	if err != nil {
		t.Fatal(err)
	}
	return append(binary.BigEndian.AppendUint64(nil, uint64(r.Time)), j...)
}

func sampleRecord() Record {
	return Record{Seq: 77, Time: 1764633600123, Path: "/v1/chat/completions", Key: "team", Client: "10.0.0.7",
		UserAgent: "OpenAI/Python 1.99.0", Session: "s-1", Model: "qwen", Engine: "gpu", Fallback: "cpu",
		Status: 200, Reason: "", TTFBMs: 120.5, DurationMs: 900.25, TokensIn: 30, TokensOut: -1, CacheRead: 20, CacheWrite: 5, Cost: 2_130_000, Stream: true,
		Cut: "stream_idle_timeout", RelayedBytes: 4096,
		Tries: []Try{
			{Engine: "gpu", Model: "qwen", Address: "127.0.0.1:8081", StartMs: 0.001, DurationMs: 12, WaitedMs: 3.5,
				Status: 503, Reason: "status 503", Scope: "engine"},
			{Engine: "cpu", StartMs: 1e-7, DurationMs: 2e21, Reason: "ok", Resume: true, Hedge: true},
			{Engine: "gpu", StartMs: 0.5, DurationMs: 13, Reason: "lost", LostForMs: 0.75},
		},
		TraceID: "4bf92f3577b34da6a3ce929d0e0e4736"}
}

// The hand-written value is encoding/json's, byte for byte: for a full
// record, an empty one, and texts that need every kind of escape.
func TestAppendValueIsEncodingJSON(t *testing.T) {
	texts := []string{"", "plain", `quote " and \ backslash`, "\n\r\t\b\f\x00\x1f\x7f", "<script>&amp;</script>",
		"\u2028\u2029", "bad \xff utf-8 \xc3", "ünïcödé ✓ 😀", "\xed\xa0\x80 surrogate half"}
	recs := []Record{{}, sampleRecord()}
	for _, s := range texts {
		r := sampleRecord()
		r.Path, r.Key, r.UserAgent, r.Model, r.Reason, r.TraceID, r.Cut = s, s, s, s, s, s, s
		r.Tries[0].Engine, r.Tries[0].Reason, r.Tries[1].Scope = s, s, s
		recs = append(recs, r)
	}
	for _, f := range []float64{0, -0.5, 1e-6, 9.99e-7, 1e20, 1e21, 123456789.125, math.SmallestNonzeroFloat64, -1e-300} {
		r := sampleRecord()
		r.TTFBMs, r.Tries[0].WaitedMs, r.Tries[2].LostForMs = f, f, f
		recs = append(recs, r)
	}
	for _, r := range recs {
		if got, want := appendValue(nil, &r), marshalled(t, r); !bytes.Equal(got, want) {
			t.Fatalf("appendValue\n%q\nencoding/json\n%q", got, want)
		}
	}
}

func FuzzAppendValue(f *testing.F) {
	f.Add("/v1/chat/completions", "OpenAI/Python", "gpu", 120.5, int64(30), 200, true)
	f.Add("<\u2028\xff\"\\\n", "", "", 1e-9, int64(-1), 0, false)
	f.Fuzz(func(t *testing.T, path, agent, engine string, ms float64, tokens int64, status int, stream bool) {
		if math.IsNaN(ms) || math.IsInf(ms, 0) {
			return // encoding/json refuses them; a duration is never one
		}
		r := Record{Time: tokens, Path: path, UserAgent: agent, Model: agent, Engine: engine, Status: status,
			TTFBMs: ms, DurationMs: -ms, TokensIn: tokens, CacheRead: tokens / 2, CacheWrite: tokens % 3, Cost: price.Amount(tokens * 7), Stream: stream,
			Cut: engine, RelayedBytes: tokens / 3}
		if status%2 == 0 {
			r.Tries = []Try{{Engine: engine, Address: path, StartMs: ms, WaitedMs: ms, Status: status, Reason: agent, Resume: stream, Hedge: !stream, LostForMs: ms}}
		}
		if got, want := appendValue(nil, &r), marshalled(t, r); !bytes.Equal(got, want) {
			t.Fatalf("appendValue\n%q\nencoding/json\n%q", got, want)
		}
	})
}

// BenchmarkEncode is the writer's cost to encode one record.
func BenchmarkEncode(b *testing.B) {
	r := sampleRecord()
	b.ReportAllocs()
	var buf []byte
	for b.Loop() {
		buf = appendValue(buf[:0], &r)
	}
}

// BenchmarkEncodeJSON is what encoding/json took for the same record.
func BenchmarkEncodeJSON(b *testing.B) {
	r := sampleRecord()
	b.ReportAllocs()
	for b.Loop() {
		marshalled(b, r)
	}
}
