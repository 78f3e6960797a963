//go:build unix

package main

import (
	"context"
	"fmt"
	"path/filepath"
	"syscall"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/bench/internal/harness"
)

// The phases of What a streamed chunk costs in system calls, and
// ten thousand streams held open at once.

// syscallsPhase counts the Caddy process's system calls per streamed chunk
// for both targets, as the cpu phase measures CPU (the same streams, one
// target at a time), with a counter attached (harness.StartSyscalls).
func syscallsPhase(ctx context.Context, e *env, c config, r *report, order func(int) []target, pid int) error {
	tool, err := harness.SyscallTool()
	if err != nil {
		r.note("syscalls phase skipped: %v (bench/run.sh installs strace with apt-get when it can)", err)
		return nil
	}
	rows := []*metric{
		r.add(&metric{name: "syscalls per chunk (" + tool + ")", prec: 2,
			target: "<= stock", pass: func(rp, gw float64) bool { return gw <= rp }}),
		r.add(&metric{name: "  read", prec: 2}),
		r.add(&metric{name: "  write", prec: 2}),
		r.add(&metric{name: "  epoll_pwait", prec: 2}),
		r.add(&metric{name: "  futex", prec: 2}),
		r.add(&metric{name: "  other", prec: 2}),
	}
	n := max(c.cpuStreams/4, 1)
	for round := range c.rounds {
		for _, t := range order(round) {
			res, err := streamSyscalls(ctx, t.url, pid, n, c.cpuConcurrency, e.outDir)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("syscalls per chunk, %s: %v", t.name, err)
			}
			r.failures(t.name, "syscalls", res.failed)
			for i, v := range []float64{res.perChunk, res.read, res.write, res.epoll, res.futex, res.others} {
				m := rows[i]
				if t.name == "reverse_proxy" {
					m.rp = append(m.rp, v)
				} else {
					m.gw = append(m.gw, v)
				}
			}
			progress("syscalls round %d/%d %-13s %5.2f/chunk (read %.2f write %.2f epoll %.2f futex %.2f other %.2f; %d chunks)",
				round+1, c.rounds, t.name, res.perChunk, res.read, res.write, res.epoll, res.futex, res.others, res.chunks)
		}
	}
	return nil
}

// manyConfig is the manystreams phase's.
type manyConfig struct {
	n          int
	chunkDelay time.Duration
	rate       int
	hold       time.Duration
	proto      string // h1, h2c, auto
}

// manyStreamsPhase holds c.many.n slow streams (one chunk a second) through
// each target, in a fresh Caddy per target and round: errors, RSS and
// goroutines per stream, and the CPU it takes to hold them.
//
// Over HTTP/1.1 Caddy holds two connections per stream (the client's and
// the upstream's); when its file limit (Go raises the soft limit to the
// hard one) cannot hold that, the client speaks h2c to Caddy, a few
// connections for all the streams, and Caddy's upstream side is as before.
func manyStreamsPhase(ctx context.Context, e *env, c config, r *report, order func(int) []target) error {
	m := c.many
	h2c := m.proto == "h2c"
	if m.proto == "auto" {
		var lim syscall.Rlimit
		if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
			return err
		}
		h2c = uint64(lim.Max) < uint64(2*m.n+256) // int64 on FreeBSD
		if h2c {
			r.note("manystreams: the file limit (%d) does not hold 2 x %d connections in Caddy: the client speaks h2c to Caddy", lim.Max, m.n)
		}
	}
	proto := "h1"
	if h2c {
		proto = "h2c"
	}
	e.stopCaddy()
	rss := r.add(&metric{name: fmt.Sprintf("RSS per open stream, %d open, %s (KB)", m.n, proto), prec: 1,
		target: fmt.Sprintf("<= %d KB, 0 failed", rssPerStreamGoalKB), pass: func(rp, gw float64) bool { return gw <= rssPerStreamGoalKB }})
	gor := r.add(&metric{name: "  goroutines per open stream", prec: 2})
	stack := r.add(&metric{name: "  Go stacks per open stream (KB)", prec: 1})
	heap := r.add(&metric{name: "  Go heap per open stream (KB)", prec: 1})
	cpu := r.add(&metric{name: fmt.Sprintf("  Caddy CPU holding them, 1 chunk/%v (%%)", m.chunkDelay), prec: 1})
	perChunk := r.add(&metric{name: "  Caddy CPU per chunk held (us)", prec: 2})
	errs := r.add(&metric{name: "  failed streams", prec: 0})
	metrics := []*metric{rss, gor, stack, heap, cpu, perChunk, errs}
	for _, m := range metrics {
		m.floor = []float64{}
	}
	floor := e.floor()
	for round := range c.rounds {
		for _, t := range append(order(round), floor) {
			res, err := manyStreamsInFreshCaddy(ctx, e, t, c, h2c)
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if err != nil {
				return fmt.Errorf("%d open streams, %s: %v", m.n, t.name, err)
			}
			r.failures(t.name, "manystreams", int64(res.failed))
			if res.firstErr != "" {
				r.note("manystreams %s: %d failed, the first: %s", t.name, res.failed, res.firstErr)
			}
			if res.endedEarly > 0 {
				r.note("manystreams %s: %d streams ended before they were measured; raise -many-chunk-delay", t.name, res.endedEarly)
			}
			values := []float64{res.perStreamKB, res.goroutinesPerStream, res.stackPerStreamKB, res.heapPerStreamKB,
				res.cpuPercent, us(res.cpuPerChunk), float64(res.failed)}
			for i, m := range metrics {
				switch t.name {
				case "reverse_proxy":
					m.rp = append(m.rp, values[i])
				case floor.name:
					m.floor = append(m.floor, values[i])
				default:
					m.gw = append(m.gw, values[i])
				}
			}
			progress("manystreams round %d/%d %-13s %6.1f KB/stream, %.2f goroutines/stream, CPU %.1f%% (%.2f us/chunk), %d failed (VmRSS %d KB idle, %d KB with %d open)",
				round+1, c.rounds, t.name, res.perStreamKB, res.goroutinesPerStream, res.cpuPercent, us(res.cpuPerChunk), res.failed, res.baseKB, res.peakKB, m.n)
		}
	}
	return nil
}

func manyStreamsInFreshCaddy(ctx context.Context, e *env, t target, c config, h2c bool) (openResult, error) {
	if err := e.startAdminCaddy(ctx, h2c); err != nil {
		return openResult{}, err
	}
	defer e.stopCaddy()
	m := c.many
	o := openOptions{n: m.n, chunkDelay: m.chunkDelay, rate: m.rate, hold: m.hold, admin: e.url(e.adminPort), h2c: h2c}
	if c.profiles {
		o.profiles = filepath.Join(e.outDir, "manystreams-"+t.name)
	}
	return openStreams(ctx, t.url, e.caddy.PID(), o)
}
