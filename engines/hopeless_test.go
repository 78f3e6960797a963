package engines

import (
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A start waits only where waiting may bring room before max_wait: what
// min_loaded or evict never hold past it refuses the start at once, what
// ends within it (or an engine in use, which max_wait drains) is waited for.
func TestAStartIsRefusedAtOnceOnlyWhenNothingCanFreeRoomBeforeMaxWait(t *testing.T) {
	for _, tc := range []struct {
		name    string
		holder  func(*Config)
		leases  int
		refused bool
	}{
		{name: "min_loaded past max_wait", holder: func(c *Config) { c.MinLoaded = caddy.Duration(time.Minute) }, refused: true},
		{name: "evict never without idle_timeout", holder: func(c *Config) { c.Evict = EvictNever }, refused: true},
		{name: "evict never whose idle_timeout ends past max_wait", holder: func(c *Config) { c.Evict = EvictNever; c.IdleTimeout = caddy.Duration(time.Minute) }, refused: true},
		{name: "evict never in use, idle_timeout past max_wait", leases: 1, holder: func(c *Config) { c.Evict = EvictNever; c.IdleTimeout = caddy.Duration(time.Minute) }, refused: true},

		{name: "min_loaded ending within max_wait", holder: func(c *Config) { c.MinLoaded = caddy.Duration(20 * time.Second) }},
		{name: "evict never whose idle_timeout ends within max_wait", holder: func(c *Config) { c.Evict = EvictNever; c.IdleTimeout = caddy.Duration(20 * time.Second) }},
		{name: "an engine in use", leases: 1, holder: func(*Config) {}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clk := clock.NewFake()
			held := fakeEngine("llama", clk, Ready, tc.holder)
			held.lastUsed, held.leases = clk.Now(), tc.leases
			cold := fakeEngine("mistral", clk, Stopped, nil)
			b := testBox(1, 30*time.Second, held, cold)
			r := b.turnFor(cold, clk.Now())
			if got := r.refused != nil; got != tc.refused || len(r.victims) != 0 || r.granted {
				t.Fatalf("refused %v (%+v), want %v", got, r, tc.refused)
			}
		})
	}
}
