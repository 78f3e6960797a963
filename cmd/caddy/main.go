// Command caddy is Caddy with its standard modules plus llm_gateway, for local
// runs: go run ./cmd/caddy run --config examples/quickstart/Caddyfile
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/standard"

	_ "github.com/llmgateway/caddy-llm-gateway"
)

func main() {
	caddycmd.Main()
}
