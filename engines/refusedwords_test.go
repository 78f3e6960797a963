package engines

import (
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A start the scheduler refused did not start: the engine's reasons say
// the refusal, not "started: request".
func TestARefusedStartIsNoStartInTheEnginesReasons(t *testing.T) {
	clk := clock.NewFake()
	e := fakeEngine("mistral", clk, Starting, nil)
	e.startSeq = 3
	e.why.Started, e.why.StartedAt = "request", clk.Now()
	e.refused(3, &BusyError{Engine: "mistral", Box: "memory_budget", Waited: 30 * time.Second,
		WaitingFor: []string{"llama (min_loaded for 40s more)"}})
	why := e.Why()
	if why.Started != "" || !why.StartedAt.IsZero() {
		t.Fatalf("started %q at %v, for a start that never ran", why.Started, why.StartedAt)
	}
	if want := "start refused: no room in the memory_budget after 30s, held by llama (min_loaded for 40s more)"; why.Stopped != want {
		t.Fatalf("stopped %q\nwant    %q", why.Stopped, want)
	}
	if e.State() != Stopped {
		t.Fatalf("state %s", e.State())
	}
}
