#!/usr/bin/env bash
# Play issue 29's request trace (three engines that load for 2 s, one at a
# time, "A B A A C A B C" x 8, one request every 250 ms) against this gateway
# with an exclusive group, against the gateway's scheduler (memory budgets;
# "not available" until it is in the build) and against llama-swap when
# LLAMA_SWAP names its binary; then the priorities scenario; then warm swaps
# (issue 26: the gw-sleep target plays the trace with `swap sleep`, and the
# warm phase measures a swap between two sleep-capable engines against their
# cold start, and a conversation resumed after a swap with `slots save`).
# One command from anywhere in the checkout:
#
#   bench/swap.sh                                  # about 2 minutes without llama-swap
#   LLAMA_SWAP=/path/to/llama-swap bench/swap.sh   # with llama-swap
#   LONG=1 bench/swap.sh                           # the trace x 50 (400 requests; long)
#   TARGETS=gw-memory,gw-sleep PHASES=trace,warm bench/swap.sh   # swap stop vs swap sleep
#
# Environment: LLAMA_SWAP (unset: that target is skipped), LLAMA_SWAP_LIMIT
# (its concurrencyLimit per model; default its own, 10), LONG=1, TARGETS
# (gw-group,gw-memory,gw-sleep,llama-swap), PHASES (trace,priority,warm),
# WAKE_TIME and SLEEP_TIME (the demo engine's scripted sleep mode; 100ms, 50ms).
# Everything is built into bench/out/ (gitignored); each target's config,
# logs and starts.log are in bench/out/swap-<target>/. All traffic stays on
# 127.0.0.1; the program stops every process it started, engines included.
set -euo pipefail

cd "$(dirname "$0")/.."
out=bench/out
mkdir -p "$out"

repeat=8
if [[ ${LONG:-0} == 1 ]]; then repeat=50; fi
TARGETS=${TARGETS:-gw-group,gw-memory,gw-sleep,llama-swap}
PHASES=${PHASES:-trace,priority,warm}
llama_swap=${LLAMA_SWAP:-}
if [[ -n $llama_swap && ! -x $llama_swap ]]; then
	echo "swap.sh: LLAMA_SWAP=$llama_swap is not an executable" >&2
	exit 2
fi

echo "building into $out/ ..." >&2
go build -o "$out/caddy" ./cmd/caddy
go build -o "$out/swap" ./bench/swap

child=""
cleanup() {
	if [[ -n $child ]] && kill -0 "$child" 2>/dev/null; then
		kill -TERM "$child" 2>/dev/null || true
		wait "$child" 2>/dev/null || true
	fi
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT TERM

# in the background, so the traps run promptly on Ctrl-C (the program also
# sees the SIGINT and stops what it started)
"$out/swap" -caddy "$out/caddy" -llama-swap "$llama_swap" -out "$out" \
	-llama-swap-limit "${LLAMA_SWAP_LIMIT:-0}" -repeat "$repeat" -targets "$TARGETS" -phases "$PHASES" \
	-wake-time "${WAKE_TIME:-100ms}" -sleep-time "${SLEEP_TIME:-50ms}" &
child=$!
rc=0
wait "$child" || rc=$?
child=""
exit "$rc"
