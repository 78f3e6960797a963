package handler

import (
	"slices"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// fixedIssued is a keys.Issued of fixed tokens, as the keystore package
// answers.
type fixedIssued map[string]*keys.Rules

func (f fixedIssued) Find(token string) (*keys.Rules, error) { return f[token], nil }

func (f fixedIssued) All() []*keys.Rules {
	var out []*keys.Rules
	for _, kr := range f {
		out = append(out, kr)
	}
	return out
}

// An issued key passes the same door as a key of the config: its models,
// its rates, its usage by name; and a gateway that takes issued keys is
// closed even before any is issued.
func TestAnIssuedKeyPassesTheSameDoor(t *testing.T) {
	const issued = "sk-llmgw-issued-key-0123456789"
	up := newUsageEngine(t, "demo", 10)
	cfg := config.Config{
		Keys:       []config.Key{{Name: "ops", Value: opsKey}},
		IssuedKeys: &config.IssuedKeys{},
		Engines:    []engines.Config{{Name: "demo", To: up.URL, Models: []string{"demo"}}, {Name: "other", To: up.URL, Models: []string{"other"}}},
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	lim, err := quota.Open(quota.Config{Clock: clock.NewFake()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lim.Close() })
	g, url := testGateway(t, cfg, clock.NewFake())
	g.SetLimiter(lim)
	g.SetIssued(fixedIssued{issued: keys.NewRules(config.Key{Name: "alice", Models: []string{"demo"}, Rate: limits(t, "2/m")})})

	body := `{"model":"demo","messages":[]}`
	for i, want := range []int{200, 200, 429} {
		if st, out := call(t, url, issued, "POST", "/v1/chat/completions", body); st != want {
			t.Fatalf("request %d: %d %s", i+1, st, out)
		}
	}
	if st, out := call(t, url, issued, "POST", "/v1/chat/completions", `{"model":"other","messages":[]}`); st != 403 {
		t.Fatalf("a model the key may not use: %d %s", st, out)
	}
	if st, _ := call(t, url, "sk-llmgw-nobody-0123456789", "GET", "/v1/models", ""); st != 401 {
		t.Fatalf("an unknown token: %d", st)
	}
	usage := g.KeyUsage()
	if len(usage) != 1 || usage[0].Key != "alice" || usage[0].Limits[0].Used != 2 {
		t.Fatalf("usage %+v", usage)
	}
	if !g.Knows("demo") || g.Knows("nope") || !slices.Equal(g.KeyNames(), []string{"ops"}) {
		t.Fatal("what the admin API checks an issued key against")
	}

	// before the store is handed over, and with none issued
	closed, closedURL := testGateway(t, config.Config{IssuedKeys: &config.IssuedKeys{}, Engines: cfg.Engines[:1]}, nil)
	for _, when := range []string{"before the store", "none issued"} {
		if st, _ := call(t, closedURL, "", "POST", "/v1/chat/completions", body); st != 401 {
			t.Fatalf("a gateway that takes issued keys, %s: %d", when, st)
		}
		closed.SetIssued(fixedIssued{})
	}
}
