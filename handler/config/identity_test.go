package config

import (
	"strings"
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/engines"
)

func TestIdentityBlocksAreCheckedAtLoad(t *testing.T) {
	t.Parallel()
	eng := []engines.Config{{Name: "e", To: "http://127.0.0.1:1", Models: []string{"m"}}}
	ok := func() *Identity {
		return &Identity{User: "{http.auth.user.id}", Users: []Key{{Name: "alice", Models: []string{"m"}}}}
	}
	if err := (Config{Identity: ok(), Engines: eng}).Validate(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		change func(*Identity, *Config)
		want   string
	}{
		{func(id *Identity, _ *Config) { id.User = "alice" }, "takes a placeholder"},
		{func(id *Identity, _ *Config) { id.User = "{a}{b}" }, "takes a placeholder"},
		{func(id *Identity, _ *Config) { id.Groups = "eng" }, "groups takes a placeholder"},
		{func(id *Identity, _ *Config) { id.Users = append(id.Users, Key{Name: "alice"}) }, "user alice is given twice"},
		{func(id *Identity, _ *Config) { id.GroupRules = []Key{{}} }, "a group block needs a name"},
		{func(id *Identity, _ *Config) { id.Users[0].Models = []string{"nope"} }, `identity user alice: models: "nope" is no model`},
		{func(id *Identity, _ *Config) { id.Default = &Key{Operator: true} }, "never an operator"},
		{func(_ *Identity, c *Config) { c.Keys = []Key{{Name: "user:alice", Value: teamKey}} }, "is an identity's"},
	} {
		c := Config{Identity: ok(), Engines: eng}
		tc.change(c.Identity, &c)
		if err := c.Validate(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%v, want %q", err, tc.want)
		}
	}
}
