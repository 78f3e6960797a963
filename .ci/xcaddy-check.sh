#!/usr/bin/env bash
# Runs the README's build command, `./build.sh`, exactly as printed, from the
# repository root (the same script xcaddy.Dockerfile's builder stage runs),
# and checks that the binary has both of our modules. Then docs/providers.md's:
# the example provider written outside this module (examples/provider-module)
# built in with xcaddy --with, the providers listed under their namespace, the
# example's Caddyfile valid with that binary, and the example's own test (an
# OpenAI SDK request through Caddy to a fake cloud). Needs Go and the Go
# module proxy; takes a few minutes on a cold module cache (the second build
# reuses the first's).
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
rm -f caddy

echo "xcaddy-check: docs/providers.md, a provider built in with xcaddy --with"
./build.sh --with example.com/llm-gateway-provider-compatible=./examples/provider-module
listed=$(
./caddy list-modules | grep llm_gateway.providers
)
for name in anthropic azure bedrock gemini openai vertex openai_compatible; do
	if ! grep -qx "http.handlers.llm_gateway.providers.$name" <<<"$listed"; then
		echo "xcaddy-check: caddy list-modules does not list the provider $name:" >&2
		echo "$listed" >&2
		exit 1
	fi
done
TOGETHER_API_KEY=unused ./caddy validate --config examples/provider-module/provider.caddyfile --adapter caddyfile
(cd examples/provider-module && GOWORK=off go test -count=1 ./...)
echo "xcaddy-check: the example provider built in, listed with the others, and answered the SDK"
