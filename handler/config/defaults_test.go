package config

import (
	"reflect"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
)

// Every default of the handler and its pools is filled by WithDefaults, in
// one place, and filling a filled config changes nothing.
func TestWithDefaultsFillsEveryDefaultOnce(t *testing.T) {
	c := Config{Pools: []PoolConfig{{Name: "auto", Members: []string{"a", "b", "c"}}}}.WithDefaults()
	checks := []struct {
		what      string
		got, want any
	}{
		{"max_body", c.MaxBody, int64(32 << 20)},
		{"body_timeout", c.BodyTimeout, caddy.Duration(2 * time.Minute)},
		{"max_fallbacks", c.MaxFallbacks, 4},
		{"max_attempts", c.MaxAttempts, 8},
		{"keepalive", c.KeepAlive, caddy.Duration(3 * time.Second)},
		{"wake", *c.Wake, true},
		{"body_fallbacks", *c.BodyFallbacks, true},
		{"passthrough", *c.Passthrough, true},
		{"extra_paths", *c.ExtraPaths, DefaultExtraPaths},
		{"passthrough methods", c.PassthroughMethods, []string{"GET", "HEAD", "POST"}},
		{"a pool's failover attempts", c.Pools[0].FailoverAttempts, 3},
		{"a pool's failover time", c.Pools[0].FailoverTime, caddy.Duration(60 * time.Second)},
		{"a pool's breaker cooldown", c.Pools[0].BreakerCooldown, caddy.Duration(30 * time.Second)},
		{"a pool's balance", c.Pools[0].Balance != nil, true},
	}
	for _, ch := range checks {
		if !reflect.DeepEqual(ch.got, ch.want) {
			t.Errorf("%s: %v, want %v", ch.what, ch.got, ch.want)
		}
	}
	if again := c.WithDefaults(); !reflect.DeepEqual(again, c) {
		t.Fatalf("filling a filled config changed it:\n%+v\n%+v", c, again)
	}
	off := false
	kept := Config{MaxBody: 1, Wake: &off, KeepAlive: caddy.Duration(time.Second)}.WithDefaults()
	if kept.MaxBody != 1 || *kept.Wake || kept.KeepAlive != caddy.Duration(time.Second) {
		t.Fatalf("a value the operator set was replaced: %+v", kept)
	}
}
