package config

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func TestBalanceOptionsAreValidated(t *testing.T) {
	t.Parallel()
	for _, b := range []Balance{{Policy: "random"}, {CacheThreshold: 1.5}, {RelThreshold: 0.5}, {IndexSize: -1}} {
		cfg := Config{
			Engines: []engines.Config{{Name: "a", To: "http://127.0.0.1:1", Models: []string{"a"}}},
			Pools:   []PoolConfig{{Name: "auto", Members: []string{"a"}, Balance: &b}},
		}
		if err := cfg.Validate(); err == nil {
			t.Fatalf("%+v passed", b)
		}
	}
}

// A value that is set is kept: WithDefaults fills only what is unset.
func TestASetBalanceValueIsNotADefault(t *testing.T) {
	t.Parallel()
	set := Balance{Policy: BalanceRoundRobin, CacheThreshold: 0.5, AbsThreshold: 3, RelThreshold: 2, Block: 64, IndexSize: 10}
	if got := set.WithDefaults(); got != set {
		t.Errorf("%+v became %+v", set, got)
	}
	if got := set.AbsFor(12); got != 3 {
		t.Errorf("a configured absolute threshold yields to the capacity: %d", got)
	}
}
