// Package caddyllmgateway registers the llm_gateway Caddy module, so that
//
//	xcaddy build --with github.com/llmgateway/caddy-llm-gateway
//
// builds a Caddy with it. The code lives in caddymodule, handler, engines
// and caddyfile.
package caddyllmgateway

import (
	_ "github.com/llmgateway/caddy-llm-gateway/caddymodule"
)
