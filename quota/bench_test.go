package quota

import (
	"path/filepath"
	"strconv"
	"testing"
)

// The hot path as the handler pays it: Admit then Done, on the wall clock,
// with the embedded store flushing in the background. The goal allows a
// key with limits at most 5 µs more than a key without; compare
// no-rules with the others (ns/op).
func BenchmarkAdmitDone(b *testing.B) {
	l, err := Open(Config{Path: filepath.Join(b.TempDir(), "quota.db")})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	// limits that never refuse, so every iteration takes the whole path
	limited := Rules{
		Rate:   []Limit{{1 << 50, Minute}},
		Tokens: []Limit{{1 << 60, Day}, {1 << 60, Month}},
	}
	run := func(name string, r Rules) {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				tk, d := l.Admit("team-a", r, 500)
				if !d.OK {
					b.Fatal(d)
				}
				tk.Done(420)
			}
		})
	}
	run("no-rules", Rules{})
	run("rate+2-budgets", limited)
	run("rate-only", Rules{Rate: limited.Rate})

	b.Run("parallel-one-key", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				tk, _ := l.Admit("team-a", limited, 500)
				tk.Done(420)
			}
		})
	})
	b.Run("parallel-64-keys", func(b *testing.B) {
		b.ReportAllocs()
		keys := make([]string, 64)
		for i := range keys {
			keys[i] = "team-" + strconv.Itoa(i)
		}
		b.RunParallel(func(pb *testing.PB) {
			i := 0
			for pb.Next() {
				tk, _ := l.Admit(keys[i%len(keys)], limited, 500)
				tk.Done(420)
				i++
			}
		})
	})
}

// The price of exact rate limits across gateways: one Redis round trip per
// Admit of a key with a rate limit (token budgets stay local).
func BenchmarkAdmitDoneRedis(b *testing.B) {
	srv := startRedis(b)
	for _, local := range []bool{false, true} {
		name := "exact-rates"
		if local {
			name = "local-rates"
		}
		b.Run(name, func(b *testing.B) {
			l, err := Open(Config{Redis: &RedisConfig{Addr: srv.addr(), Prefix: b.Name(), LocalRates: local}})
			if err != nil {
				b.Fatal(err)
			}
			defer l.Close()
			r := Rules{Rate: []Limit{{1 << 50, Minute}}, Tokens: []Limit{{1 << 60, Day}}}
			b.ReportAllocs()
			for b.Loop() {
				tk, d := l.Admit("team-a", r, 500)
				if !d.OK {
					b.Fatal(d)
				}
				tk.Done(420)
			}
		})
	}
}
