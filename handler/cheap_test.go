package handler

import (
	"net/http"
	"slices"
	"testing"

	"go.uber.org/zap"

	"github.com/llmgateway/caddy-llm-gateway/engines"
	"github.com/llmgateway/caddy-llm-gateway/handler/config"
	"github.com/llmgateway/caddy-llm-gateway/handler/keys"
	"github.com/llmgateway/caddy-llm-gateway/internal/price"
	"github.com/llmgateway/caddy-llm-gateway/quota"
)

// pricedPool is a gateway whose pool p has, in this order, a cloud engine
// priced $3/$15, two local engines (free: unpriced), and a cheaper priced
// one at $0.50/$1.50.
func pricedPool(t *testing.T, prefer string) *Gateway {
	t.Helper()
	rate := func(s string) price.Rate {
		r, err := price.ParseRate(s)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	cfg := config.Config{
		Engines: []engines.Config{
			{Name: "cloud", To: "http://127.0.0.1:1", Models: []string{"m"}},
			{Name: "gpu", To: "http://127.0.0.1:2", Models: []string{"m"}},
			{Name: "mid", To: "http://127.0.0.1:3", Models: []string{"m"}},
			{Name: "gpu2", To: "http://127.0.0.1:4", Models: []string{"m"}},
		},
		Prices: []config.Price{
			{Model: "cloud", Input: rate("3"), Output: rate("15")},
			{Model: "mid", Input: rate("0.5"), Output: rate("1.5")},
		},
		Pools: []config.PoolConfig{{Name: "p", Members: []string{"cloud", "gpu", "mid", "gpu2"}, Prefer: prefer}},
	}
	var es []*engines.Engine
	for _, ec := range cfg.Engines {
		e, err := engines.New(ec, http.DefaultTransport, zap.NewNop())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { e.Destruct() })
		es = append(es, e)
	}
	g, err := New(cfg, es, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// membersPlan is the pool's members as its plan holds them, in config
// order (what the balance policy chose does not matter here).
func membersPlan(p *pool) []candidate {
	var plan []candidate
	for _, m := range p.members {
		plan = append(plan, candidate{rt: m.rt, model: m.model, role: rolePool, acquire: true, brk: m.brk, label: m.id})
	}
	return plan
}

func names(plan []candidate) []string {
	var out []string
	for _, c := range plan {
		out = append(out, c.name())
	}
	return out
}

// prefer cheap: the free members first, in the pool's order, then the
// priced ones by price; the pool choice says why the first was chosen.
func TestPreferCheapTriesTheCheapestMemberFirstTiesInThePoolsOrder(t *testing.T) {
	g := pricedPool(t, config.PreferCheap)
	p := g.pools["p"]
	res := &Result{PoolChoice: ChoiceRotation}
	plan := g.preferCheap(&request{}, p, membersPlan(p), res)
	if got, want := names(plan), []string{"gpu", "gpu2", "mid", "cloud"}; !slices.Equal(got, want) {
		t.Fatalf("order %v, want %v", got, want)
	}
	if res.PoolChoice != ChoiceCheap {
		t.Fatalf("pool choice %q", res.PoolChoice)
	}
	// the pool's own order already had a free member first: its reason stands
	res = &Result{PoolChoice: ChoiceLoad}
	plan = membersPlan(p)
	plan[0], plan[1] = plan[1], plan[0]
	if got := names(g.preferCheap(&request{}, p, plan, res)); !slices.Equal(got, []string{"gpu", "gpu2", "mid", "cloud"}) || res.PoolChoice != ChoiceLoad {
		t.Fatalf("order %v, choice %q", got, res.PoolChoice)
	}
}

// Without prefer cheap, the pool's order holds until a key with cheap_at
// has spent its share: at 80 % of its $10 (what requests in flight hold,
// this one's included), the cheapest go first; a key without cheap_at, or
// with no money budget, never moves.
func TestAKeyPastItsCheapAtShareMovesToTheCheapestMembers(t *testing.T) {
	g := pricedPool(t, "")
	p := g.pools["p"]
	ten := int64(10 * price.Dollar)
	alice := &keys.Rules{Name: "alice", CheapAt: 80}
	for _, tc := range []struct {
		name  string
		key   *keys.Rules
		left  quota.Headroom
		first string
	}{
		{"no key", nil, quota.Headroom{}, "cloud"},
		{"no money budget", alice, quota.Headroom{}, "cloud"},
		{"79 % spent", alice, quota.Headroom{Limit: ten, Remaining: ten * 21 / 100}, "cloud"},
		{"80 % spent", alice, quota.Headroom{Limit: ten, Remaining: ten * 20 / 100}, "gpu"},
		{"all spent", alice, quota.Headroom{Limit: ten}, "gpu"},
		{"no cheap_at", &keys.Rules{Name: "bob"}, quota.Headroom{Limit: ten}, "cloud"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			res := &Result{PoolChoice: ChoiceRotation}
			plan := g.preferCheap(&request{key: tc.key, spendLeft: tc.left}, p, membersPlan(p), res)
			if plan[0].name() != tc.first || len(plan) != 4 {
				t.Fatalf("order %v, want %s first", names(plan), tc.first)
			}
			if moved := tc.first != "cloud"; moved != (res.PoolChoice == ChoiceCheap) {
				t.Fatalf("pool choice %q", res.PoolChoice)
			}
		})
	}
}
