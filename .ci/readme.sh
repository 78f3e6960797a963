#!/usr/bin/env bash
# Runs the README's quickstart as printed, then every client snippet of its
# "Try it" section against it: the curl command as printed, and the Python,
# JavaScript and Go blocks as extracted from README.md (TestREADMECommands-
# AreRunByCI checks that each shell command the README prints appears here or
# in another CI script, as printed). Needs Go, curl, node and npm (for the
# npm package openai); the Python block runs when the `openai` package is
# importable and is only compiled otherwise (CI reaches no Python index).
# Then, the quickstart stopped, the commands the pages of docs/ print
# (.ci/docs.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
qs=
stop() {
	if [ -n "$qs" ]; then
		kill -TERM -- "-$qs" 2>/dev/null || true
		wait "$qs" 2>/dev/null || true
	fi
	rm -rf "$work" ./_readme-go.*
}
trap stop EXIT

# block LANG: the README's fenced code blocks of that language, one after
# another
block() {
	awk -v lang="$1" '/^```/ { if (inb) { inb = 0; next } if ($0 == "```" lang) { inb = 1; next } } inb' README.md
}

# The quickstart, in a process group of its own (job control) so that
# stopping it stops Caddy and its engine too. The first `go run` compiles for
# minutes on a cold cache.
set -m
{
go run ./cmd/caddy run --config examples/quickstart/Caddyfile
} >"$work/quickstart.log" 2>&1 &
qs=$!
set +m
up=
for _ in $(seq 1 900); do
	if curl -s -o /dev/null http://localhost:8080/v1/models; then
		up=1
		break
	fi
	if ! kill -0 "$qs" 2>/dev/null; then
		break
	fi
	sleep 1
done
if [ -z "$up" ]; then
	echo "readme: the quickstart did not come up" >&2
	cat "$work/quickstart.log" >&2
	exit 1
fi

echo "readme: curl"
out=$(
curl localhost:8080/v1/chat/completions \
  -d '{"model":"demo","messages":[{"role":"user","content":"hello"}],"stream":true}'
)
grep -q 'data: \[DONE\]' <<<"$out" || { echo "readme: curl got $out" >&2; exit 1; }

echo "readme: JavaScript (npm openai)"
mkdir -p "$work/js"
(cd "$work/js" && npm install --silent --no-audit --no-fund openai >/dev/null)
block javascript >"$work/js/hello.mjs"
out=$(cd "$work/js" && node hello.mjs)
grep -q 'Hello from the demo engine' <<<"$out" && grep -q 'an embedding of 8 dimensions' <<<"$out" ||
	{ echo "readme: the JavaScript snippet printed $out" >&2; exit 1; }

echo "readme: Go (openai-go)"
# inside the module, so that its go.mod provides openai-go; `./...` skips
# directories whose names start with _
godir=$(mktemp -d ./_readme-go.XXXXXX)
block go >"$godir/main.go"
out=$(go run "$godir/main.go")
rm -rf "$godir"
grep -q 'Hello from the demo engine' <<<"$out" || { echo "readme: the Go snippet printed $out" >&2; exit 1; }

block python >"$work/hello.py"
if command -v python3 >/dev/null && python3 -c 'import openai' 2>/dev/null; then
	echo "readme: Python (openai)"
	out=$(python3 "$work/hello.py")
	grep -q 'Hello from the demo engine' <<<"$out" || { echo "readme: the Python snippet printed $out" >&2; exit 1; }
elif command -v python3 >/dev/null; then
	echo "readme: Python: no openai package here; compiling the snippet only"
	python3 -m py_compile "$work/hello.py"
else
	echo "readme: Python: no python3 here; snippet not run"
fi

# issue 18: the quickstart listens on localhost and says nothing about
# anyone using its engines
if grep -q 'anyone who can reach' "$work/quickstart.log"; then
	echo "readme: the quickstart warned that it is open:" >&2
	grep 'anyone who can reach' "$work/quickstart.log" >&2
	exit 1
fi
echo "readme: the quickstart and its snippets work as printed"

# the docs pages' commands, as printed, once the quickstart has freed its port
stop
qs=
.ci/docs.sh
