//go:build unix

package main

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/handler"
)

// The hostile mix writes its caps into its Caddyfile and asserts the
// figures against them: they must be the gateway's defaults, which is what
// it reports on.
func TestHostileMixCapsAreTheGatewayDefaults(t *testing.T) {
	if fallbackCap != handler.DefaultMaxFallbacks || attemptsCap != handler.DefaultMaxAttempts {
		t.Fatalf("bench caps %d and %d, gateway defaults max_fallbacks %d and max_attempts %d",
			fallbackCap, attemptsCap, handler.DefaultMaxFallbacks, handler.DefaultMaxAttempts)
	}
}
