package config

import (
	"encoding/json"
	"strings"
	"testing"
)

// dynamicPool is a valid config whose pool takes its members from DNS,
// each made from engine a.
func dynamicPool() Config {
	c := valid()
	c.Pools = append(c.Pools, PoolConfig{Name: "nodes", Template: "a",
		Dynamic: json.RawMessage(`{"source":"srv","name":"_llm._tcp.nodes.test"}`)})
	c.Keys = nil
	return c
}

func TestADynamicPoolIsValidWithATemplate(t *testing.T) {
	c := dynamicPool()
	c.Pools = c.Pools[1:] // engine a is the template: no written pool may name it
	if err := c.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if !c.Templates()["a"] || c.Templates()["b"] {
		t.Fatalf("templates: %v", c.Templates())
	}
	if got := c.WithDefaults().Pools[0].FailoverAttempts; got != MaxDynamicMembers {
		t.Fatalf("a dynamic pool's default failover attempts: %d, want every member it may have", got)
	}
}

func TestValidateRefusesADynamicPoolThat(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"has a template a written pool names", func(c *Config) {}, "member a is the template of pool nodes"},
		{"has no template", func(c *Config) { c.Pools = c.Pools[1:]; c.Pools[0].Template = "" }, "dynamic needs a template"},
		{"names no engine as its template", func(c *Config) { c.Pools = c.Pools[1:]; c.Pools[0].Template = "x" }, "template x is not an engine"},
		{"has written members too", func(c *Config) { c.Pools = c.Pools[1:]; c.Pools[0].Members = []string{"b"} }, "not both"},
		{"has a template the gateway starts", func(c *Config) {
			c.Pools = c.Pools[1:]
			c.Engines[0] = managed("a", "m1")
		}, "must be a remote engine"},
		{"has a template another engine falls back to", func(c *Config) {
			c.Pools = c.Pools[1:]
			c.Engines[1].Fallback = "a"
		}, "its fallback a is the template"},
		{"is a template without a source", func(c *Config) {
			c.Pools = c.Pools[1:]
			c.Pools[0].Dynamic = nil
			c.Pools[0].Members = []string{"b"}
		}, "needs a source of members"},
	} {
		c := dynamicPool()
		tc.edit(&c)
		err := c.WithDefaults().Validate()
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", tc.name, err, tc.want)
		}
	}
}
