//go:build unix

package main

import (
	"testing"

	hconfig "github.com/llmgateway/caddy-llm-gateway/handler/config"
)

// The hostile mix writes its caps into its Caddyfile and asserts the
// figures against them: they must be the gateway's defaults, which is what
// it reports on.
func TestHostileMixCapsAreTheGatewayDefaults(t *testing.T) {
	if fallbackCap != hconfig.DefaultMaxFallbacks || attemptsCap != hconfig.DefaultMaxAttempts {
		t.Fatalf("bench caps %d and %d, gateway defaults max_fallbacks %d and max_attempts %d",
			fallbackCap, attemptsCap, hconfig.DefaultMaxFallbacks, hconfig.DefaultMaxAttempts)
	}
}
