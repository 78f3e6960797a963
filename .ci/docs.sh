#!/usr/bin/env bash
# Runs the shell commands the pages of docs/ print, as printed
# (TestEveryPrintedCommandIsRunByCI fails when a page prints a command that
# no CI script runs as printed). .ci/readme.sh runs this once its quickstart
# has stopped, so port 8080 is free. Each command stands on a line of its
# own, unindented, as the page prints it:
# - docs/building.md: `./build.sh` is .ci/xcaddy-check.sh's; the Docker image
#   is built and run where a Docker daemon answers, else skipped with a line
#   that says so (CI has no Docker);
# - docs/development.md: the fuzz example, for its minute;
# - docs/performance.md: the plain path's benchmarks, and the bench's cpu
#   phase alone (about 2 minutes);
# - docs/clients.md: Claude Code and Codex CLI from npm, with
#   LLMGW_AGENT_TESTS=1 only (.ci/run sets it once it has fetched them);
# - docs/real-engines.md: building ollama from the Go module proxy (about 45
#   minutes cold) and the real-ollama tests, with LLMGW_DOCS_OLLAMA=1 only.
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
bg=
stop() {
	if [ -n "$bg" ]; then
		kill -TERM -- "-$bg" 2>/dev/null || true
		wait "$bg" 2>/dev/null || true
	fi
	rm -rf "$work"
}
trap stop EXIT

echo "docs: development.md, the fuzz example"
go test ./internal/jsonmember -run XXX -fuzz FuzzScanBody -fuzztime 1m

echo "docs: performance.md, the plain path's benchmarks and the bench's cpu phase"
go test ./handler -run XXX -bench 'BenchmarkGateway(JSON|Stream|JSONHedgeOn|JSONHedged)$' -benchmem
PHASES=cpu SKIP_COLDSTART=1 ROUNDS=5 bench/run.sh

if docker info >/dev/null 2>&1; then
	echo "docs: building.md, the Docker image"
docker build -f xcaddy.Dockerfile -t caddy-llm-gateway .
	set -m
	{
docker run --rm -p 127.0.0.1:8080:8080 caddy-llm-gateway
	} >"$work/docker.log" 2>&1 &
	bg=$!
	set +m
	up=
	for _ in $(seq 1 120); do
		if curl -s -o /dev/null http://localhost:8080/v1/models; then
			up=1
			break
		fi
		kill -0 "$bg" 2>/dev/null || break
		sleep 1
	done
	if [ -z "$up" ]; then
		echo "docs: the Docker image did not serve on 127.0.0.1:8080" >&2
		cat "$work/docker.log" >&2
		exit 1
	fi
	out=$(curl -s localhost:8080/v1/chat/completions -d '{"model":"demo","messages":[{"role":"user","content":"hello"}]}')
	grep -q 'Hello from the demo engine' <<<"$out" || { echo "docs: the Docker image answered $out" >&2; exit 1; }
	stop
	bg=
else
	echo "docs: building.md, the Docker image: no Docker daemon here; not run"
fi

echo "docs: translation.md, the example's clients through translation"
go build -o "$work/caddy" ./cmd/caddy
set -m
{
	"$work/caddy" run --config examples/translation/Caddyfile
} >"$work/translation.log" 2>&1 &
bg=$!
set +m
for _ in $(seq 1 120); do
	curl -s -o /dev/null http://localhost:8080/v1/models && break
	kill -0 "$bg" 2>/dev/null || { cat "$work/translation.log" >&2; exit 1; }
	sleep 1
done
out=$(
curl -s localhost:8080/v1/messages -H 'anthropic-version: 2023-06-01' -d '{"model":"demo","max_tokens":64,"messages":[{"role":"user","content":"hi"}]}'
)
grep -q '"type":"message"' <<<"$out" || { echo "docs: translation.md's Messages request got $out" >&2; exit 1; }
out=$(
curl -s localhost:8080/v1/responses -d '{"model":"demo","input":"hi"}'
)
grep -q '"object":"response"' <<<"$out" || { echo "docs: translation.md's Responses request got $out" >&2; exit 1; }
out=$(
curl -sN localhost:8080/v1/messages -H 'anthropic-version: 2023-06-01' -d '{"model":"demo","max_tokens":64,"stream":true,"messages":[{"role":"user","content":"hi"}]}'
)
grep -q 'event: message_stop' <<<"$out" || { echo "docs: translation.md's Messages stream got $out" >&2; exit 1; }
stop
bg=
work=$(mktemp -d)

echo "docs: keys.md, keys issued at run time (examples/keys)"
go build -o "$work/caddy" ./cmd/caddy
set -m
{
	TEAM_A_KEY=team-a-key-change-me-0001 APP_KEY=app-key-change-me-00001 OPS_KEY=ops-key-change-me-00001 \
		XDG_DATA_HOME="$work/data" "$work/caddy" run --config examples/keys/Caddyfile
} >"$work/keys.log" 2>&1 &
bg=$!
set +m
for _ in $(seq 1 120); do
	curl -s -o /dev/null http://localhost:2019/llm_gateway/keys && break
	kill -0 "$bg" 2>/dev/null || { cat "$work/keys.log" >&2; exit 1; }
	sleep 1
