#!/usr/bin/env bash
# Builds every package (./cmd/caddy included, so Caddy's standard modules
# too) for each operating system users build us on, and for arm64 as well
# as amd64: the code differs by OS (engines/process_unix.go; elsewhere a
# `cmd` engine is refused at load), never by architecture, so one build per
# OS covers it, and linux/amd64 is built by the tests. A build of several
# packages compiles without linking, so this checks that the code compiles
# everywhere at the cost of compiling alone. -trimpath leaves the clone's
# folder out of the build cache's keys: a clean clone reuses what an
# earlier clone compiled (all eight platforms, each compiled whole in every
# new folder, took 833 of CI's 1568 s).
set -euo pipefail
cd "$(dirname "$0")/.."
for platform in linux/arm64 darwin/arm64 windows/amd64 freebsd/amd64; do
	echo "cross-build: $platform"
	GOOS=${platform%/*} GOARCH=${platform#*/} go build -trimpath ./...
done
