#!/usr/bin/env bash
# Runs the README's build command, `./build.sh`, exactly as printed, from the
# repository root (the same script xcaddy.Dockerfile's builder stage runs),
# and checks that the binary has both of our modules. Needs Go and the Go
# module proxy; takes a few minutes on a cold module cache.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -e caddy ]; then
	echo "xcaddy-check: ./caddy exists; move it away first (./build.sh writes it)" >&2
	exit 1
fi
trap 'rm -f caddy' EXIT

./build.sh

modules=$(./caddy list-modules)
missing=0
for id in http.handlers.llm_gateway admin.api.llm_gateway; do
	if ! grep -qx "$id" <<<"$modules"; then
		echo "xcaddy-check: the binary lacks module $id" >&2
		missing=1
	fi
done
if [ "$missing" != 0 ]; then
	exit 1
fi
echo "xcaddy-check: ./build.sh built $(./caddy version) with both modules"