done
TOKEN=$(curl -s localhost:2019/llm_gateway/keys -d '{"name":"alice","models":["qwen"],"tokens":["200k/d"],"expires_in":"30d","note":"Alice, laptop"}' | jq -r .token)
case "$TOKEN" in sk-llmgw-*) ;; *) echo "docs: keys.md's issue answered no token" >&2; exit 1 ;; esac
out=$(
curl -s localhost:8080/v1/chat/completions -H "Authorization: Bearer $TOKEN" -d '{"model":"qwen","messages":[{"role":"user","content":"hi"}]}'
)
grep -q '"object":"chat.completion"' <<<"$out" || { echo "docs: keys.md's issued key got $out" >&2; exit 1; }
out=$(
curl -s localhost:2019/llm_gateway/keys/alice
)
grep -q '"note": "Alice, laptop"' <<<"$out" && ! grep -q "$TOKEN" <<<"$out" || { echo "docs: keys.md's key listed as $out" >&2; exit 1; }
out=$(
curl -s -X PATCH localhost:2019/llm_gateway/keys/alice -d '{"rate":["30/m"],"note":"Alice, laptop and CI"}'
)
grep -q '"30/m"' <<<"$out" || { echo "docs: keys.md's update answered $out" >&2; exit 1; }
OLD=$TOKEN
TOKEN=$(curl -s localhost:2019/llm_gateway/keys/alice/rotate -d '{"overlap":"1h"}' | jq -r .token)
for t in "$OLD" "$TOKEN"; do
	st=$(curl -s -o /dev/null -w '%{http_code}' localhost:8080/v1/models -H "Authorization: Bearer $t")
	[ "$st" = 200 ] || { echo "docs: keys.md's rotation: a token within the overlap got $st" >&2; exit 1; }
done
out=$(
curl -s -X DELETE localhost:2019/llm_gateway/keys/alice
)
grep -q '"revoked": "alice"' <<<"$out" || { echo "docs: keys.md's revoke answered $out" >&2; exit 1; }
st=$(curl -s -o /dev/null -w '%{http_code}' localhost:8080/v1/models -H "Authorization: Bearer $TOKEN")
[ "$st" = 401 ] || { echo "docs: keys.md's revoked key got $st" >&2; exit 1; }
stop
bg=
work=$(mktemp -d)

if [ "${LLMGW_AGENT_TESTS:-}" = 1 ]; then
	echo "docs: clients.md, Claude Code and Codex CLI (examples/clients)"
	go build -o "$work/caddy" ./cmd/caddy
	set -m
	{
		GATEWAY_KEYS=change-me-to-a-long-secret XDG_DATA_HOME="$work/data" "$work/caddy" run --config examples/clients/Caddyfile
	} >"$work/clients.log" 2>&1 &
	bg=$!
	set +m
	for _ in $(seq 1 120); do
		curl -s -o /dev/null http://localhost:8080/v1/models && break
		kill -0 "$bg" 2>/dev/null || { cat "$work/clients.log" >&2; exit 1; }
		sleep 1
	done
	# the agents write their settings and sessions in a home of their own,
	# and fetch from npm's cache of the user running CI
	export npm_config_cache="${npm_config_cache:-$HOME/.npm}"
	mkdir -p "$work/home" "$work/codex"
	# the page's config.toml, as printed
	awk '/^```toml$/ { f = 1; next } /^```$/ { f = 0 } f' docs/clients.md >"$work/codex/config.toml"
	grep -q 'wire_api = "responses"' "$work/codex/config.toml" || { echo "docs: clients.md has no config.toml" >&2; exit 1; }
	out=$(
		cd "$work"
		export HOME="$work/home"
export ANTHROPIC_BASE_URL=http://localhost:8080
export ANTHROPIC_AUTH_TOKEN=change-me-to-a-long-secret
export ANTHROPIC_MODEL=coder ANTHROPIC_DEFAULT_HAIKU_MODEL=coder
export CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1
npx -y @anthropic-ai/claude-code -p "Say hello"
	)
	grep -q 'Hello from the demo engine (model coder)' <<<"$out" || { echo "docs: clients.md's Claude Code said $out" >&2; exit 1; }
	out=$(
		cd "$work"
		export HOME="$work/home" CODEX_HOME="$work/codex"
export LLMGW_KEY=change-me-to-a-long-secret
npx -y @openai/codex exec --skip-git-repo-check "Say hello" </dev/null
	)
	grep -q 'Hello from the demo engine (model coder)' <<<"$out" || { echo "docs: clients.md's Codex said $out" >&2; exit 1; }
	st=0
	out=$(
		cd "$work"
		export HOME="$work/home" CODEX_HOME="$work/codex" LLMGW_KEY=change-me-to-a-long-secret
		exec 2>&1
npx -y @openai/codex exec --skip-git-repo-check -m coder-short "Say hello" </dev/null
	) || st=$?
	[ "$st" = 1 ] && grep -q 'Incomplete response returned, reason: max_output_tokens' <<<"$out" ||
		{ echo "docs: clients.md's Codex on coder-short exited $st: $out" >&2; exit 1; }
	stop
	bg=
	work=$(mktemp -d)
else
	echo "docs: clients.md, Claude Code and Codex CLI from npm: set LLMGW_AGENT_TESTS=1 to run them"
fi

if [ "${LLMGW_DOCS_OLLAMA:-}" = 1 ]; then
	echo "docs: real-engines.md, building ollama and the real-ollama tests"
apt-get install -y nlohmann-json3-dev libstb-dev
go mod download github.com/gen2brain/malgo@v0.11.24
mkdir -p /opt/ollama/include/miniaudio
cp "$(go env GOMODCACHE)/github.com/gen2brain/malgo@v0.11.24/miniaudio.h" /opt/ollama/include/miniaudio/
CGO_CPPFLAGS=-I/opt/ollama/include GOBIN=/opt/ollama/bin go install github.com/ollama/ollama@v0.17.4
LLMGW_OLLAMA=/opt/ollama/bin/ollama go test -race -count=1 -run RealOllama -v ./caddymodule
else
	echo "docs: real-engines.md, building ollama (45 minutes cold): set LLMGW_DOCS_OLLAMA=1 to run it"
fi
echo "docs: the pages' commands work as printed"
