package engines

import (
	"testing"
	"time"

	"github.com/llmgateway/caddy-llm-gateway/internal/clock"
)

// A start whose claim waits in a box is waiting for room, not starting.
func TestAStartWaitingForItsTurnSaysSo(t *testing.T) {
	clk := clock.NewFake()
	held := fakeEngine("llama", clk, Ready, nil)
	cold := fakeEngine("mistral", clk, Starting, nil)
	b := testBox(1, time.Minute, held, cold)
	if cold.WaitingForRoom() {
		t.Fatal("waiting with no claim")
	}
	b.mu.Lock()
	b.claims = append(b.claims, &claim{e: cold, need: 1, since: clk.Now()})
	b.mu.Unlock()
	if !cold.WaitingForRoom() || held.WaitingForRoom() {
		t.Fatalf("mistral waiting %v, llama waiting %v", cold.WaitingForRoom(), held.WaitingForRoom())
	}
}
