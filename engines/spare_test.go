package engines

import (
	"testing"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A warm spare never makes room: in a box whose budget the running engines
// fill, it stays stopped, and nothing is stopped for it.
func TestAWarmSpareStartsOnlyWhereItFits(t *testing.T) {
	clk := clock.NewFake()
	running := fakeEngine("a", clk, Ready, func(c *Config) { c.Cmd = []string{"llama-server"} })
	spare := fakeEngine("b", clk, Stopped, func(c *Config) { c.Cmd = []string{"llama-server"} })
	testBox(1, 0, running, spare)
	if spare.StartSpare("warm spare") {
		t.Fatal("a spare started where it does not fit")
	}
	if spare.State() != Stopped || running.State() != Ready {
		t.Fatalf("b %v, a %v", spare.State(), running.State())
	}
	remote := fakeEngine("r", clk, Ready, nil)
	if remote.StartSpare("warm spare") {
		t.Fatal("a remote engine was started")
	}
}
