#!/usr/bin/env bash
# Builds Caddy with this checkout exactly as xcaddy.Dockerfile's builder stage
# does (the same `xcaddy build` command), without Docker, and checks that the
# binary has both of our modules. Needs Go and the Go module proxy; takes a
# few minutes on a cold module cache.
#
#   .ci/xcaddy-check.sh [<caddy-version>]
#
# The Caddy version defaults to go.mod's (the builder image sets CADDY_VERSION
# to its own); xcaddy itself is pinned below.
set -euo pipefail
cd "$(dirname "$0")/.."
src=$(pwd)
XCADDY_VERSION=v0.4.5
export CADDY_VERSION=${1:-$(go list -m -f '{{.Version}}' github.com/caddyserver/caddy/v2)}

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

GOBIN="$work/bin" go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION"

# xcaddy runs `go get <module>` even for a module that --with replaces with a
# local directory. For an unpublished module the public proxy answers 404,
# which Go takes as "no versions: use the replacement"; a proxy or mirror that
# answers 403 instead fails the build. A file proxy in front that lists no
# versions of this module answers as the public proxy does. It cannot change
# what is built: the replacement (this checkout) is built whatever version
# go get settles on. Every other module falls through to GOPROXY.
self=$(go list -m)
mkdir -p "$work/proxy/$self/@v"
: >"$work/proxy/$self/@v/list"
export GOPROXY="file://$work/proxy,$(go env GOPROXY)"

# xcaddy.Dockerfile: xcaddy build --output /usr/bin/caddy --with <module>=/src/caddy-llm-gateway
(cd "$work" && "$work/bin/xcaddy" build \
	--output "$work/caddy" \
	--with "$self=$src")

modules=$("$work/caddy" list-modules)
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
echo "xcaddy-check: Caddy $CADDY_VERSION with xcaddy $XCADDY_VERSION: $("$work/caddy" version); modules present"
