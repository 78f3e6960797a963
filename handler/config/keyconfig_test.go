package config

import (
	"fmt"
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

// Tokens that are long enough to be keys.
const (
	teamKey  = "team-a-key-0123456789"
	otherKey = "other-key-0123456789ab"
)

func TestShortOrEmptyGatewayKeysAreRefusedAtLoad(t *testing.T) {
	t.Parallel()
	base := Config{Engines: []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}}
	for _, keys := range []string{"short", "a-long-enough-key-1,", "a-long-enough-key-1,,a-long-enough-key-2", " ", "a-long-enough-key-1 tiny"} {
		cfg := base
		cfg.Keys = []Key{{Value: keys}}
		if err := cfg.Validate(); err == nil {
			t.Errorf("keys %q accepted", keys)
		}
	}
	cfg := base
	cfg.Keys = []Key{{Value: "a-long-enough-key-1, a-long-enough-key-2"}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestOneTokenUnderTwoNamesIsRefusedAtLoad(t *testing.T) {
	t.Parallel()
	base := Config{Engines: []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}}
	for _, keys := range [][]Key{
		{{Name: "a", Value: teamKey, Rate: limitsOf(t, "5/m")}, {Name: "b", Value: teamKey}},
		{{Value: "x-long-enough-key-1, " + teamKey}, {Name: "a", Value: teamKey, Rate: limitsOf(t, "5/m")}},
		{{Name: "ops", Value: teamKey, Operator: true, Models: []string{"m"}}},
	} {
		cfg := base
		cfg.Keys = keys
		err := cfg.Validate()
		if err == nil || strings.Contains(err.Error(), teamKey) {
			t.Errorf("%v: %v", keys, err)
		}
	}
}

func TestOperatorTokensNeverIncludeAKeyWithRules(t *testing.T) {
	t.Parallel()
	keys := []Key{{Name: "team-a", Value: teamKey, Rate: limitsOf(t, "5/m")}, {Name: "ops", Value: otherKey}}
	if got := fmt.Sprint(OperatorTokens(keys)); got != "["+otherKey+"]" {
		t.Fatalf("%s", got)
	}
	keys = append(keys, Key{Name: "admin", Value: "admin-key-0123456789", Operator: true})
	if got := fmt.Sprint(OperatorTokens(keys)); got != "[admin-key-0123456789]" {
		t.Fatalf("marked operators: %s", got)
	}
}

func TestKeyRulesAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	eng := []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}
	for _, tc := range []struct {
		key  Key
		want string
	}{
		{Key{Value: teamKey, Models: []string{"m"}}, "needs a name"},
		{Key{Name: "a", Value: teamKey, Models: []string{"nope"}}, `"nope" is no model or pool`},
		{Key{Name: "a", Value: teamKey, OverBudgetFallback: "m"}, "needs a token or money budget"},
		{Key{Name: "a", Value: teamKey, Tokens: limitsOf(t, "1k/d"), OverBudgetFallback: "x"}, `"x" is no model or pool`},
	} {
		err := Config{Keys: []Key{tc.key}, Engines: eng}.Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%+v: %v", tc.key, err)
		}
	}
}

func TestSplitKeysGivesEachTokenItsKeysRules(t *testing.T) {
	t.Parallel()
	got := SplitKeys([]Key{{Name: "team", Value: "a-0123456789abcdef, b-0123456789abcdef\tc-0123456789abcdef,", Priority: 2}})
	if len(got) != 3 {
		t.Fatalf("%+v", got)
	}
	for i, want := range []string{"a-0123456789abcdef", "b-0123456789abcdef", "c-0123456789abcdef"} {
		if got[i].Value != want || got[i].Name != "team" || got[i].Priority != 2 {
			t.Errorf("%d: %+v", i, got[i])
		}
	}
}

func TestHasLimits(t *testing.T) {
	t.Parallel()
	c := valid()
	if c.HasLimits() {
		t.Fatal("models alone are no limits")
	}
	c.Keys[0].Tokens = limitsOf(t, "1k/d")
	if !c.HasLimits() {
		t.Fatal("a token budget is a limit")
	}
}
