package caddymodule

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyevents"
	_ "github.com/caddyserver/caddy/v2/modules/caddyevents/eventsconfig"
)

func init() { caddy.RegisterModule(eventRecorder{}) }

// eventRecorder is an events handler that remembers what it heard, as an
// exec handler or another module would react to it.
type eventRecorder struct{}

var heard = struct {
	sync.Mutex
	events []string
	signal chan struct{}
}{signal: make(chan struct{}, 100)}

func (eventRecorder) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{ID: "events.handlers.llmgw_test_recorder", New: func() caddy.Module { return new(eventRecorder) }}
}

func (eventRecorder) Handle(_ context.Context, e caddy.Event) error {
	heard.Lock()
	heard.events = append(heard.events, fmt.Sprintf("%s %v", e.Name(), e.Data["engine"]))
	heard.Unlock()
	heard.signal <- struct{}{}
	return nil
}

func (*eventRecorder) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next()
	return nil
}

var _ caddyevents.Handler = eventRecorder{}

func TestEngineLifeAndFallbacksAreCaddyEvents(t *testing.T) {
	fb := newRecorder(t, okChat)
	initRaw(t, testGlobals(`events {
		on llm_gateway.engine_started llmgw_test_recorder
		on llm_gateway.engine_stopped llmgw_test_recorder
		on llm_gateway.fallback_used llmgw_test_recorder
	}`)+fmt.Sprintf(`http://%s {
	llm_gateway {
		engine evented {
			%s
			models evented
			fallback cloud
			fallback_after 100ms
		}
		engine cloud {
			to %s
			models cloud
		}
	}
}`, gwAddr, engineCmd("--load-time 500ms"), fb.URL))
	heard.Lock()
	heard.events = nil
	heard.Unlock()
	post(t, "/v1/chat/completions", `{"model":"evented"}`) // falls back while the engine starts
	awaitState(t, "evented", "ready")
	do(t, mustReq("POST", adminURL+"/llm_gateway/engines/evented/stop"))
	want := map[string]bool{
		"llm_gateway.fallback_used evented":  false,
		"llm_gateway.engine_started evented": false,
		"llm_gateway.engine_stopped evented": false,
	}
	deadline := time.After(10 * time.Second)
	for {
		heard.Lock()
		for _, e := range heard.events {
			if _, ok := want[e]; ok {
				want[e] = true
			}
		}
		heard.Unlock()
		done := true
		for _, got := range want {
			done = done && got
		}
		if done {
			return
		}
		select {
		case <-heard.signal:
		case <-deadline:
			t.Fatalf("events heard: %v", want)
		}
	}
}
