#!/usr/bin/env bash
# Benchmark llm_gateway against Caddy's stock reverse_proxy, run the hostile
# mix against the gateway alone (it exits non-zero when one of its limits is
# exceeded), then measure the gateway's cold start. One command from anywhere
# in the checkout:
#
#   bench/run.sh                        # full run, about 9 minutes
#   ROUNDS=1 DURATION=1s bench/run.sh   # quick smoke run
#
# Environment: ROUNDS (5), DURATION (3s per timed run), RATE (500 req/s),
# OPEN_STREAMS (1000), MANY_STREAMS (10000), COLD_STARTS (20), PHASES (all;
# door runs only the hostile phase's keys-with-rules part; transstreams, only
# its translated streams of 10 MB tool-call arguments; translation, only
# when named, about 25 s a round: TTFB, CPU per chunk and RSS per open
# stream of Messages and Responses clients of a chat-only engine against
# native chat and reverse_proxy; failover, only when named, about 4 minutes: per failure
# class of a first candidate, the time to the first content from its
# fallback, with and without hedging, and hedging in a pool: bench/failover),
# SKIP_COLDSTART=1,
# BESIDE=1 (the throughput to syscalls phases again, with the hostile mix
# against another gateway site in the same Caddy: how far each figure moves).
# Everything is built into bench/out/ (gitignored); all traffic stays on
# 127.0.0.1. The Go programs start the fake upstream and Caddy on free ports
# and stop them on exit, failure or Ctrl-C; the trap below is a second net.
set -euo pipefail

cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"

ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-3s}
RATE=${RATE:-500}
OPEN_STREAMS=${OPEN_STREAMS:-1000}
MANY_STREAMS=${MANY_STREAMS:-10000}
COLD_STARTS=${COLD_STARTS:-20}
PHASES=${PHASES:-throughput,latency,stream,cpu,syscalls,memory,manystreams,hostile}

# the syscalls phase counts Caddy's system calls with perf (the kernel's
# tracepoints) or, where perf cannot open them, strace: install strace if
# neither works and this is a Debian-like machine we may install on
if [[ ,$PHASES, == *,syscalls,* ]] && ! command -v strace >/dev/null &&
	! perf stat -x, -e raw_syscalls:sys_enter -- true >/dev/null 2>&1; then
	if [[ $(id -u) == 0 ]] && command -v apt-get >/dev/null; then
		echo "installing strace for the syscalls phase ..." >&2
		apt-get install -y -qq strace >&2 || (apt-get update -qq && apt-get install -y -qq strace) >&2 || true
	fi
fi

# 1000 open streams are 1000 client sockets here, 2000 in Caddy and 1000 in
# the upstream: raise the soft limit toward the hard one (the Go programs
# raise their own to the hard limit; the manystreams phase speaks h2c to
# Caddy when that cannot hold 2 x MANY_STREAMS)
want=8192
hard=$(ulimit -Hn)
if [[ $hard != unlimited && $hard -lt $want ]]; then want=$hard; fi
if [[ $(ulimit -Sn) != unlimited && $(ulimit -Sn) -lt $want ]]; then ulimit -Sn "$want"; fi
if [[ $(ulimit -Sn) != unlimited && $(ulimit -Sn) -lt $((OPEN_STREAMS * 2 + 256)) ]]; then
	echo "run.sh: ulimit -n is $(ulimit -Sn), too low for OPEN_STREAMS=$OPEN_STREAMS" >&2
	exit 1
fi

echo "building into $out/ ..." >&2
go build -o "$out/caddy" ./bench/caddy # cmd/caddy plus bench_floor (bench/floor)
go build -o "$out/fakeupstream" ./bench/fakeupstream
go build -o "$out/load" ./bench/load
go build -o "$out/coldstart" ./bench/coldstart
if [[ ,$PHASES, == *,failover,* ]]; then go build -o "$out/failover" ./bench/failover; fi

child=""
cleanup() {
	if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# run one program in the background and wait for it, so the traps run
# promptly on Ctrl-C (the program also sees the SIGINT and stops its children)
runChild() {
	"$@" &
	child=$!
	local rc=0
	wait "$child" || rc=$?
	child=""
	return "$rc"
}

# failover is a program of its own (bench/failover); the other phases are
# the load program's. PHASES=failover alone runs only it (no cold start).
loadPhases=$(tr , '\n' <<<"$PHASES" | grep -vx failover | paste -sd, - || true)

beside=()
if [[ ${BESIDE:-0} == 1 ]]; then beside=(-beside); fi
if [[ -n $loadPhases ]]; then
	runChild "$out/load" -caddy "$out/caddy" -upstream "$out/fakeupstream" -out "$out" "${beside[@]}" \
		-rounds "$ROUNDS" -duration "$DURATION" -rate "$RATE" -open-streams "$OPEN_STREAMS" -many-streams "$MANY_STREAMS" -phases "$loadPhases"
fi

if [[ ,$PHASES, == *,failover,* ]]; then
	runChild "$out/failover" -caddy "$out/caddy" -out "$out"
fi

if [[ -n $loadPhases && ${SKIP_COLDSTART:-0} != 1 ]]; then
	runChild "$out/coldstart" -caddy "$out/caddy" -out "$out" -n "$COLD_STARTS"
fi
