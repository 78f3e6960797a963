package idle

import (
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// BenchmarkWatchdogPerStream is what a stream pays the watchdog while
// 10,000 others are open on the real clock: New, 50 events (Touch, and
// Block/Unblock around the write), Stop.
func BenchmarkWatchdogPerStream(b *testing.B) {
	open := make([]*Watchdog, 10_000)
	for i := range open {
		open[i] = New(clock.Real, time.Minute, func() {})
		open[i].Touch()
	}
	defer func() {
		for _, w := range open {
			w.Stop()
		}
	}()
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			w := New(clock.Real, time.Minute, func() {})
			for range 50 {
				w.Touch()
				w.Block()
				w.Unblock()
			}
			w.Stop()
		}
	})
}

// BenchmarkWatchdogTouch is the cost per event.
func BenchmarkWatchdogTouch(b *testing.B) {
	w := New(clock.Real, time.Minute, func() {})
	defer w.Stop()
	b.ReportAllocs()
	for b.Loop() {
		w.Touch()
	}
}
