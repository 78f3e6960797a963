package history

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"testing"
	"time"
)

// BenchmarkAdd is the history's cost on the request path: a record handed
// to the writer (the writer itself runs on another goroutine). The goal is at most
// 2 µs.
func BenchmarkAdd(b *testing.B) {
	s, err := Open(Options{Path: filepath.Join(b.TempDir(), "quota.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	r := Record{Time: time.Now().UnixMilli(), Path: "/v1/chat/completions", Model: "qwen", Engine: "gpu", Key: "team",
		Client: "10.0.0.7", UserAgent: "OpenAI/Python 1.99.0", Session: "s-1", Status: 200, TTFBMs: 120, DurationMs: 900,
		TokensIn: 30, TokensOut: 200, Tries: []Try{{Engine: "gpu", Model: "qwen", Address: "127.0.0.1:8081", Reason: "ok", Status: 200}}}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		s.Add(r)
	}
	b.StopTimer()
	s.Sync()
	b.ReportMetric(float64(s.Dropped())/float64(b.N)*100, "%dropped")
}

// BenchmarkMillionRequests writes 1,000,000 records through the writer
// into a file that keeps the default 100,000, and reports the file's size
// and the heap after: both stay bounded however many requests pass.
// Run it alone: go test ./history -run - -bench MillionRequests -benchtime 1x
func BenchmarkMillionRequests(b *testing.B) {
	const total = 1_000_000
	for b.Loop() {
		path := filepath.Join(b.TempDir(), "quota.db")
		s, err := Open(Options{Path: path})
		if err != nil {
			b.Fatal(err)
		}
		var sizeAt []string
		var maxHeap uint64
		now := time.Now().UnixMilli()
		for i := range total {
			r := Record{Time: now, Path: "/v1/chat/completions", Model: fmt.Sprint("model-", i%7), Engine: "gpu", Key: "team",
				Client: "10.0.0.7", UserAgent: "OpenAI/Python 1.99.0", Session: fmt.Sprint("s-", i%100), Status: 200,
				TTFBMs: 120, DurationMs: 900, TokensIn: 30, TokensOut: 200,
				Tries: []Try{{Engine: "gpu", Model: "qwen", Address: "127.0.0.1:8081", Reason: "ok", Status: 200}}}
			for !s.Add(r) {
				s.Sync() // the bench writes every record: wait for the writer rather than drop
			}
			if (i+1)%250_000 == 0 {
				s.Sync()
				st, _ := os.Stat(path)
				var m runtime.MemStats
				runtime.ReadMemStats(&m)
				maxHeap = max(maxHeap, m.HeapInuse)
				sizeAt = append(sizeAt, fmt.Sprintf("%dk:%.1fMB", (i+1)/1000, float64(st.Size())/1e6))
			}
		}
		s.Sync()
		kept, _ := s.Query(Filter{Limit: 1})
		st, _ := os.Stat(path)
		b.ReportMetric(float64(st.Size())/1e6, "file-MB")
		b.ReportMetric(float64(maxHeap)/1e6, "max-heap-MB")
		b.ReportMetric(float64(s.core.b.(*file).count), "kept")
		b.Logf("file size after %v; newest seq %d", sizeAt, kept[0].Seq)
		s.Close()
	}
}

// BenchmarkWriteSteady is the writer's cost per record in a file that
// already keeps what it may (keep 20,000 here): each batch of 1,000
// records written, and as many of the oldest deleted, in one transaction,
// as a busy gateway's writer does every writeEvery.
func BenchmarkWriteSteady(b *testing.B) {
	const keep, batch = 20_000, 1_000
	fl, err := openFile(filepath.Join(b.TempDir(), "quota.db"))
	if err != nil {
		b.Fatal(err)
	}
	defer fl.f.Close()
	now := time.Now().UnixMilli()
	recs := make([]Record, batch)
	fill := func() {
		for i := range recs {
			recs[i] = Record{Time: now, Path: "/v1/chat/completions", Model: "qwen", Engine: "gpu", Key: "team",
				Client: "10.0.0.7", UserAgent: "OpenAI/Python 1.99.0", Session: "s-1", Status: 200, TTFBMs: 120, DurationMs: 900,
				TokensIn: 30, TokensOut: 200, Tries: []Try{{Engine: "gpu", Model: "qwen", Address: "127.0.0.1:8081", Reason: "ok", Status: 200}}}
		}
	}
	for range 2 * keep / batch {
		fill()
		if err := fl.write(recs, keep, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		b.StopTimer()
		fill()
		b.StartTimer()
		if err := fl.write(recs, keep, 0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*batch), "ns/record")
}
