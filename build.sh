#!/usr/bin/env bash
# Builds Caddy with llm_gateway from this checkout, with xcaddy, on any
# machine that has Go (the first build downloads and compiles for several
# minutes). Arguments go to `xcaddy build`; without --output the binary is
# ./caddy. To add other plugins:
#
#   ./build.sh --with github.com/mholt/caddy-ratelimit
#
# Caddy's version is always go.mod's, the one this module is tested with (a
# builder image's CADDY_VERSION is ignored: another version may not build);
# xcaddy's is pinned below.
set -euo pipefail
src=$(cd "$(dirname "$0")" && pwd)
XCADDY_VERSION=v0.4.5
CADDY_VERSION=$(cd "$src" && go list -m -f '{{.Version}}' github.com/caddyserver/caddy/v2)
export CADDY_VERSION

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
GOBIN="$work/bin" go install "github.com/caddyserver/xcaddy/cmd/xcaddy@$XCADDY_VERSION"

# xcaddy runs `go get <module>` even for a module that --with replaces with a
# local directory. Until the module is published, the public proxy answers
# 404, which Go takes as "no versions: use the replacement"; a proxy or
# mirror that answers 403 instead fails the build. A file proxy in front that
# lists no versions of this module answers as the public proxy does. It
# cannot change what is built: the replacement (this checkout) is built
# whatever version go get settles on. Every other module falls through to
# GOPROXY.
self=$(cd "$src" && go list -m)
mkdir -p "$work/proxy/$self/@v"
: >"$work/proxy/$self/@v/list"
# the same for each module another --with replaces with a local directory
# (a provider of one's own, docs/providers.md): unpublished too, as a rule
prev=
for arg in "$@"; do
	if [ "$prev" = --with ] && [[ "$arg" == *=* ]]; then
		mod=${arg%%=*}
		mod=${mod%%@*}
		mkdir -p "$work/proxy/$mod/@v"
		: >"$work/proxy/$mod/@v/list"
	fi
	prev=$arg
done
export GOPROXY="file://$work/proxy,$(go env GOPROXY)"
export GOWORK=off

"$work/bin/xcaddy" build --with "$self=$src" "$@"
