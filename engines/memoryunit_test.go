package engines

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A group's figures in /llm_gateway/memory are turns, not bytes, and say
// so: a group of two showed "used": 1, "budget": 1 beside byte counts.
func TestAGroupsFiguresSayTheyAreTurns(t *testing.T) {
	clk := clock.NewFake()
	e := fakeEngine("qwen", clk, Ready, func(c *Config) { c.Memory = 12 << 30 })
	budget := testBox(24<<30, time.Second, e)
	if u := budget.use(); u.Unit != "bytes" || u.Used != 12<<30 {
		t.Fatalf("a memory_budget: %+v", u)
	}
	g := fakeEngine("gemma", clk, Ready, nil)
	group := testBox(1, time.Second, g)
	group.group, group.name = true, "group:gpu"
	u := group.use()
	b, _ := json.Marshal(u)
	if u.Unit != "turns" || u.Group != "gpu" || !strings.Contains(string(b), `"unit":"turns","used":1,"budget":1`) {
		t.Fatalf("a group: %s", b)
	}
}
