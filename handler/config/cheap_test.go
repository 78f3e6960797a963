package config

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// A pool prefers cheap or nothing; a key's cheap_at is a share, 1 % to
// 100 %, of a money budget of its own.
func TestPreferAndCheapAtAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	ten, err := quota.ParseSpend("10/d")
	if err != nil {
		t.Fatal(err)
	}
	base := Config{Engines: []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}}
	for _, tc := range []struct {
		name string
		pool PoolConfig
		key  Key
		want string
	}{
		{"prefer cheap", PoolConfig{Name: "p", Members: []string{"e"}, Prefer: PreferCheap}, Key{}, ""},
		{"prefer fast", PoolConfig{Name: "p", Members: []string{"e"}, Prefer: "fast"}, Key{}, `pool p: prefer takes cheap, not "fast"`},
		{"cheap_at 80%", PoolConfig{}, Key{Name: "k", Value: teamKey, Spend: []quota.SpendLimit{ten}, CheapAt: 80}, ""},
		{"cheap_at -1%", PoolConfig{}, Key{Name: "k", Value: teamKey, Spend: []quota.SpendLimit{ten}, CheapAt: -1}, "key k: cheap_at is a share of its money budget from 1% to 100%, not -1%"},
		{"cheap_at alone", PoolConfig{}, Key{Name: "k", Value: teamKey, CheapAt: 80}, "key k: cheap_at needs a money budget of the key's own (spend 10/d cheap_at 80%)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := base
			if tc.pool.Name != "" {
				cfg.Pools = []PoolConfig{tc.pool}
			}
			if tc.key.Name != "" {
				cfg.Keys = []Key{tc.key}
			}
			err := cfg.Validate()
			if tc.want == "" && err != nil || tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}
