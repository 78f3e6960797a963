#!/usr/bin/env bash
# Builds every package (./cmd/caddy included, so Caddy's standard modules
# too) for each platform Caddy is released for that users build us on. A
# build of several packages compiles without linking, so this checks that
# the code compiles everywhere at the cost of compiling alone; unchanged
# packages come from the build cache. Engine processes are Unix-only code
# (engines/process_unix.go); elsewhere a `cmd` engine is refused at load.
set -euo pipefail
cd "$(dirname "$0")/.."
for os in linux darwin windows freebsd; do
	for arch in amd64 arm64; do
		echo "cross-build: $os/$arch"
		GOOS=$os GOARCH=$arch go build ./...
	done
done
