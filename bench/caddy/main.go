// Command caddy is the bench's Caddy: cmd/caddy's modules plus bench_floor
// (bench/floor), the handler that only relays, which the memory phase
// measures beside the gateway.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmgateway/caddy-llm-gateway"
	_ "github.com/llmgateway/caddy-llm-gateway/bench/floor"
)

func main() {
	caddycmd.Main()
}
